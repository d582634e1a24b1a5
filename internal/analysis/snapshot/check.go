package snapshot

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/format/ggml"
	"logitscope/internal/format/receipt"
	"logitscope/internal/format/routing"
)

// check is Parse's second half: every field the page turns into a class
// name, an index or a lookup is one of the values package margins writes,
// and every shape agrees with the report's, so that a stored document
// (anyone can POST one) renders as the page's own would or not at all.
// Free text (labels, token texts, the criterion's words) stays as it is:
// the page escapes it wherever it shows it.
func (d *Doc) check() error {
	rep := d.Report
	n, vocab := rep.Rows, rep.Vocab
	switch {
	case vocab < 0 || n > 0 && vocab == 0:
		return fmt.Errorf("report.vocab %d: want at least 1", vocab)
	case rep.TopK < 0 || rep.TopK > vocab:
		return fmt.Errorf("report.top_k %d: want 0 to the vocab (%d)", rep.TopK, vocab)
	case d.Ref.Rows != n:
		return fmt.Errorf("ref.rows %d: the report has %d rows", d.Ref.Rows, n)
	case d.Test.Rows != n:
		return fmt.Errorf("test.rows %d: the report has %d rows", d.Test.Rows, n)
	}
	// An empty comparison (no rows: nothing to show) has no rule or
	// statistics to check.
	if n > 0 {
		if err := checkCriterion(rep.Criterion); err != nil {
			return err
		}
		if err := checkSummary(&rep.Summary, n); err != nil {
			return err
		}
	}
	if err := checkIDs("prompt_ids", d.PromptIDs, vocab); err != nil {
		return err
	}
	if err := checkIDs("tokens", d.Tokens, vocab); err != nil {
		return err
	}
	for i := range rep.Positions {
		if err := checkPosition(&rep.Positions[i], i, rep.TopK, vocab); err != nil {
			return err
		}
	}
	if rep.Routing != nil {
		if err := checkRouting(rep); err != nil {
			return err
		}
	}
	for k := range d.Texts {
		if id, err := strconv.Atoi(k); err != nil || id < 0 || id >= vocab || strconv.Itoa(id) != k {
			return fmt.Errorf("texts key %q: want a token id below %d in decimal", k, vocab)
		}
	}
	for _, side := range []struct {
		name string
		g    *GGUF
	}{{"ref", d.Ref.GGUF}, {"test", d.Test.GGUF}} {
		if side.g != nil {
			if err := checkGGUF(side.g); err != nil {
				return fmt.Errorf("%s.gguf: %v", side.name, err)
			}
		}
	}
	for _, side := range []struct {
		name string
		h    *receipt.Hub
	}{{"ref", d.Ref.Hub}, {"test", d.Test.Hub}} {
		switch {
		case side.h == nil:
		case side.h.Format == "" || len(side.h.Format) > 200 || strings.ContainsFunc(side.h.Format, unicode.IsControl):
			return fmt.Errorf("%s.hub.format %q: want a format's name (gptq 4-bit g128 sym)", side.name, side.h.Format)
		case side.h.SHA256 != "" && !isSHA256(side.h.SHA256):
			return fmt.Errorf("%s.hub.sha256 %q: want 64 lowercase hex digits", side.name, side.h.SHA256)
		}
	}
	if d.Split != nil {
		if err := d.checkSplit(); err != nil {
			return err
		}
	}
	if d.Created != "" {
		if _, err := time.Parse(time.RFC3339, d.Created); err != nil {
			return fmt.Errorf("created %q: not an RFC 3339 time", d.Created)
		}
	}
	return d.checkExtras()
}

// checkSplit checks a split in itself (split.Report.Check) and as the
// split of this comparison: its positions, vocab and the reference's and
// the file's choices are the report's.
func (d *Doc) checkSplit() error {
	s, rep := d.Split, d.Report
	switch {
	case s.Report == nil:
		return errors.New("split.report: missing")
	case s.Engine.Rows != rep.Rows:
		return fmt.Errorf("split.engine.rows %d: the report has %d rows", s.Engine.Rows, rep.Rows)
	case s.Report.Positions != rep.Rows || s.Report.Vocab != rep.Vocab || len(rep.Positions) != rep.Rows:
		return fmt.Errorf("split.report: %d positions of vocab %d; the report has %d of %d", s.Report.Positions, s.Report.Vocab, rep.Rows, rep.Vocab)
	}
	if err := s.Report.Check(); err != nil {
		return fmt.Errorf("split.report.%v", err)
	}
	for i, p := range s.Report.Rows {
		if q := rep.Positions[i]; p.Ref != q.RefChoice || p.FileTop != q.TestChoice {
			return fmt.Errorf("split.report.rows[%d]: choices %d and %d; the comparison's %d and %d", i, p.Ref, p.FileTop, q.RefChoice, q.TestChoice)
		}
	}
	if g := s.Engine.GGUF; g != nil {
		if err := checkGGUF(g); err != nil {
			return fmt.Errorf("split.engine.gguf: %v", err)
		}
	}
	return nil
}

