package session

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"logitscope/internal/format/chain"
	"logitscope/internal/format/kldbase"
	"logitscope/internal/text/tokenizer"
)

// PanelWindow is one window of a panel as its file gives it: the tokens,
// the attention mask, and the window's id, document, domain and role
// (a .jsonl line's fields; a text panel's windows have only ids, their
// 0-based index).
type PanelWindow struct {
	ID, DocumentID, Domain, Role string
	IDs                          []int
	// Mask is the attention mask, nil when the panel gave none (every
	// token attended).
	Mask []int
	// Span is the attended tokens, [Span[0], Span[1]): the tokens the
	// engine runs. A mask is one contiguous run of ones (left or right
	// padding), so its rows are exactly the seed's prediction positions
	// (i where mask[i] and mask[i+1] are both 1).
	Span [2]int
}

// Tokens is what the engine runs of the window: its attended span.
func (w PanelWindow) Tokens() []int { return w.IDs[w.Span[0]:w.Span[1]] }

// Entry is the window's entry in a panel receipt.
func (w PanelWindow) Entry() chain.PanelWindow {
	mask := w.Mask
	if mask == nil {
		mask = make([]int, len(w.IDs))
		for i := range mask {
			mask[i] = 1
		}
	}
	return chain.PanelWindow{WindowID: w.ID, DocumentID: w.DocumentID, Domain: w.Domain, Role: w.Role,
		Tokens: len(w.IDs), TokenIDsSHA256: chain.IntsSHA256(w.IDs), AttentionMaskSHA256: chain.IntsSHA256(mask),
		PredictionPositions: w.Span[1] - w.Span[0] - 1}
}

// PanelFile is a panel's windows and, sealed, its receipt.
type PanelFile struct {
	Windows []PanelWindow
	Receipt *chain.Panel
}

// Tokens is every window's attended tokens: a panel request's Windows.
func (p *PanelFile) Tokens() [][]int {
	out := make([][]int, len(p.Windows))
	for i, w := range p.Windows {
		out[i] = w.Tokens()
	}
	return out
}

// ReadPanel reads a panel's windows as the tokens the engine runs (see
// ReadPanelFile).
func ReadPanel(path string, tok *tokenizer.Tokenizer, n int, prefix []int) ([][]int, error) {
	p, err := ReadPanelFile(path, tok, n, prefix)
	if err != nil {
		return nil, err
	}
	return p.Tokens(), nil
}

// ReadPanelFile reads teacher-forced windows: JSON lines when path ends in
// .jsonl (a list of token ids, {"ids": [...]}, or the seed's object with
// input_ids, attention_mask, window_id, document_id, domain and role),
// taken as they are, else a text that is tokenized whole and cut into
// windows of n tokens that each start with prefix (see Windows), or
// llama.cpp's --kl-divergence-base file, whose chunks are the windows,
// each run as llama.cpp runs it: its first token replaced by the
// prefix's BOS when there is one.
//
// Its receipt is derived from the windows, sealed; when a receipt lies
// beside the panel (chain.PanelPath), the windows must match it, or the
// panel is refused naming the first window that changed.
func ReadPanelFile(path string, tok *tokenizer.Tokenizer, n int, prefix []int) (*PanelFile, error) {
	p, err := readWindows(path, tok, n, prefix)
	if err != nil {
		return nil, err
	}
	p.Receipt = &chain.Panel{}
	for _, w := range p.Windows {
		p.Receipt.Windows = append(p.Receipt.Windows, w.Entry())
	}
	if err := chain.Seal(p.Receipt); err != nil {
		return nil, err
	}
	rpath := chain.PanelPath(path)
	switch recorded, err := chain.ReadPanel(rpath); {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := recorded.Check(p.Receipt); err != nil {
			return nil, fmt.Errorf("%s: %v (its receipt is %s)", path, err, rpath)
		}
	}
	return p, nil
}

func readWindows(path string, tok *tokenizer.Tokenizer, n int, prefix []int) (*PanelFile, error) {
	p := &PanelFile{}
	add := func(ids []int) {
		p.Windows = append(p.Windows, PanelWindow{ID: strconv.Itoa(len(p.Windows)), IDs: ids, Span: [2]int{0, len(ids)}})
	}
	if kldbase.Is(path) {
		f, err := kldbase.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		for _, w := range f.Windows(prefix) {
			add(w)
		}
		return p, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if !strings.HasSuffix(path, ".jsonl") {
		for _, w := range Windows(tok.Encode(string(data)), n, prefix) {
			add(w)
		}
		if len(p.Windows) == 0 {
			return nil, fmt.Errorf("%s: no window of at least 2 tokens", path)
		}
		return p, nil
	}
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	seen := map[string]int{} // window id → line
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		w, err := parseWindow(text)
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: %v", path, line, err)
		}
		if w.ID == "" {
			w.ID = strconv.Itoa(len(p.Windows))
		}
		if prev, dup := seen[w.ID]; dup {
			return nil, fmt.Errorf("%s: line %d: window_id %q is line %d's too", path, line, w.ID, prev)
		}
		seen[w.ID] = line
		p.Windows = append(p.Windows, w)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if len(p.Windows) == 0 {
		return nil, fmt.Errorf("%s: no window of at least 2 tokens", path)
	}
	return p, nil
}

