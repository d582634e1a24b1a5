package tokenizer

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Split and Replace patterns are Oniguruma regexes (Ruby syntax, UTF-8) in
// Hugging Face's tokenizers. Go's regexp (RE2) picks the same match as a
// backtracking engine for the constructs both have ("leftmost-first"), so a
// pattern is carried over by translating its syntax: \s, \d, \w and \h mean
// their Unicode versions in Oniguruma and ASCII ones in RE2, (?m) means dotall,
// {,n} is {0,n}. What RE2 lacks is lookaround; the one form real files use,
// a top-level alternative C+(?!D) or C+(?=D) over single characters (\s+(?!\S)
// in GPT-2's and Llama 3's patterns), is matched by hand. Everything else
// without an RE2 equivalent is refused with the construct named.
//
// regexp is already linked into engine.wasm, so this costs the engine no new
// import. github.com/dlclark/regexp2 v2.13.0 would carry lookaround too, and
// was measured on the conformance corpus: it splits all 700 strings as the
// translation does with the Qwen, Llama 3, GPT-2 and DeepSeek-V3 patterns,
// at 3.6-7.4 MB/s against the translation's 4.2-4.7 (and the hand-written
// scanners' 47-80): no gain worth a second regex engine in the wasm.

// matcher finds the matches of a pattern.
type matcher interface {
	// each calls fn with the start and end of each match in s, in order,
	// as Oniguruma's find_iter yields them: non-overlapping, leftmost
	// first, and no empty match where the previous match ended.
	each(s string, fn func(start, end int))
}

// iterate runs Oniguruma's find_iter loop over find, which returns the
// leftmost match at or after at (start -1 if none).
func iterate(s string, find func(at int) (int, int), fn func(start, end int)) {
	at, lastEnd := 0, -1
	for at <= len(s) {
		start, end := find(at)
		if start < 0 {
			return
		}
		if start == end && end == lastEnd {
			// An empty match where the last one ended: search again one
			// character on, as the onig crate's FindMatches does.
			at += charLen(s, at)
			continue
		}
		fn(start, end)
		at, lastEnd = end, end
	}
}

// charLen is the byte length of the character at s[i:]: 1 for an invalid
// byte and at the end of s.
func charLen(s string, i int) int {
	if i >= len(s) {
		return 1
	}
	if s[i] < utf8.RuneSelf {
		return 1
	}
	_, w := utf8.DecodeRuneInString(s[i:])
	return w
}

// literalMatcher matches a String pattern (Hugging Face escapes it into a
// regex, so an empty one matches the empty string everywhere).
type literalMatcher string

func (m literalMatcher) each(s string, fn func(start, end int)) {
	lit := string(m)
	iterate(s, func(at int) (int, int) {
		if at > len(s) {
			return -1, -1
		}
		i := strings.Index(s[at:], lit)
		if i < 0 {
			return -1, -1
		}
		return at + i, at + i + len(lit)
	}, fn)
}

// scanMatcher is the hand-written scanner for the Qwen2 and Llama 3 split
// patterns (pretokenize.go), which differ only in how many digits \p{N}
// takes: on the conformance text 17 times faster than the translated
// regex (and than regexp2), and checked against it in the tests.
type scanMatcher struct{ digits int }

func (m scanMatcher) each(s string, fn func(start, end int)) {
	for i := 0; i < len(s); {
		n := matchQwen2(s, i, m.digits)
		fn(i, i+n)
		i += n
	}
}

// gpt2Matcher is the hand-written scanner for gpt2Pattern.
type gpt2Matcher struct{}

func (gpt2Matcher) each(s string, fn func(start, end int)) {
	for i := 0; i < len(s); {
		n := matchGPT2(s, i)
		fn(i, i+n)
		i += n
	}
}

// regexMatcher is a translated pattern as a list of alternatives groups:
// runs of ordinary alternatives compiled together, and lookahead
// alternatives on their own. At one position the earlier group wins, as
// the backtracking engine would try it first.
type regexMatcher struct {
	groups []altGroup
}

type altGroup struct {
	re   *regexp.Regexp // nil for a lookahead alternative
	look *lookahead
}

// lookahead is the alternative run+(?!next) (neg) or run+(?=next).
type lookahead struct {
	run, next *charSet
	neg       bool
}

