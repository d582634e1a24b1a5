package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A preTokenizer cuts a normalized piece of text into words, as Hugging
// Face's pre-tokenizers do. split calls emit with each non-empty piece of s
// in order; first says whether s begins at the start of the input text,
// and emit says the same of each piece (Metaspace's prepend_scheme "first"
// depends on it).
type preTokenizer interface {
	split(s string, first bool, emit func(piece string, first bool))
}

// runStages applies the pre-tokenizers in turn, as a Sequence does.
func runStages(stages []preTokenizer, s string, first bool, emit func(string, bool)) {
	if len(stages) == 0 {
		emit(s, first)
		return
	}
	if len(stages) == 1 {
		stages[0].split(s, first, emit)
		return
	}
	stages[0].split(s, first, func(p string, f bool) { runStages(stages[1:], p, f, emit) })
}

// splitBehavior is Hugging Face's SplitDelimiterBehavior.
type splitBehavior uint8

const (
	isolated splitBehavior = iota
	removed
	mergedWithPrevious
	mergedWithNext
	contiguous
)

var behaviors = map[string]splitBehavior{
	"Isolated":           isolated,
	"Removed":            removed,
	"MergedWithPrevious": mergedWithPrevious,
	"MergedWithNext":     mergedWithNext,
	"Contiguous":         contiguous,
}

// splitPre is the Split pre-tokenizer (and the splitting part of
// Metaspace and Digits).
type splitPre struct {
	m        matcher
	behavior splitBehavior
	invert   bool
}

type span struct {
	start, end int
	match      bool // a match of the pattern; for Removed, a piece to drop
}

func (p *splitPre) split(s string, first bool, emit func(string, bool)) {
	if s == "" {
		return
	}
	if p.behavior == isolated {
		// Every piece is kept, match or not, so invert changes nothing.
		done := 0
		p.m.each(s, func(start, end int) {
			if start > done {
				emit(s[done:start], first && done == 0)
			}
			if end > start {
				emit(s[start:end], first && start == 0)
			}
			done = end
		})
		if done < len(s) {
			emit(s[done:], first && done == 0)
		}
		return
	}
	// The spans covering s, as Pattern::find_matches lists them.
	var spans []span
	done := 0
	p.m.each(s, func(start, end int) {
		if start != done {
			spans = append(spans, span{done, start, false})
		}
		spans = append(spans, span{start, end, true})
		done = end
	})
	if done != len(s) {
		spans = append(spans, span{done, len(s), false})
	}
	if p.invert {
		for i := range spans {
			spans[i].match = !spans[i].match
		}
	}
	for _, sp := range applyBehavior(spans, p.behavior) {
		if !sp.match && sp.end > sp.start {
			emit(s[sp.start:sp.end], first && sp.start == 0)
		}
	}
}

