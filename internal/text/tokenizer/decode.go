package tokenizer

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A decoder is one of Hugging Face's decoders: decode_chain turns the list
// of token strings into another list, and Decode joins the last one.
type decoder interface {
	chain(tokens []string) []string
}

// byteLevelDec maps byte-level characters back to bytes across all tokens,
// then reads the bytes as UTF-8 the way from_utf8_lossy does.
type byteLevelDec struct{}

func (byteLevelDec) chain(tokens []string) []string {
	var buf []byte
	for _, tok := range tokens {
		buf = appendTokenBytes(buf, tok)
	}
	return []string{lossyUTF8(buf)}
}

// metaspaceDec turns the replacement character back into spaces. Like
// Hugging Face's (Rust) Metaspace decoder, it drops every replacement
// character of the first token unless prepend_scheme is "never";
// tokenizers.js drops only a leading one.
type metaspaceDec struct {
	rep   rune
	never bool
}

func (d metaspaceDec) chain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, tok := range tokens {
		var b strings.Builder
		for _, r := range tok {
			switch {
			case r != d.rep:
				b.WriteRune(r)
			case i > 0 || d.never:
				b.WriteByte(' ')
			}
		}
		out[i] = b.String()
	}
	return out
}

// byteFallbackDec turns runs of <0xNN> tokens into the text of their bytes;
// a run that is not valid UTF-8 becomes one U+FFFD per byte, as in Rust
// (tokenizers.js replaces maximal subparts instead).
type byteFallbackDec struct{}

func (byteFallbackDec) chain(tokens []string) []string {
	out := make([]string, 0, len(tokens))
	var pending []byte
	flush := func() {
		if len(pending) == 0 {
			return
		}
		if utf8.Valid(pending) {
			out = append(out, string(pending))
		} else {
			for range pending {
				out = append(out, "\uFFFD")
			}
		}
		pending = pending[:0]
	}
	for _, tok := range tokens {
		if b, ok := fallbackByte(tok); ok {
			pending = append(pending, b)
			continue
		}
		flush()
		out = append(out, tok)
	}
	flush()
	return out
}

// fallbackByte parses <0xNN> as Rust's u8::from_str_radix does (which
// takes a leading +).
func fallbackByte(tok string) (byte, bool) {
	if len(tok) != 6 || !strings.HasPrefix(tok, "<0x") || tok[5] != '>' {
		return 0, false
	}
	digits := tok[3:5]
	if digits[0] == '+' {
		digits = digits[1:]
	}
	v, err := strconv.ParseUint(digits, 16, 8)
	return byte(v), err == nil
}

type fuseDec struct{}

func (fuseDec) chain(tokens []string) []string { return []string{strings.Join(tokens, "")} }

// stripDec removes up to start leading and stop trailing content
// characters from each token.
type stripDec struct {
	content     rune
	start, stop int
}

func (d stripDec) chain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, tok := range tokens {
		rs := []rune(tok)
		lo := 0
		for lo < d.start && lo < len(rs) && rs[lo] == d.content {
			lo++
		}
		hi := len(rs)
		for k := 0; k < d.stop && hi > 0 && rs[hi-1] == d.content; k++ {
			hi--
		}
		if lo < hi {
			out[i] = string(rs[lo:hi])
		}
	}
	return out
}

// replaceDec replaces each match of a pattern in each token.
type replaceDec struct {
	m       matcher
	content string
}

func (d replaceDec) chain(tokens []string) []string {
	out := make([]string, len(tokens))
	for i, tok := range tokens {
		out[i] = replaceAll(d.m, tok, d.content)
	}
	return out
}

type seqDec []decoder

func (s seqDec) chain(tokens []string) []string {
	for _, d := range s {
		tokens = d.chain(tokens)
	}
	return tokens
}

func parseDecoder(raw json.RawMessage, field string) (decoder, error) {
	if isNull(raw) {
		return nil, nil
	}
	c, err := parseComponent(raw, field)
	if err != nil {
		return nil, err
	}
	switch c.Type {
	case "ByteLevel":
		return byteLevelDec{}, nil // its options only affect offsets
	case "Metaspace":
		rep, scheme, err := parseMetaspace(c, field)
		if err != nil {
			return nil, err
		}
		return metaspaceDec{rep: rep, never: scheme == "never"}, nil
	case "ByteFallback":
		return byteFallbackDec{}, nil
	case "Fuse":
		return fuseDec{}, nil
	case "Strip":
		if c.Content == nil || c.Start == nil || c.Stop == nil {
			return nil, fmt.Errorf("%s: Strip needs content, start and stop", field)
		}
		r, w := utf8.DecodeRuneInString(*c.Content)
		if w == 0 || w != len(*c.Content) {
			return nil, fmt.Errorf("%s.content: %q is not one character", field, short(*c.Content))
		}
		if *c.Start < 0 || *c.Stop < 0 {
			return nil, fmt.Errorf("%s: start %d and stop %d must not be negative", field, *c.Start, *c.Stop)
		}
		return stripDec{content: r, start: *c.Start, stop: *c.Stop}, nil
	case "Replace":
		m, err := parsePattern(c.Pattern, field+".pattern")
		if err != nil {
			return nil, err
		}
		if c.Content == nil {
			return nil, fmt.Errorf("%s.content: missing", field)
		}
		return replaceDec{m: m, content: *c.Content}, nil
	case "Sequence":
		var s seqDec
		for i, r := range c.Decoders {
			d, err := parseDecoder(r, fmt.Sprintf("%s.decoders[%d]", field, i))
			if err != nil {
				return nil, err
			}
			if d == nil {
				return nil, fmt.Errorf("%s.decoders[%d]: null", field, i)
			}
			s = append(s, d)
		}
		return s, nil
	}
	return nil, fmt.Errorf("%s.type: unsupported decoder %q (supported: ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace, Sequence)", field, short(c.Type))
}