func (m *regexMatcher) each(s string, fn func(start, end int)) {
	// The leftmost match of each group, found from some earlier position,
	// stays the leftmost one until the search passes its start: no
	// translated construct looks to the left of its match.
	type found struct{ from, start, end int }
	var buf [8]found
	cache := buf[:0]
	for range m.groups {
		cache = append(cache, found{from: -1})
	}
	iterate(s, func(at int) (int, int) {
		best := -1
		for i := range m.groups {
			c := &cache[i]
			if c.from < 0 || c.from > at || (c.start >= 0 && c.start < at) {
				c.from = at
				c.start, c.end = m.groups[i].find(s, at)
			}
			if c.start >= 0 && (best < 0 || c.start < cache[best].start) {
				best = i
			}
		}
		if best < 0 {
			return -1, -1
		}
		return cache[best].start, cache[best].end
	}, fn)
}

func (g *altGroup) find(s string, at int) (int, int) {
	if g.re != nil {
		loc := g.re.FindStringIndex(s[at:])
		if loc == nil {
			return -1, -1
		}
		return at + loc[0], at + loc[1]
	}
	return g.look.find(s, at)
}

// find returns the leftmost match of run+(?!next) at or after at. The
// greedy run+ backtracks from the end of the maximal run towards its start
// until the lookahead holds; within one run the best end is the same for
// every start, so each run is scanned once.
func (l *lookahead) find(s string, at int) (int, int) {
	for p := at; p < len(s); {
		r, w := decodeRune(s, p)
		if !l.run.has(r) {
			p += w
			continue
		}
		end := p + w
		for end < len(s) {
			r, w := decodeRune(s, end)
			if !l.run.has(r) {
				break
			}
			end += w
		}
		for q := end; q > p; {
			if l.holds(s, q) {
				return p, q
			}
			_, w := utf8.DecodeLastRuneInString(s[p:q])
			q -= w
		}
		p = end
	}
	return -1, -1
}

func (l *lookahead) holds(s string, q int) bool {
	if q >= len(s) {
		return l.neg
	}
	r, _ := decodeRune(s, q)
	return l.next.has(r) != l.neg
}

// decodeRune decodes s[i:], an invalid byte as U+FFFD of width 1 (which is
// what Go's regexp matches it as).
func decodeRune(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// charSet is a set of runes: a bitmap for ASCII and sorted ranges beyond.
type charSet struct {
	ascii  [2]uint64
	ranges []rune // lo, hi pairs, above U+007F
}

func (c *charSet) has(r rune) bool {
	if r < utf8.RuneSelf {
		return c.ascii[r>>6]&(1<<(r&63)) != 0
	}
	i, _ := slices.BinarySearch(c.ranges, r)
	// ranges[i-1] < r <= ranges[i]: inside a range iff i is odd, or r
	// starts the range at an even i.
	return i%2 == 1 || (i < len(c.ranges) && c.ranges[i] == r)
}

// newCharSet reads a translated single-character pattern (a class, an
// escape or a literal) through Go's own parser, so that the set is exactly
// what the regexp would match.
func newCharSet(goPattern string) (*charSet, error) {
	re, err := syntax.Parse(goPattern, syntax.Perl)
	if err != nil {
		return nil, err
	}
	re = re.Simplify()
	var pairs []rune
	switch re.Op {
	case syntax.OpLiteral:
		if len(re.Rune) != 1 {
			return nil, fmt.Errorf("not one character")
		}
		r := re.Rune[0]
		pairs = []rune{r, r}
		if re.Flags&syntax.FoldCase != 0 {
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				pairs = append(pairs, f, f)
			}
		}
	case syntax.OpCharClass:
		pairs = re.Rune
	case syntax.OpAnyCharNotNL:
		pairs = []rune{0, '\n' - 1, '\n' + 1, unicode.MaxRune}
	case syntax.OpAnyChar:
		pairs = []rune{0, unicode.MaxRune}
	default:
		return nil, fmt.Errorf("not one character")
	}
	c := &charSet{}
	for i := 0; i+1 < len(pairs); i += 2 {
		lo, hi := pairs[i], pairs[i+1]
		for r := lo; r <= hi && r < utf8.RuneSelf; r++ {
			c.ascii[r>>6] |= 1 << (r & 63)
		}
		if hi >= utf8.RuneSelf {
			c.ranges = append(c.ranges, max(lo, utf8.RuneSelf), hi)
		}
	}
	c.ranges = mergeRanges(c.ranges)
	return c, nil
}

