package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// matchQwen2 implements qwen2Pattern and llama3Pattern (pattern.go) by hand,
// following Oniguruma's leftmost-first alternation and greedy backtracking:
// the patterns' \s+(?!\S) needs a lookahead, and a scanner is several times
// faster than any regex engine on them.

type charClass uint8

const (
	classOther  charClass = iota // none of the below: [^\s\p{L}\p{N}]
	classLetter                  // \p{L}
	classNumber                  // \p{N}
	classSpace                   // \s, which Oniguruma takes as White_Space
)

var asciiClass [utf8.RuneSelf]charClass

func init() {
	for c := 0; c < utf8.RuneSelf; c++ {
		asciiClass[c] = classifySlow(rune(c))
	}
}

func classifySlow(r rune) charClass {
	switch {
	case unicode.IsLetter(r):
		return classLetter
	case unicode.IsNumber(r):
		return classNumber
	case unicode.Is(unicode.White_Space, r):
		return classSpace
	}
	return classOther
}

// next decodes the rune at s[i:]. An invalid byte decodes as RuneError of
// width 1 and so counts as classOther, like the U+FFFD it stands for.
func next(s string, i int) (rune, int, charClass) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1, asciiClass[c]
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return r, w, classifySlow(r)
}

// splitQwen2 calls emit with each match of qwen2Pattern in s, in order. Every
// position starts some alternative, so the matches cover s with no gaps and
// Isolated behaviour needs nothing more.
func splitQwen2(s string, emit func(string)) {
	for i := 0; i < len(s); {
		n := matchQwen2(s, i, 1)
		emit(s[i : i+n])
		i += n
	}
}

// matchQwen2 returns the length of the match at s[i:], which is never empty,
// of qwen2Pattern (digits 1) or llama3Pattern (digits 3, for \p{N}{1,3}).
// Each block is one alternative, tried in pattern order.
func matchQwen2(s string, i, digits int) int {
	r, w, c := next(s, i)

	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r == '\'' {
		if n := contraction(s[i+1:]); n > 0 {
			return 1 + n
		}
	}

	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c == classLetter {
		return w + run(s[i+w:], classLetter)
	}
	if c != classNumber && r != '\r' && r != '\n' {
		if n := run(s[i+w:], classLetter); n > 0 {
			return w + n
		}
	}

	// \p{N} or \p{N}{1,3}
	if c == classNumber {
		n := w
		for k := 1; k < digits && i+n < len(s); k++ {
			_, w, c := next(s, i+n)
			if c != classNumber {
				break
			}
			n += w
		}
		return n
	}

	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	j := i
	if r == ' ' {
		j++
	}
	if n := run(s[j:], classOther); n > 0 {
		j += n
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j - i
	}

	// Only whitespace is left. Find its run, the last \r or \n in it and
	// where its last character starts.
	end, lastNL, lastStart := i, -1, i
	for end < len(s) {
		r, w, c := next(s, end)
		if c != classSpace {
			break
		}
		if r == '\r' || r == '\n' {
			lastNL = end
		}
		lastStart = end
		end += w
	}
	switch {
	case lastNL >= 0:
		// \s*[\r\n]+ : \s* backtracks to the last line break.
		return lastNL + 1 - i
	case end == len(s):
		// \s+(?!\S) at the end of the text takes the whole run.
		return end - i
	case lastStart > i:
		// \s+(?!\S) backtracks one character so a space stays with the
		// following word.
		return lastStart - i
	}
	return end - i // \s+
}

// run returns the byte length of the longest prefix of s in class c.
func run(s string, c charClass) int {
	n := 0
	for n < len(s) {
		_, w, cc := next(s, n)
		if cc != c {
			break
		}
		n += w
	}
	return n
}

// contraction returns the length of the contraction suffix at the start of s
// (after the apostrophe), or 0. The group is case-insensitive under Unicode
// case folding, so "ſ" (U+017F, which folds to s) counts as s.
func contraction(s string) int {
	if len(s) == 0 {
		return 0
	}
	switch lower(s[0]) {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if len(s) > 1 && lower(s[1]) == 'e' {
			return 2
		}
	case 'l':
		if len(s) > 1 && lower(s[1]) == 'l' {
			return 2
		}
	}
	if len(s) > 1 && s[0] == 0xC5 && s[1] == 0xBF { // U+017F
		return 2
	}
	return 0
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// matchGPT2 returns the length of the match of gpt2Pattern (ByteLevel's own
// regex) at s[i:], which is never empty. Its contractions are
// case-sensitive, and only a plain space joins the word after it.
func matchGPT2(s string, i int) int {
	r, _, _ := next(s, i)

	// 's|'t|'re|'ve|'m|'ll|'d
	if r == '\'' && i+1 < len(s) {
		switch t := s[i+1:]; {
		case t[0] == 's' || t[0] == 't' || t[0] == 'm' || t[0] == 'd':
			return 2
		case strings.HasPrefix(t, "re") || strings.HasPrefix(t, "ve") || strings.HasPrefix(t, "ll"):
			return 3
		}
	}

	//  ?\p{L}+,  ?\p{N}+ and  ?[^\s\p{L}\p{N}]+, in this order
	j := i
	if r == ' ' {
		j++
	}
	// (Without the space, a space can start none of them.)
	for _, cls := range [...]charClass{classLetter, classNumber, classOther} {
		if n := run(s[j:], cls); n > 0 {
			return j + n - i
		}
	}

	// Whitespace: \s+(?!\S) takes the run, less its last character when
	// something follows; a lone space before a word falls to \s+.
	end, lastStart := i, i
	for end < len(s) {
		_, w, c := next(s, end)
		if c != classSpace {
			break
		}
		lastStart = end
		end += w
	}
	switch {
	case end == len(s):
		return end - i
	case lastStart > i:
		return lastStart - i
	}
	return end - i
}