// line is a .jsonl window as an object: the seed's fields, or logitscope's
// older {"ids": [...]}.
type line struct {
	IDs        []int  `json:"ids"`
	InputIDs   []int  `json:"input_ids"`
	Mask       []int  `json:"attention_mask"`
	WindowID   *label `json:"window_id"`
	DocumentID *label `json:"document_id"`
	Domain     string `json:"domain"`
	Role       string `json:"role"`
}

// label is an id the seed writes as a number or a string, kept as text.
type label string

func (l *label) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*l = label(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("want a number or a string, got %.40s", b)
	}
	*l = label(n.String())
	return nil
}

// parseWindow reads one .jsonl line and checks its tokens and mask.
func parseWindow(text string) (PanelWindow, error) {
	var w PanelWindow
	if err := json.Unmarshal([]byte(text), &w.IDs); err != nil {
		var l line
		if err := json.Unmarshal([]byte(text), &l); err != nil || (l.IDs == nil && l.InputIDs == nil) {
			return w, fmt.Errorf(`want [ids...], {"ids": [...]} or {"input_ids": [...], "attention_mask": [...], ...}, got %.40q`, text)
		}
		if l.IDs != nil && l.InputIDs != nil {
			return w, errors.New(`both "ids" and "input_ids": give one`)
		}
		w.IDs, w.Mask, w.Domain, w.Role = l.IDs, l.Mask, l.Domain, l.Role
		if l.InputIDs != nil {
			w.IDs = l.InputIDs
		}
		if l.WindowID != nil {
			if w.ID = string(*l.WindowID); w.ID == "" {
				return w, errors.New("window_id is empty")
			}
		}
		if l.DocumentID != nil {
			w.DocumentID = string(*l.DocumentID)
		}
	}
	where := ""
	if w.ID != "" {
		where = "window " + w.ID + ": "
	}
	for _, id := range w.IDs {
		if id < 0 { // a token id indexes the vocabulary
			return w, fmt.Errorf("%stoken id %d is negative", where, id)
		}
	}
	span, err := attended(w.IDs, w.Mask)
	if err != nil {
		return w, fmt.Errorf("%s%v", where, err)
	}
	w.Span = span
	return w, nil
}

// attended is the span of tokens the mask attends: all of them without a
// mask. A mask of 0s and 1s as long as the ids whose ones are contiguous
// (left or right padding, or none) is run as that span from an empty
// cache: padded positions are attended by nothing in transformers either,
// and RoPE makes the scores depend on relative positions only, so the
// span's rows are the seed's (to rounding for left padding, whose
// positions transformers counts from the pads). A mask with a hole (two
// documents packed in one window) would need a mask inside the engine's
// attention, which it does not have: it is refused rather than run wrong.
func attended(ids, mask []int) ([2]int, error) {
	if mask == nil {
		if len(ids) < 2 {
			return [2]int{}, fmt.Errorf("a window needs at least 2 tokens, got %d", len(ids))
		}
		return [2]int{0, len(ids)}, nil
	}
	if len(mask) != len(ids) {
		return [2]int{}, fmt.Errorf("attention_mask has %d values for %d tokens", len(mask), len(ids))
	}
	a, b := -1, -1
	for i, m := range mask {
		switch {
		case m != 0 && m != 1:
			return [2]int{}, fmt.Errorf("attention_mask[%d] is %d: want 0 or 1", i, m)
		case m == 1 && a < 0:
			a, b = i, i+1
		case m == 1 && b < i:
			return [2]int{}, fmt.Errorf("attention_mask has a gap at [%d, %d) inside its attended tokens [%d, %d): logitscope runs one contiguous span per window (left or right padding); split the window at the gap", b, i, a, lastOne(mask)+1)
		case m == 1:
			b = i + 1
		}
	}
	if b-a < 2 {
		return [2]int{}, fmt.Errorf("attention_mask attends %d tokens: a window needs at least 2 (one prediction position)", max(b-a, 0))
	}
	return [2]int{a, b}, nil
}

func lastOne(mask []int) int {
	for i := len(mask) - 1; i >= 0; i-- {
		if mask[i] == 1 {
			return i
		}
	}
	return -1
}