func checkCriterion(c margins.Criterion) error {
	switch c.Mode {
	case "sigma":
		if c.SigmaScope != "position" && c.SigmaScope != "capture" {
			return fmt.Errorf("criterion.sigma_scope %q: want position or capture", c.SigmaScope)
		}
	case "abs":
		if c.SigmaScope != "" {
			return fmt.Errorf("criterion.sigma_scope %q: an abs criterion has none", c.SigmaScope)
		}
	default:
		return fmt.Errorf("criterion.mode %q: want sigma or abs", c.Mode)
	}
	return nil
}

func checkSummary(s *margins.Summary, n int) error {
	switch {
	case s.Positions != n:
		return fmt.Errorf("summary.positions %d: the report has %d rows", s.Positions, n)
	case s.Flips < 0 || s.Flips > n:
		return fmt.Errorf("summary.flips %d: want 0 to %d", s.Flips, n)
	case s.CloseFlips < 0 || s.ClearFlips < 0 || s.CloseFlips+s.ClearFlips != s.Flips:
		return fmt.Errorf("summary.close_flips %d and clear_flips %d: want %d flips in all", s.CloseFlips, s.ClearFlips, s.Flips)
	case s.FirstDisagreement < -1 || s.FirstDisagreement >= n:
		return fmt.Errorf("summary.first_disagreement %d: want -1 to %d", s.FirstDisagreement, n-1)
	}
	return nil
}

func checkIDs(field string, ids []int, vocab int) error {
	for i, id := range ids {
		if id < 0 || id >= vocab {
			return fmt.Errorf("%s[%d] %d: want a token id below %d", field, i, id, vocab)
		}
	}
	return nil
}

// checkPosition checks position i; a class must agree with the flip it
// describes, since the strip colours and the summary counts by it.
func checkPosition(p *margins.Position, i, topK, vocab int) error {
	at := "positions[" + strconv.Itoa(i) + "]"
	if p.Index != i {
		return fmt.Errorf("%s.index %d: want %d", at, p.Index, i)
	}
	for _, f := range []struct {
		name string
		id   int
	}{{"ref_choice", p.RefChoice}, {"test_choice", p.TestChoice}, {"rival", p.Rival}, {"target", p.Target}} {
		if f.id < 0 || f.id >= vocab {
			return fmt.Errorf("%s.%s %d: want a token id below %d", at, f.name, f.id, vocab)
		}
	}
	flip := p.RefChoice != p.TestChoice
	if p.Flip != flip {
		return fmt.Errorf("%s.flip %t: ref_choice %d and test_choice %d say %t", at, p.Flip, p.RefChoice, p.TestChoice, flip)
	}
	switch {
	case p.Class != margins.Agree && p.Class != margins.Close && p.Class != margins.Clear:
		return fmt.Errorf("%s.class %q: want agree, close or clear", at, p.Class)
	case (p.Class == margins.Agree) == flip:
		return fmt.Errorf("%s.class %q: flip is %t", at, p.Class, flip)
	case p.MarginOf != "flip" && p.MarginOf != "runner_up":
		return fmt.Errorf("%s.margin_of %q: want flip or runner_up", at, p.MarginOf)
	}
	for _, top := range []struct {
		name string
		toks []margins.Token
	}{{"ref_top", p.RefTop}, {"test_top", p.TestTop}} {
		if len(top.toks) > topK {
			return fmt.Errorf("%s.%s: %d tokens, the report's top_k is %d", at, top.name, len(top.toks), topK)
		}
		for j, t := range top.toks {
			if t.ID < 0 || t.ID >= vocab {
				return fmt.Errorf("%s.%s[%d].id %d: want a token id below %d", at, top.name, j, t.ID, vocab)
			}
		}
	}
	return nil
}

