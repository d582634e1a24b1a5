package tokenizer

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

func pieces(s string) []string {
	out := []string{}
	splitQwen2(s, func(p string) { out = append(out, p) })
	return out
}

func TestSplitQwen2(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", []string{}},
		{"Hello world", []string{"Hello", " world"}},
		{"it's", []string{"it", "'s"}},
		{"IT'S", []string{"IT", "'S"}},
		{"we'LL'Re'vE'D'm'T", []string{"we", "'LL", "'Re", "'vE", "'D", "'m", "'T"}},
		{"'sup", []string{"'s", "up"}},     // the contraction wins over 'sup
		{"'ſt", []string{"'ſ", "t"}},       // ſ folds to s under (?i)
		{"'x", []string{"'x"}},             // not a contraction: [^...]?\p{L}+
		{"'r'e", []string{"'r", "'e"}},     // 're needs both letters
		{"''", []string{"''"}},             //  ?[^\s\p{L}\p{N}]+
		{"a  b", []string{"a", " ", " b"}}, // \s+(?!\S) leaves one space
		{"a   ", []string{"a", "   "}},     // ... except at the end
		{"a \n b", []string{"a", " \n", " b"}},
		{"a\n\n\nb", []string{"a", "\n\n\n", "b"}},
		{"\r\n\r\n", []string{"\r\n\r\n"}},
		{"x  \n\n  ", []string{"x", "  \n\n", "  "}}, // \s* backtracks to the last \n
		{" \t x", []string{" \t", " x"}},
		{"\tx", []string{"\tx"}}, // any non-newline space prefixes a word
		{"\nx", []string{"\n", "x"}},
		{"\rx", []string{"\r", "x"}},
		{"123", []string{"1", "2", "3"}},
		{"x1y", []string{"x", "1", "y"}},
		{"$1", []string{"$", "1"}},
		{"$x", []string{"$x"}},
		{"_start", []string{"_start"}},
		{" !!\n\nx", []string{" !!\n\n", "x"}},
		{" !x", []string{" !", "x"}},
		{"  !", []string{" ", " !"}},
		{"...\r\n", []string{"...\r\n"}},
		{"中文abc", []string{"中文abc"}},
		{"x\u0301y", []string{"x", "\u0301y"}}, // marks are neither L nor N
		{"😀😀 hi", []string{"😀😀", " hi"}},
		{"a\u00a0b", []string{"a", "\u00a0b"}},
		{"\u3000\u3000", []string{"\u3000\u3000"}},
		{"x \u2028y", []string{"x", " ", "\u2028y"}},
		{"\u0085x", []string{"\u0085x"}}, // NEL is \s but not [\r\n]
		{"\x00x", []string{"\x00x"}},
		{"\xffabc", []string{"\xffabc"}}, // a bad byte is [^\s\p{L}\p{N}]
		{"Ⅻ½²", []string{"Ⅻ", "½", "²"}}, // \p{N} includes Nl and No
	}
	for _, tt := range tests {
		if got := pieces(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("split(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := refSplit(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("reference split(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// refSplit is an independent reading of qwen2Pattern: every alternative but
// the lookahead one is a Go regexp (leftmost-first, like Oniguruma), tried
// in order at each position. \s is spelled out as White_Space, which is what
// Oniguruma's Unicode \s means and Go's ASCII \s is not.
func refSplit(s string) []string {
	out := []string{}
	for i := 0; i < len(s); {
		n := refMatch(s[i:])
		if n == 0 {
			panic("no alternative matched " + s[i:])
		}
		out = append(out, s[i:i+n])
		i += n
	}
	return out
}

const wsClass = `\t\n\v\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}`

var refAlts = []*regexp.Regexp{
	regexp.MustCompile(`^(?:(?i:'s|'t|'re|'ve|'m|'ll|'d))`),
	regexp.MustCompile(`^(?:[^\r\n\p{L}\p{N}]?\p{L}+)`),
	regexp.MustCompile(`^(?:\p{N})`),
	regexp.MustCompile(`^(?: ?[^` + wsClass + `\p{L}\p{N}]+[\r\n]*)`),
	regexp.MustCompile(`^(?:[` + wsClass + `]*[\r\n]+)`),
	nil, // \s+(?!\S)
	regexp.MustCompile(`^(?:[` + wsClass + `]+)`),
}

func refMatch(s string) int {
	for _, re := range refAlts {
		if re == nil {
			// \s+(?!\S): the whole run if nothing follows it, else the run
			// less its last character, if that leaves any.
			run := refAlts[len(refAlts)-1].FindString(s)
			if run == "" {
				continue
			}
			if len(run) == len(s) {
				return len(run)
			}
			_, w := utf8.DecodeLastRuneInString(run)
			if len(run) > w {
				return len(run) - w
			}
			continue
		}
		if m := re.FindStringIndex(s); m != nil && m[1] > 0 {
			return m[1]
		}
	}
	return 0
}

// FuzzSplit checks the hand-written scanner against the regexp reference.
func FuzzSplit(f *testing.F) {
	for _, s := range []string{"Hello world", "it's  \n\n x", "'S'll 're", " !!\r\n", "\u00a0\u3000x", "a1'ſ😀\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, want := pieces(s), refSplit(s)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("split(%q) = %q, reference %q", s, got, want)
		}
		if strings.Join(got, "") != s {
			t.Fatalf("pieces of %q do not cover it: %q", s, got)
		}
	})
}

func TestSplitMatchesReferenceOnCorpus(t *testing.T) {
	for i, s := range readConformance(t) {
		if got, want := pieces(s), refSplit(s); !reflect.DeepEqual(got, want) {
			t.Errorf("conformance.jsonl:%d: split(%q) = %q, reference %q", i+1, s, got, want)
		}
	}
}
