package tokenizer

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// addedVocab finds added tokens (like <|im_start|>) in text before the
// model sees it. Like Hugging Face, tokens with "normalized": false are
// matched in the raw text and the others in the normalized text, each
// leftmost first and, at one position, longest first.
type addedVocab struct {
	byContent map[string]int
	raw, norm matcher
}

type addedTok struct {
	content                   string
	id                        int
	lstrip, rstrip, singleWrd bool
}

// matcher holds tokens bucketed by first byte, longest first, which is
// enough for the few dozen added tokens a model has.
type matcher struct {
	byFirst [256][]addedTok
	any     bool
}

func newAddedVocab(list []addedTokenJSON, normalize func(string) string) (*addedVocab, error) {
	v := &addedVocab{byContent: make(map[string]int, len(list))}
	for i, a := range list {
		if a.ID == nil {
			return nil, fmt.Errorf("added_tokens[%d].id: missing", i)
		}
		if *a.ID < 0 || *a.ID >= maxID {
			return nil, fmt.Errorf("added_tokens[%d].id: %d is outside [0, %d)", i, *a.ID, maxID)
		}
		v.byContent[a.Content] = *a.ID
		tok := addedTok{a.Content, *a.ID, a.LStrip, a.RStrip, a.SingleWord}
		// Hugging Face's default: special tokens are matched raw.
		normalized := !a.Special
		if a.Normalized != nil {
			normalized = *a.Normalized
		}
		m := &v.raw
		if normalized && normalize != nil {
			tok.content = normalize(tok.content)
			m = &v.norm
		}
		if tok.content == "" {
			continue
		}
		m.byFirst[tok.content[0]] = append(m.byFirst[tok.content[0]], tok)
		m.any = true
	}
	for _, m := range []*matcher{&v.raw, &v.norm} {
		for _, b := range m.byFirst {
			sort.SliceStable(b, func(i, j int) bool { return len(b[i].content) > len(b[j].content) })
		}
	}
	return v, nil
}

// split calls emit for each piece of text in order: plain text with tok -1,
// or an added token's id. Whitespace eaten by lstrip/rstrip is dropped.
func (v *addedVocab) split(text string, normalized bool, emit func(seg string, tok int)) {
	m := &v.raw
	if normalized {
		m = &v.norm
	}
	if !m.any {
		if text != "" {
			emit(text, -1)
		}
		return
	}
	done := 0 // text[:done] has been emitted
	for i := 0; i < len(text); {
		tok, ok := m.find(text[i:])
		if !ok {
			i++
			continue
		}
		start, stop := i, i+len(tok.content)
		i = stop
		if tok.singleWrd && (endsWithWord(text[:start]) || startsWithWord(text[stop:])) {
			continue
		}
		if tok.lstrip {
			start = done + len(strings.TrimRightFunc(text[done:start], unicode.IsSpace))
		}
		if tok.rstrip {
			stop = len(text) - len(strings.TrimLeftFunc(text[stop:], unicode.IsSpace))
			i = stop
		}
		if start > done {
			emit(text[done:start], -1)
		}
		emit("", tok.id)
		done = stop
	}
	if done < len(text) {
		emit(text[done:], -1)
	}
}

func (m *matcher) find(s string) (addedTok, bool) {
	for _, t := range m.byFirst[s[0]] {
		if strings.HasPrefix(s, t.content) {
			return t, true
		}
	}
	return addedTok{}, false
}

func isWordRune(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r)
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isWordRune(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isWordRune(r)
}