// checkRouting checks a mixture of experts' routing comparison: a layout
// a reader can label, one position per row whose expert lists fit it, and
// every change and count the one the lists give (the page colours and
// filters positions by them), recomputed as routing.Compare computes them.
func checkRouting(rep *margins.Report) error {
	rt := rep.Routing
	if err := rt.Layout.Check("routing"); err != nil {
		return err
	}
	if len(rt.Positions) != rep.Rows {
		return fmt.Errorf("routing: %d positions, the report has %d rows", len(rt.Positions), rep.Rows)
	}
	flips := make([]bool, rep.Rows)
	for i := range rep.Positions {
		flips[i] = rep.Positions[i].Flip
	}
	for i := range rt.Positions {
		p := &rt.Positions[i]
		at := "routing.positions[" + strconv.Itoa(i) + "]"
		for _, side := range []struct {
			name  string
			lists [][]int
		}{{"ref", p.Ref}, {"test", p.Test}} {
			if len(side.lists) != len(rt.Layers) {
				return fmt.Errorf("%s.%s: %d layers, routing has %d", at, side.name, len(side.lists), len(rt.Layers))
			}
			for j, ids := range side.lists {
				if len(ids) != rt.TopK {
					return fmt.Errorf("%s.%s[%d]: %d experts, top_k is %d", at, side.name, j, len(ids), rt.TopK)
				}
				for k, id := range ids {
					if id < 0 || id >= rt.Experts || slices.Contains(ids[:k], id) {
						return fmt.Errorf("%s.%s[%d]: %v: want distinct experts below %d", at, side.name, j, ids, rt.Experts)
					}
				}
			}
		}
		want := routing.NewPosition(rt.Layout, p.Ref, p.Test)
		if p.Change != want.Change || !slices.Equal(p.SetLayers, want.SetLayers) || !slices.Equal(p.OrderLayers, want.OrderLayers) {
			return fmt.Errorf("%s: change %q (set layers %v, order layers %v): its experts say %q (%v, %v)",
				at, p.Change, p.SetLayers, p.OrderLayers, want.Change, want.SetLayers, want.OrderLayers)
		}
	}
	if want := routing.Summarize(rt.Layout, rt.Positions, flips); !reflect.DeepEqual(rt.Summary, want) {
		return fmt.Errorf("routing.summary %+v: the positions say %+v", rt.Summary, want)
	}
	return nil
}

// noDuplicateKeys refuses an object that names a key twice, at any depth.
// encoding/json keeps the last of them, so a document could show one value
// to a checker that reads the first and another to the page; refusing is
// the only reading every parser agrees on. data must already be valid JSON
// (Parse decodes it first), so the scan only tracks strings, nesting and
// which strings are keys. Written by hand rather than with a JSON library
// that refuses duplicates: this runs in ui.wasm, and one pass over the
// bytes costs a few lines where such a library costs hundreds of KB.
func noDuplicateKeys(data []byte) error {
	type frame struct {
		object bool
		keys   map[string]struct{}
	}
	var stack []frame
	wantKey := false // inside an object, before a key
	for i := 0; i < len(data); i++ {
		switch c := data[i]; c {
		case '{':
			stack = append(stack, frame{object: true})
			wantKey = true
		case '[':
			stack = append(stack, frame{})
			wantKey = false
		case '}', ']':
			stack = stack[:len(stack)-1]
			wantKey = false
		case ',':
			wantKey = len(stack) > 0 && stack[len(stack)-1].object
		case '"':
			start := i
			escaped := false
			for i++; data[i] != '"'; i++ {
				if data[i] == '\\' {
					escaped = true
					i++
				}
			}
			if !wantKey {
				continue
			}
			key := string(data[start+1 : i])
			if escaped {
				if err := json.Unmarshal(data[start:i+1], &key); err != nil {
					return err
				}
			}
			top := &stack[len(stack)-1]
			if _, dup := top.keys[key]; dup {
				return fmt.Errorf("duplicate key %q", key)
			}
			if top.keys == nil {
				top.keys = map[string]struct{}{}
			}
			top.keys[key] = struct{}{}
			wantKey = false
		}
	}
	if len(stack) != 0 {
		return errors.New("unbalanced JSON")
	}
	return nil
}

// checkGGUF checks what the page shows of a GGUF side: a file name, a
// sha256 in lowercase hex when there is one, and counts of tensors per
// ggml type it knows (the page shows their names).
func checkGGUF(g *GGUF) error {
	switch {
	case !GGUFName(g.Name):
		return fmt.Errorf("name %q: not a GGUF file name", g.Name)
	case g.SHA256 != "" && !isSHA256(g.SHA256):
		return fmt.Errorf("sha256 %q: want 64 lowercase hex digits", g.SHA256)
	case g.Bytes < 0:
		return fmt.Errorf("bytes %d: negative", g.Bytes)
	case len(g.Types) == 0:
		return errors.New("types: none")
	}
	for name, n := range g.Types {
		if t, err := ggml.ParseType(name); err != nil || t.String() != name {
			return fmt.Errorf("types: %q is not a ggml type", name)
		}
		if n < 1 {
			return fmt.Errorf("types[%s] %d: want at least 1", name, n)
		}
	}
	return nil
}

func isSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