// mergeRanges sorts lo, hi pairs and joins overlapping or adjacent ones.
func mergeRanges(p []rune) []rune {
	type rng struct{ lo, hi rune }
	rs := make([]rng, 0, len(p)/2)
	for i := 0; i+1 < len(p); i += 2 {
		rs = append(rs, rng{p[i], p[i+1]})
	}
	slices.SortFunc(rs, func(a, b rng) int { return int(a.lo - b.lo) })
	out := p[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && r.lo <= out[n-1]+1 {
			out[n-1] = max(out[n-1], r.hi)
			continue
		}
		out = append(out, r.lo, r.hi)
	}
	return out
}

// Patterns with a hand-written scanner.
const (
	qwen2Pattern  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// gpt2Pattern is what ByteLevel splits with when use_regex is true.
	gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// compilePattern returns the matcher of an Oniguruma pattern.
func compilePattern(p string) (matcher, error) {
	switch p {
	case qwen2Pattern:
		return scanMatcher{digits: 1}, nil
	case llama3Pattern:
		return scanMatcher{digits: 3}, nil
	case gpt2Pattern:
		return gpt2Matcher{}, nil
	}
	return compileRegex(p)
}

// compileRegex translates p without the hand-written shortcuts.
func compileRegex(p string) (*regexMatcher, error) {
	alts, err := topLevelAlternatives(p)
	if err != nil {
		return nil, err
	}
	m := &regexMatcher{}
	var plain []string
	flush := func() error {
		if len(plain) == 0 {
			return nil
		}
		re, err := regexp.Compile("(?:" + strings.Join(plain, "|") + ")")
		if err != nil {
			return err
		}
		m.groups = append(m.groups, altGroup{re: re})
		plain = plain[:0]
		return nil
	}
	for _, alt := range alts {
		look, err := parseLookahead(alt)
		if err != nil {
			return nil, err
		}
		if look != nil {
			if err := flush(); err != nil {
				return nil, err
			}
			m.groups = append(m.groups, altGroup{look: look})
			continue
		}
		g, err := translate(alt)
		if err != nil {
			return nil, err
		}
		plain = append(plain, g)
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return m, nil
}

// topLevelAlternatives splits p at the | that are outside groups and classes.
func topLevelAlternatives(p string) ([]string, error) {
	var alts []string
	depth, start := 0, 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '\\':
			i++
		case '[':
			end, err := classEnd(p, i)
			if err != nil {
				return nil, err
			}
			i = end - 1
		case '(':
			depth++
		case ')':
			if depth == 0 {
				return nil, fmt.Errorf("unmatched ) at byte %d", i)
			}
			depth--
		case '|':
			if depth == 0 {
				alts = append(alts, p[start:i])
				start = i + 1
			}
		}
	}
	if depth != 0 {
		return nil, fmt.Errorf("missing )")
	}
	return append(alts, p[start:]), nil
}

// classEnd returns the index after the class that starts at p[i] == '['.
// As in Oniguruma, a ] right after [ or [^ is a literal.
func classEnd(p string, i int) (int, error) {
	j := i + 1
	if j < len(p) && p[j] == '^' {
		j++
	}
	if j < len(p) && p[j] == ']' {
		j++
	}
	for ; j < len(p); j++ {
		switch p[j] {
		case '\\':
			j++
		case '[':
			return 0, fmt.Errorf("nested class or POSIX bracket at byte %d is not supported", j)
		case ']':
			return j + 1, nil
		}
	}
	return 0, fmt.Errorf("missing ] for the class at byte %d", i)
}

// parseLookahead recognizes an alternative of the form C+(?!D) or C+(?=D),
// C and D single characters, and refuses any other lookaround.
func parseLookahead(alt string) (*lookahead, error) {
	i := strings.Index(alt, "(?!")
	neg := true
	if j := strings.Index(alt, "(?="); j >= 0 && (i < 0 || j < i) {
		i, neg = j, false
	}
	if i < 0 {
		if strings.Contains(alt, "(?<=") || strings.Contains(alt, "(?<!") {
			return nil, fmt.Errorf("lookbehind in %q is not supported", alt)
		}
		return nil, nil
	}
	refuse := fmt.Errorf("lookahead in %q is not supported (only an alternative C+(?!D) or C+(?=D) of single characters is)", alt)
	if !strings.HasSuffix(alt, ")") || i == 0 || alt[i-1] != '+' {
		return nil, refuse
	}
	runPat, nextPat := alt[:i-1], alt[i+3:len(alt)-1]
	if !singleChar(runPat) || !singleChar(nextPat) {
		return nil, refuse
	}
	run, err := charSetOf(runPat)
	if err != nil {
		return nil, refuse
	}
	next, err := charSetOf(nextPat)
	if err != nil {
		return nil, refuse
	}
	return &lookahead{run: run, next: next, neg: neg}, nil
}