// applyBehavior follows NormalizedString::split; in its result match marks
// the spans to remove.
func applyBehavior(spans []span, b splitBehavior) []span {
	var out []span
	prev := false
	switch b {
	case removed:
		return spans
	case contiguous:
		for _, sp := range spans {
			if sp.match == prev && len(out) > 0 {
				out[len(out)-1].end = sp.end
			} else {
				out = append(out, span{sp.start, sp.end, false})
			}
			prev = sp.match
		}
	case mergedWithPrevious:
		for _, sp := range spans {
			if sp.match && !prev && len(out) > 0 {
				out[len(out)-1].end = sp.end
			} else {
				out = append(out, span{sp.start, sp.end, false})
			}
			prev = sp.match
		}
	case mergedWithNext:
		for i := len(spans) - 1; i >= 0; i-- {
			sp := spans[i]
			if sp.match && !prev && len(out) > 0 {
				out[len(out)-1].start = sp.start
			} else {
				out = append(out, span{sp.start, sp.end, false})
			}
			prev = sp.match
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	default: // isolated
		for _, sp := range spans {
			out = append(out, span{sp.start, sp.end, false})
		}
	}
	return out
}

// runeMatcher matches each character for which f holds, one at a time, as
// a char predicate pattern does in Hugging Face.
type runeMatcher func(rune) bool

func (f runeMatcher) each(s string, fn func(start, end int)) {
	for i := 0; i < len(s); {
		r, w := decodeRune(s, i)
		if f(r) {
			fn(i, i+w)
		}
		i += w
	}
}

// byteLevelPre is the ByteLevel pre-tokenizer. When it is the last stage
// the model maps bytes itself (bpe.byteMode) and mapBytes is false, so that
// words stay raw bytes; an earlier one must rewrite the text for the stages
// after it.
type byteLevelPre struct {
	addPrefixSpace bool
	regex          matcher // nil: use_regex false
	mapBytes       bool
}

func (p *byteLevelPre) split(s string, first bool, emit func(string, bool)) {
	if s == "" {
		return
	}
	if p.addPrefixSpace && s[0] != ' ' {
		s = " " + s
	}
	out := func(piece string, f bool) {
		if p.mapBytes {
			piece = byteLevel(piece)
		}
		emit(piece, f)
	}
	if p.regex == nil {
		out(s, first)
		return
	}
	(&splitPre{m: p.regex}).split(s, first, out)
}

// metaspacePre is the Metaspace pre-tokenizer: spaces become the
// replacement character, which is prepended per prepend_scheme and, with
// split, starts each word.
type metaspacePre struct {
	rep    string
	scheme string // "always", "first" or "never"
	split_ bool
}

func (p *metaspacePre) split(s string, first bool, emit func(string, bool)) {
	if s == "" {
		return
	}
	s = strings.ReplaceAll(s, " ", p.rep)
	if !strings.HasPrefix(s, p.rep) && (p.scheme == "always" || (p.scheme == "first" && first)) {
		s = p.rep + s
	}
	if !p.split_ {
		emit(s, first)
		return
	}
	(&splitPre{m: literalMatcher(p.rep), behavior: mergedWithNext}).split(s, first, emit)
}

func parsePreTokenizer(raw json.RawMessage, field string) ([]preTokenizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	c, err := parseComponent(raw, field)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "Sequence":
		var stages []preTokenizer
		for i, r := range c.PreTokenizers {
			s, err := parsePreTokenizer(r, fmt.Sprintf("%s.pretokenizers[%d]", field, i))
			if err != nil {
				return nil, err
			}
			stages = append(stages, s...)
		}
		return stages, nil
	case "Split":
		m, err := parsePattern(c.Pattern, field+".pattern")
		if err != nil {
			return nil, err
		}
		if c.Behavior == nil {
			return nil, fmt.Errorf("%s.behavior: missing", field)
		}
		b, ok := behaviors[*c.Behavior]
		if !ok {
			return nil, fmt.Errorf("%s.behavior: unsupported %q (want Isolated, Removed, MergedWithPrevious, MergedWithNext or Contiguous)", field, short(*c.Behavior))
		}
		return []preTokenizer{&splitPre{m: m, behavior: b, invert: c.Invert != nil && *c.Invert}}, nil
	case "ByteLevel":
		// Hugging Face's defaults: add_prefix_space and use_regex true.
		p := &byteLevelPre{addPrefixSpace: c.AddPrefixSpace == nil || *c.AddPrefixSpace, mapBytes: true}
		if c.UseRegex == nil || *c.UseRegex {
			p.regex = gpt2Matcher{}
		}
		return []preTokenizer{p}, nil
	case "Metaspace":
		rep, scheme, err := parseMetaspace(c, field)
		if err != nil {
			return nil, err
		}
		return []preTokenizer{&metaspacePre{rep: string(rep), scheme: scheme, split_: c.Split == nil || *c.Split}}, nil
	case "Digits":
		b := contiguous
		if c.IndividualDigits != nil && *c.IndividualDigits {
			b = isolated
		}
		// Rust's char::is_numeric: categories Nd, Nl and No.
		return []preTokenizer{&splitPre{m: runeMatcher(unicode.IsNumber), behavior: b}}, nil
	}
	return nil, fmt.Errorf("%s.type: unsupported pre-tokenizer %q (supported: Split, ByteLevel, Metaspace, Digits, Sequence)", field, short(c.Type))
}

// parseMetaspace reads the fields Metaspace has as a pre-tokenizer and as a
// decoder: one replacement character and the prepend scheme, where an old
// add_prefix_space false means "never".
func parseMetaspace(c *component, field string) (rune, string, error) {
	if c.Replacement == nil {
		return 0, "", fmt.Errorf("%s.replacement: missing", field)
	}
	rep, w := utf8.DecodeRuneInString(*c.Replacement)
	if w == 0 || w != len(*c.Replacement) || (rep == utf8.RuneError && w == 1) {
		return 0, "", fmt.Errorf("%s.replacement: %q is not one character", field, short(*c.Replacement))
	}
	scheme := "always"
	if c.PrependScheme != nil {
		scheme = *c.PrependScheme
		switch scheme {
		case "always", "first", "never":
		default:
			return 0, "", fmt.Errorf("%s.prepend_scheme: unsupported %q (want always, first or never)", field, short(scheme))
		}
	}
	if c.AddPrefixSpace != nil && !*c.AddPrefixSpace {
		if scheme != "never" {
			return 0, "", fmt.Errorf("%s.add_prefix_space: false contradicts prepend_scheme %q", field, scheme)
		}
	}
	return rep, scheme, nil
}
