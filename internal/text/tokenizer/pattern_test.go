package tokenizer

import (
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// matches lists the matches of m in s.
func matches(m matcher, s string) []string {
	out := []string{}
	m.each(s, func(start, end int) { out = append(out, s[start:end]) })
	return out
}

var compiledRegexes sync.Map // pattern → *regexMatcher, so that fuzzing compiles once

func mustRegex(t testing.TB, p string) *regexMatcher {
	t.Helper()
	if m, ok := compiledRegexes.Load(p); ok {
		return m.(*regexMatcher)
	}
	m, err := compileRegex(p)
	if err != nil {
		t.Fatalf("compileRegex(%q): %v", p, err)
	}
	compiledRegexes.Store(p, m)
	return m
}

// deepseekPatterns are DeepSeek-V3's three Split regexes, as in its
// tokenizer.json (with literal CR and LF in the third).
var deepseekPatterns = []string{
	`\p{N}{1,3}`,
	`[一-龥぀-ゟ゠-ヿ]+`,
	"[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
}

func TestRegexMatches(t *testing.T) {
	tests := []struct {
		pattern, in string
		want        []string
	}{
		{gpt2Pattern, "Hello  world's 42  ", []string{"Hello", " ", " world", "'s", " 42", "  "}},
		{gpt2Pattern, "a \u00a0\u3000b", []string{"a", " \u00a0", "\u3000", "b"}},                   // \s is White_Space
		{gpt2Pattern, "IT'S 'x ' '\tb", []string{"IT", "'", "S", " '", "x", " '", " '", "\t", "b"}}, // case-sensitive
		{`\s+(?=x)`, "a  x  y", []string{"  "}},
		{`\p{N}{1,3}`, "12345 6", []string{"123", "45", "6"}},
		{`a{,2}b`, "aaab", []string{"aab"}}, // Oniguruma's {,n}
		{`(?i:ab)`, "xAbaB", []string{"Ab", "aB"}},
		{`\d+`, "x١٢3", []string{"١٢3"}}, // Unicode digits
		{`\w+`, "a_b\u0301 ①", []string{"a_b\u0301"}},
		{`a$`, "a\na", []string{"a", "a"}}, // end of line
		{`\h+`, "0xBEEFg", []string{"0", "BEEF"}},
		{`\x{41}\u0042`, "AB", []string{"AB"}},
		{`\p{Han}+|\p{white_space}+`, "漢字 x", []string{"漢字", " "}},
		{`[^\S\n]+`, "a \t\nb", []string{" \t"}},
		{"", "ab", []string{"", "", ""}}, // empty matches everywhere
		{`a*`, "baab", []string{"", "aa", ""}},
		{deepseekPatterns[1], "日本語とEnglish漢字", []string{"日本語と", "漢字"}},
		{deepseekPatterns[2], "Hello, world!\n\n  x 'quoted' $x", []string{"Hello", ",", " world", "!\n\n", " ", " x", " '", "quoted", "'", " $", "x"}},
		{deepseekPatterns[2], "(x $y)", []string{"(x", " $", "y", ")"}},
	}
	for _, tt := range tests {
		if got := matches(mustRegex(t, tt.pattern), tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q on %q: %q, want %q", tt.pattern, tt.in, got, tt.want)
		}
		if tt.pattern == gpt2Pattern {
			if got := matches(gpt2Matcher{}, tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("GPT-2 scanner on %q: %q, want %q", tt.in, got, tt.want)
			}
		}
	}
}

func TestPatternRefusals(t *testing.T) {
	tests := []struct{ pattern, want string }{
		{`(?<=a)b`, "lookbehind"},
		{`a(?!b)`, "lookahead"},
		{`(a|\s+(?!\S))`, "lookahead"},
		{`(?>ab)`, "atomic"},
		{`a++`, "possessive"},
		{`a{2}+`, "nested quantifier"},
		{`\bword`, `\b`},
		{`^a`, "^"},
		{`[a[b]]`, "nested class"},
		{`[a&&b]`, "intersection"},
		{`(?i)ab|c`, "(?i)"},
		{`(?x)a`, "option"},
		{`\1`, `\1`},
		{`\p{Alphabetic}`, "Alphabetic"},
		{`(a`, "missing )"},
		{`[ab`, "missing ]"},
	}
	for _, tt := range tests {
		_, err := compileRegex(tt.pattern)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want one mentioning %q", tt.pattern, err, tt.want)
		}
	}
}

// TestScannerMatchesRegex checks the hand-written scanners against the
// translated patterns, on the conformance strings.
func TestScannerMatchesRegex(t *testing.T) {
	for i, s := range readConformance(t) {
		checkScanner(t, s, i+1)
	}
}

func checkScanner(t *testing.T, s string, line int) {
	t.Helper()
	for _, c := range []struct {
		pattern string
		digits  int
	}{{qwen2Pattern, 1}, {llama3Pattern, 3}} {
		got, want := matches(scanMatcher{c.digits}, s), matches(mustRegex(t, c.pattern), s)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("line %d: digits %d: scanner %q, regex %q", line, c.digits, got, want)
		}
	}
	if got, want := matches(gpt2Matcher{}, s), matches(mustRegex(t, gpt2Pattern), s); !reflect.DeepEqual(got, want) {
		t.Errorf("line %d: GPT-2 scanner %q, regex %q", line, got, want)
	}
}

// FuzzPattern checks, on random text, the scanner against the translated
// regexes, and the translated regexes without lookahead against Go's own
// FindAll on the whole translated pattern (which must agree: both are
// leftmost-first and skip empty matches after a match).
func FuzzPattern(f *testing.F) {
	for _, s := range []string{"Hello world", "it's  \n\n x", "12345 ١٢٣", "日本語とEnglish", " !!\r\n", "a\u00a0\u3000 x", "\xff\xfe 'S"} {
		f.Add(s)
	}
	plain := []string{`\p{N}{1,3}`, deepseekPatterns[1], `\w+|[^\w\s]+`, `a*|b`, `(?i:'s|'t|'re)| ?\p{L}+`}
	var compiled []*regexp.Regexp
	for _, p := range plain {
		g, err := translate(p)
		if err != nil {
			f.Fatal(err)
		}
		compiled = append(compiled, regexp.MustCompile(g))
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkScanner(t, s, 0)
		for i, p := range plain {
			got := matches(mustRegex(t, p), s)
			want := []string{}
			for _, m := range compiled[i].FindAllStringIndex(s, -1) {
				want = append(want, s[m[0]:m[1]])
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%q on %q: %q, Go's FindAll %q", p, s, got, want)
			}
		}
		// Matches of a lookahead pattern never overlap and stay in order.
		end := 0
		mustRegex(t, deepseekPatterns[2]).each(s, func(start, stop int) {
			if start < end || stop < start {
				t.Fatalf("match [%d,%d) after %d", start, stop, end)
			}
			end = stop
		})
	})
}