// singleChar reports whether p is one atom that matches one character: a
// class, an escape or a literal, with nothing after it.
func singleChar(p string) bool {
	if p == "" {
		return false
	}
	switch p[0] {
	case '[':
		end, err := classEnd(p, 0)
		return err == nil && end == len(p)
	case '\\':
		n := escapeLen(p)
		return n == len(p)
	case '(', ')', '|', '*', '+', '?', '{', '^', '$':
		return false
	}
	_, w := utf8.DecodeRuneInString(p)
	return w == len(p)
}

func charSetOf(p string) (*charSet, error) {
	g, err := translate(p)
	if err != nil {
		return nil, err
	}
	return newCharSet(g)
}

// escapeLen is the length of the escape at the start of p.
func escapeLen(p string) int {
	if len(p) < 2 {
		return len(p)
	}
	switch p[1] {
	case 'p', 'P', 'x':
		if len(p) > 2 && p[2] == '{' {
			if j := strings.IndexByte(p, '}'); j > 0 {
				return j + 1
			}
			return len(p)
		}
		if p[1] == 'x' {
			return min(len(p), 4)
		}
	case 'u':
		return min(len(p), 6)
	}
	_, w := utf8.DecodeRuneInString(p[1:])
	return 1 + w
}

// translate rewrites Oniguruma syntax into Go's with the same meaning.
func translate(p string) (string, error) {
	var b strings.Builder
	prevQuant := false // the last token written was a quantifier
	for i := 0; i < len(p); {
		c := p[i]
		switch c {
		case '\\':
			n := escapeLen(p[i:])
			g, err := translateEscape(p[i:i+n], false)
			if err != nil {
				return "", err
			}
			b.WriteString(g)
			i += n
			prevQuant = false
			continue
		case '[':
			end, err := classEnd(p, i)
			if err != nil {
				return "", err
			}
			g, err := translateClass(p[i:end])
			if err != nil {
				return "", err
			}
			b.WriteString(g)
			i = end
			prevQuant = false
			continue
		case '(':
			g, n, err := translateGroup(p[i:])
			if err != nil {
				return "", err
			}
			b.WriteString(g)
			i += n
			prevQuant = false
			continue
		case '^':
			return "", fmt.Errorf("^ (start of line) is not supported")
		case '$':
			// Oniguruma's $ is end of line in Ruby syntax.
			b.WriteString(`(?m:$)`)
			i++
			prevQuant = false
			continue
		case '+', '?', '*':
			if prevQuant && c == '+' {
				return "", fmt.Errorf("possessive or nested quantifier at byte %d is not supported", i)
			}
			if prevQuant && c == '?' {
				// A lazy quantifier: the same in Go.
				b.WriteByte(c)
				i++
				prevQuant = false
				continue
			}
			if prevQuant {
				return "", fmt.Errorf("nested quantifier at byte %d is not supported", i)
			}
			b.WriteByte(c)
			i++
			prevQuant = true
			continue
		case '{':
			if q, n, ok := braceQuantifier(p[i:]); ok {
				if prevQuant {
					return "", fmt.Errorf("nested quantifier %s at byte %d is not supported", p[i:i+n], i)
				}
				b.WriteString(q)
				i += n
				prevQuant = true
				continue
			}
			b.WriteString(`\{`)
			i++
			prevQuant = false
			continue
		}
		_, w := utf8.DecodeRuneInString(p[i:])
		b.WriteString(p[i : i+w])
		i += w
		prevQuant = false
	}
	return b.String(), nil
}

// braceQuantifier reads {n}, {n,}, {n,m} or Oniguruma's {,m} at the start
// of p; anything else is a literal brace, as in Oniguruma.
func braceQuantifier(p string) (string, int, bool) {
	end := strings.IndexByte(p, '}')
	if end < 0 {
		return "", 0, false
	}
	body := p[1:end]
	lo, hi, comma := strings.Cut(body, ",")
	digits := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if s[i] < '0' || s[i] > '9' {
				return false
			}
		}
		return true
	}
	if !digits(lo) || !digits(hi) || (lo == "" && (!comma || hi == "")) {
		return "", 0, false
	}
	if lo == "" {
		lo = "0"
	}
	q := "{" + lo
	if comma {
		q += "," + hi
	}
	return q + "}", end + 1, true
}

