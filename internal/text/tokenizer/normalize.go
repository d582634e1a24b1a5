package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// A normalizer rewrites a piece of text before pre-tokenization, as Hugging
// Face's normalizers do. Bytes that are not valid UTF-8 pass through each
// of them unchanged, so Encode keeps them.
type normalizer func(string) string

// maxGrowth bounds how many times longer a tokenizer's normalizers may
// make a text, in bytes, at worst: 8 chained Replace rules of ×10 turned
// "aaaa" into 4·10⁸ characters. Real ones stay far below (Llama 2's and
// Gemma's " " → "▁" is ×3; NFKC ×11).
const maxGrowth = 1024

func parseNormalizer(raw json.RawMessage, field string) (normalizer, error) {
	n, growth, err := normalizerOf(raw, field)
	if err == nil && growth > maxGrowth {
		return nil, fmt.Errorf("%s: its rules can make a text up to %.3g times longer, past the bound of %d: refused", field, growth, maxGrowth)
	}
	return n, err
}

// normalizerOf parses a normalizer and says how many times longer (in
// bytes) it can make a text at worst: Unicode's bounds for the
// normalization forms, a Replace's content over what it replaces (plus
// one for a pattern that may match nothing), a Sequence's product.
func normalizerOf(raw json.RawMessage, field string) (normalizer, float64, error) {
	if isNull(raw) {
		return nil, 1, nil
	}
	c, err := parseComponent(raw, field)
	if err != nil {
		return nil, 0, err
	}
	switch c.Type {
	case "NFC":
		return norm.NFC.String, 3, nil
	case "NFD":
		return norm.NFD.String, 3, nil
	case "NFKC":
		return norm.NFKC.String, 11, nil
	case "NFKD":
		return norm.NFKD.String, 11, nil
	case "Lowercase":
		return lowercase, 2, nil
	case "Strip":
		left, right := c.StripLeft != nil && *c.StripLeft, c.StripRight != nil && *c.StripRight
		if c.StripLeft == nil || c.StripRight == nil {
			return nil, 0, fmt.Errorf("%s: Strip needs strip_left and strip_right", field)
		}
		return func(s string) string {
			if left {
				s = strings.TrimLeftFunc(s, isWhiteSpace)
			}
			if right {
				s = strings.TrimRightFunc(s, isWhiteSpace)
			}
			return s
		}, 1, nil
	case "Prepend":
		if c.Prepend == nil {
			return nil, 0, fmt.Errorf("%s.prepend: missing", field)
		}
		p := *c.Prepend
		return func(s string) string {
			if s == "" {
				return s
			}
			return p + s
		}, 1, nil // a constant, not a factor
	case "Replace":
		m, err := parsePattern(c.Pattern, field+".pattern")
		if err != nil {
			return nil, 0, err
		}
		if c.Content == nil {
			return nil, 0, fmt.Errorf("%s.content: missing", field)
		}
		content := *c.Content
		if lit, ok := m.(literalMatcher); ok && lit != "" {
			return func(s string) string { return strings.ReplaceAll(s, string(lit), content) },
				max(1, float64(len(content))/float64(len(lit))), nil
		}
		return func(s string) string { return replaceAll(m, s, content) }, float64(1 + len(content)), nil
	case "Sequence":
		var fs []normalizer
		growth := 1.0
		for i, r := range c.Normalizers {
			f, g, err := normalizerOf(r, fmt.Sprintf("%s.normalizers[%d]", field, i))
			if err != nil {
				return nil, 0, err
			}
			if f != nil {
				fs = append(fs, f)
			}
			growth *= g
		}
		switch len(fs) {
		case 0:
			return nil, 1, nil
		case 1:
			return fs[0], growth, nil
		}
		return func(s string) string {
			for _, f := range fs {
				s = f(s)
			}
			return s
		}, growth, nil
	}
	return nil, 0, fmt.Errorf("%s.type: unsupported normalizer %q (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, Prepend, Replace, Sequence)", field, short(c.Type))
}

// replaceAll replaces every match of m in s with content.
func replaceAll(m matcher, s, content string) string {
	var b strings.Builder
	done, matched := 0, false
	m.each(s, func(start, end int) {
		b.WriteString(s[done:start])
		b.WriteString(content)
		done, matched = end, true
	})
	if !matched {
		return s
	}
	b.WriteString(s[done:])
	return b.String()
}

// lowercase maps each character to its lowercase form as Rust's
// char::to_lowercase does, one character at a time: no final-sigma rule,
// and İ (U+0130) becomes i̇, the one unconditional mapping to two
// characters, where Go's simple mapping gives i.
func lowercase(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && w == 1:
			b.WriteByte(s[i])
		case r == 'İ':
			b.WriteString("i\u0307")
		default:
			b.WriteRune(unicode.ToLower(r))
		}
		i += w
	}
	return b.String()
}

// isWhiteSpace is Rust's char::is_whitespace, Unicode's White_Space.
func isWhiteSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || ('\t' <= r && r <= '\r')
	}
	return unicode.Is(unicode.White_Space, r)
}

// patternJSON is the pattern of Split, Replace: {"String": s} or {"Regex": r}.
type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

func parsePattern(p *patternJSON, field string) (matcher, error) {
	switch {
	case p == nil:
		return nil, fmt.Errorf("%s: missing", field)
	case p.String != nil && p.Regex != nil:
		return nil, fmt.Errorf("%s: has both String and Regex", field)
	case p.String != nil:
		return literalMatcher(*p.String), nil
	case p.Regex != nil:
		m, err := compilePattern(*p.Regex)
		if err != nil {
			return nil, fmt.Errorf("%s.Regex: %q: %v", field, short(*p.Regex), err)
		}
		return m, nil
	}
	return nil, fmt.Errorf("%s: want {\"String\": ...} or {\"Regex\": ...}", field)
}
