package tokenizer

import (
	"encoding/json"
	"fmt"
	"sort"
)

// template is a TemplateProcessing post-processor: the special tokens put
// around one text (single) or two (pair) when special tokens are added.
type template struct {
	single, pair []piece
}

// piece is a special token's ids (seq -1) or sequence A (0) or B (1).
type piece struct {
	seq int
	ids []int
}

// apply joins the encodings of the sequences as t says. Without
// addSpecial only the sequences remain, in template order.
func (t *template) apply(a, b []int, pair, addSpecial bool) []int {
	tmpl := t.single
	if pair {
		tmpl = t.pair
		if len(tmpl) == 0 {
			return append(append([]int{}, a...), b...)
		}
	}
	out := make([]int, 0, len(a)+len(b)+4)
	for _, p := range tmpl {
		switch {
		case p.seq == 0:
			out = append(out, a...)
		case p.seq == 1:
			out = append(out, b...)
		case addSpecial:
			out = append(out, p.ids...)
		}
	}
	return out
}

type templateJSON struct {
	Single        []json.RawMessage `json:"single"`
	Pair          []json.RawMessage `json:"pair"`
	SpecialTokens map[string]struct {
		ID  string `json:"id"`
		IDs []int  `json:"ids"`
	} `json:"special_tokens"`
}

type pieceJSON struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

// parsePostProcessor returns the template of post_processor, nil when it
// adds no tokens. ByteLevel as a post-processor only trims offsets.
// known says whether an id names a token.
func parsePostProcessor(raw json.RawMessage, field string, known func(int) bool) (*template, error) {
	if isNull(raw) {
		return nil, nil
	}
	c, err := parseComponent(raw, field)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "ByteLevel":
		return nil, nil
	case "TemplateProcessing":
		return parseTemplate(raw, field, known)
	case "Sequence":
		var found *template
		for i, r := range c.Processors {
			f := fmt.Sprintf("%s.processors[%d]", field, i)
			t, err := parsePostProcessor(r, f, known)
			if err != nil {
				return nil, err
			}
			if t != nil && found != nil {
				// Hugging Face cannot run a second template over the
				// output of the first (it panics).
				return nil, fmt.Errorf("%s: a second TemplateProcessing is not supported", f)
			}
			if t != nil {
				found = t
			}
		}
		return found, nil
	}
	return nil, fmt.Errorf("%s.type: unsupported post-processor %q (supported: TemplateProcessing, ByteLevel, Sequence)", field, short(c.Type))
}

func parseTemplate(raw json.RawMessage, field string, known func(int) bool) (*template, error) {
	var tj templateJSON
	if err := json.Unmarshal(raw, &tj); err != nil {
		return nil, fmt.Errorf("%s: %v", field, jsonError(err))
	}
	// Check special_tokens in a fixed order, so that errors are stable.
	names := make([]string, 0, len(tj.SpecialTokens))
	for name := range tj.SpecialTokens {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for i, id := range tj.SpecialTokens[name].IDs {
			if !known(id) {
				return nil, fmt.Errorf("%s.special_tokens[%q].ids[%d]: %d is not a token id", field, short(name), i, id)
			}
		}
	}
	read := func(list []json.RawMessage, which string, allowB bool) ([]piece, error) {
		var out []piece
		for i, r := range list {
			f := fmt.Sprintf("%s.%s[%d]", field, which, i)
			var pj pieceJSON
			if err := json.Unmarshal(r, &pj); err != nil {
				return nil, fmt.Errorf("%s: %v", f, jsonError(err))
			}
			switch {
			case pj.SpecialToken != nil && pj.Sequence == nil:
				st, ok := tj.SpecialTokens[pj.SpecialToken.ID]
				if !ok {
					return nil, fmt.Errorf("%s.SpecialToken.id: %q is not in %s.special_tokens", f, short(pj.SpecialToken.ID), field)
				}
				out = append(out, piece{seq: -1, ids: st.IDs})
			case pj.Sequence != nil && pj.SpecialToken == nil:
				switch {
				case pj.Sequence.ID == "A":
					out = append(out, piece{seq: 0})
				case pj.Sequence.ID == "B" && allowB:
					out = append(out, piece{seq: 1})
				default:
					return nil, fmt.Errorf("%s.Sequence.id: unsupported %q in the %s template", f, short(pj.Sequence.ID), which)
				}
			default:
				return nil, fmt.Errorf("%s: want {\"SpecialToken\": ...} or {\"Sequence\": ...}", f)
			}
		}
		return out, nil
	}
	var t template
	var err error
	if t.single, err = read(tj.Single, "single", false); err != nil {
		return nil, err
	}
	if t.pair, err = read(tj.Pair, "pair", true); err != nil {
		return nil, err
	}
	// Each sequence exactly once, or text would be lost or repeated.
	count := func(ps []piece, seq int) int {
		n := 0
		for _, p := range ps {
			if p.seq == seq {
				n++
			}
		}
		return n
	}
	if count(t.single, 0) != 1 {
		return nil, fmt.Errorf("%s.single: has sequence A %d times, want once", field, count(t.single, 0))
	}
	if len(t.pair) > 0 && (count(t.pair, 0) != 1 || count(t.pair, 1) != 1) {
		return nil, fmt.Errorf("%s.pair: has sequence A %d times and B %d times, want each once", field, count(t.pair, 0), count(t.pair, 1))
	}
	return &t, nil
}

// prefixSuffix returns the ids the single template puts before and after
// the text.
func (t *template) prefixSuffix() (prefix, suffix []int) {
	seen := false
	for _, p := range t.single {
		switch {
		case p.seq == 0:
			seen = true
		case !seen:
			prefix = append(prefix, p.ids...)
		default:
			suffix = append(suffix, p.ids...)
		}
	}
	return prefix, suffix
}