// translateGroup handles ( at the start of p and returns the Go opening.
func translateGroup(p string) (string, int, error) {
	if !strings.HasPrefix(p, "(?") {
		return "(", 1, nil
	}
	switch {
	case strings.HasPrefix(p, "(?:"):
		return "(?:", 3, nil
	case strings.HasPrefix(p, "(?=") || strings.HasPrefix(p, "(?!"):
		return "", 0, fmt.Errorf("lookahead %s is not supported here (only a top-level alternative C+(?!D) or C+(?=D) is)", p[:3])
	case strings.HasPrefix(p, "(?<=") || strings.HasPrefix(p, "(?<!"):
		return "", 0, fmt.Errorf("lookbehind %s is not supported", p[:4])
	case strings.HasPrefix(p, "(?>"):
		return "", 0, fmt.Errorf("atomic group (?> is not supported")
	case strings.HasPrefix(p, "(?<") || strings.HasPrefix(p, "(?P<"):
		end := strings.IndexByte(p, '>')
		if end < 0 {
			return "", 0, fmt.Errorf("unterminated group name")
		}
		return p[:end+1], end + 1, nil
	}
	// Option groups: (?imx-imx) or (?imx-imx:...).
	j := 2
	var flags strings.Builder
	for ; j < len(p) && p[j] != ')' && p[j] != ':'; j++ {
		switch p[j] {
		case 'i', '-':
			flags.WriteByte(p[j])
		case 'm':
			flags.WriteByte('s') // Ruby's (?m) is dotall
		default:
			return "", 0, fmt.Errorf("group option %q is not supported", p[j])
		}
	}
	if j == len(p) {
		return "", 0, fmt.Errorf("unterminated group")
	}
	if p[j] == ')' {
		// In Oniguruma (?i) reaches over later alternatives of its group,
		// in Go it does not: refuse rather than guess.
		return "", 0, fmt.Errorf("option %s without a group is not supported (use (?i:...))", p[:j+1])
	}
	return "(?" + flags.String() + ":", j + 1, nil
}

// translateClass rewrites a bracket class [...] (nested classes and
// intersections were refused by classEnd or are refused here).
func translateClass(p string) (string, error) {
	var b strings.Builder
	b.WriteByte('[')
	i := 1
	if p[i] == '^' {
		b.WriteByte('^')
		i++
	}
	if p[i] == ']' {
		b.WriteString(`\]`)
		i++
	}
	for i < len(p)-1 {
		c := p[i]
		switch {
		case c == '\\':
			n := escapeLen(p[i : len(p)-1])
			g, err := translateEscape(p[i:i+n], true)
			if err != nil {
				return "", err
			}
			b.WriteString(g)
			i += n
			continue
		case c == '&' && i+1 < len(p)-1 && p[i+1] == '&':
			return "", fmt.Errorf("class intersection && is not supported")
		case c == '[':
			return "", fmt.Errorf("nested class is not supported")
		}
		_, w := utf8.DecodeRuneInString(p[i:])
		b.WriteString(p[i : i+w])
		i += w
	}
	b.WriteByte(']')
	return b.String(), nil
}

// translateEscape rewrites one escape; inClass selects the form that goes
// inside brackets.
func translateEscape(e string, inClass bool) (string, error) {
	if len(e) < 2 {
		return "", fmt.Errorf("trailing backslash")
	}
	set := func(r []rune, negate bool) string {
		if inClass {
			if negate {
				r = complementRanges(r)
			}
			return rangesText(r)
		}
		if negate {
			return "[^" + rangesText(r) + "]"
		}
		return "[" + rangesText(r) + "]"
	}
	switch c := e[1]; c {
	case 's', 'S':
		return set(whiteSpace, c == 'S'), nil
	case 'w', 'W':
		return set(wordChars(), c == 'W'), nil
	case 'h', 'H':
		return set([]rune{'0', '9', 'A', 'F', 'a', 'f'}, c == 'H'), nil
	case 'd':
		return `\p{Nd}`, nil
	case 'D':
		return `\P{Nd}`, nil
	case 'p', 'P':
		return translateProperty(e, inClass)
	case 'x':
		return e, nil
	case 'u':
		if len(e) != 6 {
			return "", fmt.Errorf("bad escape %q", e)
		}
		return `\x{` + e[2:] + `}`, nil
	case 't', 'n', 'r', 'f', 'v', 'a':
		return e, nil
	case 'e':
		return `\x1B`, nil
	case 'z':
		if !inClass {
			return e, nil
		}
	}
	r, _ := utf8.DecodeRuneInString(e[1:])
	switch {
	case r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)):
		return "", fmt.Errorf("escape %s is not supported", e)
	case r < utf8.RuneSelf:
		return `\` + string(r), nil
	}
	return regexp.QuoteMeta(string(r)), nil
}

// translateProperty rewrites \p{Name}, \p{^Name} and \P{Name}. Go knows
// categories and scripts by their exact names; Oniguruma ignores case,
// spaces, hyphens and underscores. Binary properties Go has tables for (such
// as White_Space) become explicit ranges.
func translateProperty(e string, inClass bool) (string, error) {
	if len(e) < 4 || e[2] != '{' || e[len(e)-1] != '}' {
		return "", fmt.Errorf("escape %s is not supported (want \\p{Name})", e)
	}
	name := e[3 : len(e)-1]
	negate := e[1] == 'P'
	if strings.HasPrefix(name, "^") {
		negate, name = !negate, name[1:]
	}
	key := propertyKey(name)
	if key == "any" {
		r := []rune{0, unicode.MaxRune}
		if negate {
			return "", fmt.Errorf("%s matches nothing", e)
		}
		if inClass {
			return rangesText(r), nil
		}
		return "[" + rangesText(r) + "]", nil
	}
	for _, tables := range []map[string]*unicode.RangeTable{unicode.Categories, unicode.Scripts} {
		for n := range tables {
			if propertyKey(n) == key {
				if negate {
					return `\P{` + n + `}`, nil
				}
				return `\p{` + n + `}`, nil
			}
		}
	}
	for n, t := range unicode.Properties {
		if propertyKey(n) == key {
			r := tableRanges(t)
			if negate {
				r = complementRanges(r)
			}
			if inClass {
				return rangesText(r), nil
			}
			return "[" + rangesText(r) + "]", nil
		}
	}
	return "", fmt.Errorf("unicode property %q is not supported", name)
}

func propertyKey(name string) string {
	return strings.ToLower(strings.NewReplacer(" ", "", "_", "", "-", "").Replace(name))
}

// whiteSpace is Unicode's White_Space, Oniguruma's \s.
var whiteSpace = tableRanges(unicode.White_Space)

// wordChars is Oniguruma's Unicode \w: Alphabetic, marks, decimal digits,
// connector punctuation and Join_Control.
func wordChars() []rune {
	var r []rune
	for _, t := range []*unicode.RangeTable{unicode.L, unicode.Nl, unicode.Other_Alphabetic, unicode.M, unicode.Nd, unicode.Pc, unicode.Join_Control} {
		r = append(r, tableRanges(t)...)
	}
	return mergeRanges(r)
}

func tableRanges(t *unicode.RangeTable) []rune {
	var r []rune
	add := func(lo, hi, stride rune) {
		if stride == 1 {
			r = append(r, lo, hi)
			return
		}
		for c := lo; c <= hi; c += stride {
			r = append(r, c, c)
		}
	}
	for _, x := range t.R16 {
		add(rune(x.Lo), rune(x.Hi), rune(x.Stride))
	}
	for _, x := range t.R32 {
		add(rune(x.Lo), rune(x.Hi), rune(x.Stride))
	}
	return mergeRanges(r)
}

// complementRanges returns the sorted, merged ranges not in r.
func complementRanges(r []rune) []rune {
	var out []rune
	next := rune(0)
	for i := 0; i+1 < len(r); i += 2 {
		if r[i] > next {
			out = append(out, next, r[i]-1)
		}
		next = r[i+1] + 1
	}
	if next <= unicode.MaxRune {
		out = append(out, next, unicode.MaxRune)
	}
	return out
}

func rangesText(r []rune) string {
	var b strings.Builder
	for i := 0; i+1 < len(r); i += 2 {
		fmt.Fprintf(&b, `\x{%X}`, r[i])
		if r[i+1] != r[i] {
			fmt.Fprintf(&b, `-\x{%X}`, r[i+1])
		}
	}
	return b.String()
}
