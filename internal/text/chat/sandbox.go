package chat

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// The renderer has no limits of its own and no hook inside its loop, so
// the sandbox instruments the template's source: every loop's iterable,
// printed expression and assigned value passes through a callable that
// counts the work and the output and checks the clock, and every value
// an attribute or an index is read from passes through one that raises,
// as Jinja2 does, when it is undefined. What it cannot see is one
// expression's own allocation: the renderer's only amplifier, text * n,
// gets its count checked first.
const (
	// maxOutput bounds the rendered text and every value a template
	// builds: a prompt of 16 MiB is millions of tokens, past any context.
	maxOutput = 16 << 20
	// maxIterations bounds the loop iterations of one render, nested
	// loops counted in full (range alone is bounded by maxRange).
	maxIterations = 1_000_000
	// maxRenderTime bounds one render, checked at every callable.
	maxRenderTime = 10 * time.Second
)

// budget is one render's account.
type budget struct {
	deadline   time.Time
	iterations int
	output     int
}

func (b *budget) check() error {
	if time.Now().After(b.deadline) {
		return fmt.Errorf("rendering took more than the sandbox's %v", maxRenderTime)
	}
	return nil
}

// callables are the instrumentation's hooks, bound to b.
func (b *budget) callables() map[string]jinja.Value {
	return map[string]jinja.Value{
		// __iter(xs, text): a loop over xs whose body holds text bytes of
		// literal text.
		"__iter": jinja.NewCallable("__iter", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			n := 0
			switch v := args[0]; {
			case v.IsList():
				n = v.AsList().Len()
			case v.IsDict():
				n = v.AsDict().Len()
			case v.IsString():
				n = len(v.AsString())
			}
			b.iterations += n
			if b.iterations > maxIterations {
				return jinja.Undefined(), fmt.Errorf("the loops run more than the sandbox's %d iterations", maxIterations)
			}
			if err := b.count(n * int(args[1].AsInt())); err != nil {
				return jinja.Undefined(), err
			}
			return args[0], b.check()
		}),
		// __out(x): x is printed.
		"__out": jinja.NewCallable("__out", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			if err := b.count(size(args[0])); err != nil {
				return jinja.Undefined(), err
			}
			return args[0], b.check()
		}),
		// __val(x): x is assigned.
		"__val": jinja.NewCallable("__val", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			if n := size(args[0]); n > maxOutput {
				return jinja.Undefined(), fmt.Errorf("a value of %d bytes: more than the sandbox's %d", n, maxOutput)
			}
			return args[0], b.check()
		}),
		// __times(n): n is the count of text * n.
		"__times": jinja.NewCallable("__times", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			if v := args[0]; v.IsInt() && (v.AsInt() < 0 || v.AsInt() > maxOutput) {
				return jinja.Undefined(), fmt.Errorf("a text repeated %d times: the sandbox allows 0 to %d", v.AsInt(), maxOutput)
			}
			return args[0], b.check()
		}),
		// __need(x, 'source'): an attribute or an index of x is read.
		"__need": jinja.NewCallable("__need", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			if args[0].IsUndefined() {
				return jinja.Undefined(), fmt.Errorf("%s is undefined, and the template reads from it (transformers raises UndefinedError)", args[1].AsString())
			}
			return args[0], b.check()
		}),
	}
}

// count adds n bytes of output.
func (b *budget) count(n int) error {
	b.output += n
	if b.output > maxOutput {
		return fmt.Errorf("the output exceeds the sandbox's %d bytes", maxOutput)
	}
	return nil
}

// size is about what printing v takes, without printing a string.
func size(v jinja.Value) int {
	if v.IsString() {
		return len(v.AsString())
	}
	if v.IsList() && v.AsList().Len() > maxOutput {
		return v.AsList().Len()
	}
	return len(v.String())
}

// instrument rewrites a template's source as the sandbox runs it (see
// budget). Text, comments and raw blocks are copied unchanged, and so are
// the tags it does not rewrite (macro, call, endif...).
func instrument(src string) string {
	var parts []string
	// The open loops: the part that holds each one's count of literal
	// text, and the count so far.
	type loop struct{ part, text int }
	var loops []loop
	text := func(s string) {
		parts = append(parts, s)
		for i := range loops {
			loops[i].text += len(s)
		}
	}
	closeLoop := func() {
		l := loops[len(loops)-1]
		parts[l.part] = strconv.Itoa(l.text)
		loops = loops[:len(loops)-1]
	}
	for src != "" {
		i := tagStart(src)
		if i < 0 {
			text(src)
			break
		}
		text(src[:i])
		src = src[i:]
		end := tagEnd(src)
		if end < 0 { // the parser says what is wrong
			parts = append(parts, src)
			break
		}
		tag := src[:end]
		src = src[end:]
		if tag[1] == '#' {
			parts = append(parts, tag)
			continue
		}
		// The tag's body, without its delimiters and whitespace markers.
		lo, hi := 2, len(tag)-2
		if lo < hi && strings.ContainsRune("-+", rune(tag[lo])) {
			lo++
		}
		if lo < hi && strings.ContainsRune("-+", rune(tag[hi-1])) {
			hi--
		}
		open, body, close := tag[:lo], tag[lo:hi], tag[hi:]
		if strings.TrimSpace(body) == "" {
			parts = append(parts, tag)
			continue
		}
		if tag[1] == '{' {
			parts = append(parts, open+" __out("+rewrite(body)+") "+close)
			continue
		}
		kw, rest := keyword(body)
		switch kw {
		case "raw":
			end := strings.Index(src, "endraw")
			if end < 0 {
				parts = append(parts, tag, src)
				src = ""
				continue
			}
			parts = append(parts, tag, src[:end])
			src = src[end:]
			continue
		case "if", "elif":
			if strings.TrimSpace(rest) == "" {
				break
			}
			parts = append(parts, open+" "+kw+" "+rewrite(rest)+" "+close)
			continue
		case "set":
			if eq := topLevel(rest, "="); eq >= 0 && strings.TrimSpace(rest[eq+1:]) != "" {
				parts = append(parts, open+" set "+rest[:eq]+"= __val("+rewrite(rest[eq+1:])+") "+close)
				continue
			}
		case "for":
			in := topLevel(rest, "in")
			if in < 0 {
				break
			}
			iter, tail := rest[in+2:], ""
			if e := min(atOrEnd(iter, "if"), atOrEnd(iter, "recursive")); e < len(iter) {
				iter, tail = iter[:e], rewrite(iter[e:])
			}
			if strings.TrimSpace(iter) == "" {
				break
			}
			parts = append(parts, open+" for "+rest[:in]+"in __iter("+rewrite(iter)+", ")
			loops = append(loops, loop{part: len(parts)})
			parts = append(parts, "", ") "+tail+" "+close)
			continue
		case "endfor":
			if len(loops) > 0 {
				closeLoop()
			}
		}
		parts = append(parts, tag)
	}
	for len(loops) > 0 {
		closeLoop()
	}
	return strings.Join(parts, "")
}

// tagStart is the offset of src's first {{, {% or {#, or -1.
func tagStart(src string) int {
	for i := 0; i+1 < len(src); i++ {
		if src[i] == '{' && strings.IndexByte("{%#", src[i+1]) >= 0 {
			return i
		}
	}
	return -1
}

// tagEnd is the length of the tag src starts with, quotes respected, or
// -1 when it is not closed.
func tagEnd(src string) int {
	closer := map[byte]string{'{': "}}", '%': "%}", '#': "#}"}[src[1]]
	if src[1] == '#' {
		if e := strings.Index(src[2:], closer); e >= 0 {
			return e + 4
		}
		return -1
	}
	for i := 2; i+1 < len(src); i++ {
		switch c := src[i]; {
		case c == '\'' || c == '"':
			j := stringEnd(src, i)
			if j < 0 {
				return -1
			}
			i = j - 1
		case src[i:i+2] == closer:
			return i + 2
		}
	}
	return -1
}

// stringEnd is the offset after the quoted string at s[i], or -1.
func stringEnd(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case s[i]:
			return j + 1
		}
	}
	return -1
}

// keyword splits a statement into its first word and the rest.
func keyword(body string) (string, string) {
	body = strings.TrimLeft(body, " \t\r\n")
	i := 0
	for i < len(body) && isIdent(body[i], i > 0) {
		i++
	}
	return body[:i], body[i:]
}

func isIdent(c byte, notFirst bool) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || notFirst && '0' <= c && c <= '9'
}

// token is one lexeme of an expression: kind is 'i' (a name), 's' (a
// string), 'n' (a number), 'o' (an operator), ' ' (space) or the bracket
// itself.
type token struct {
	kind byte
	s    string
	at   int
}

func lex(e string) []token {
	var toks []token
	for i := 0; i < len(e); {
		c, j := e[i], i+1
		kind := byte('o')
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			kind = ' '
			for j < len(e) && strings.IndexByte(" \t\n\r", e[j]) >= 0 {
				j++
			}
		case c == '\'' || c == '"':
			kind = 's'
			if j = stringEnd(e, i); j < 0 {
				j = len(e)
			}
		case isIdent(c, false):
			kind = 'i'
			for j < len(e) && isIdent(e[j], true) {
				j++
			}
		case '0' <= c && c <= '9':
			kind = 'n'
			for j < len(e) && ('0' <= e[j] && e[j] <= '9' || e[j] == '_' || e[j] == 'e' || e[j] == 'E' ||
				e[j] == '.' && j+1 < len(e) && '0' <= e[j+1] && e[j+1] <= '9') {
				j++
			}
		case strings.IndexByte("([{)]}", c) >= 0:
			kind = c
		default:
			for _, op := range []string{"**", "//", "==", "!=", "<=", ">="} {
				if strings.HasPrefix(e[i:], op) {
					j = i + 2
				}
			}
		}
		toks = append(toks, token{kind, e[i:j], i})
		i = j
	}
	return toks
}

// match is the index of the bracket closing toks[i], or -1.
func match(toks []token, i int) int {
	depth := 0
	for j := i; j < len(toks); j++ {
		switch toks[j].kind {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			if depth--; depth == 0 {
				return j
			}
		}
	}
	return -1
}

// topLevel is the byte offset of the word or operator w outside any
// bracket in e, or -1.
func topLevel(e, w string) int {
	toks := lex(e)
	for i := 0; i < len(toks); i++ {
		switch t := toks[i]; {
		case t.kind == '(' || t.kind == '[' || t.kind == '{':
			if i = match(toks, i); i < 0 {
				return -1
			}
		case t.s == w:
			return t.at
		}
	}
	return -1
}

func atOrEnd(e, w string) int {
	if i := topLevel(e, w); i >= 0 {
		return i
	}
	return len(e)
}

// operators are the words that are no value to read from.
var operators = map[string]bool{"and": true, "or": true, "not": true, "in": true, "is": true, "if": true, "else": true}

// rewrite instruments an expression: every value an attribute or an
// index is read from becomes __need(value, 'its source'), and the count
// of text * count becomes __times(count). An expression it cannot read
// (unbalanced brackets) is left to the parser's error.
func rewrite(e string) string {
	out, ok := emit(lex(e))
	if !ok {
		return e
	}
	return out
}

func emit(toks []token) (string, bool) {
	var b strings.Builder
	for i := 0; i < len(toks); {
		t := toks[i]
		if t.kind == 'o' && t.s == "*" {
			b.WriteString("*")
			i++
			for i < len(toks) && toks[i].kind == ' ' {
				b.WriteString(toks[i].s)
				i++
			}
			// The count: a chain and the powers that bind to it.
			var count strings.Builder
			for {
				s, next, ok := chain(toks, i)
				if !ok {
					return "", false
				}
				count.WriteString(s)
				if i = next; i >= len(toks) || toks[i].s != "**" {
					break
				}
				count.WriteString("**")
				i++
			}
			b.WriteString("__times(" + count.String() + ")")
			continue
		}
		s, next, ok := chain(toks, i)
		if !ok {
			return "", false
		}
		b.WriteString(s)
		i = next
	}
	return b.String(), true
}

// chain emits the value that starts at toks[i] and the attributes,
// indexes and calls that follow it, returning the index after them. A
// token that starts no value is emitted alone.
func chain(toks []token, i int) (string, int, bool) {
	if i >= len(toks) {
		return "", i, true
	}
	t := toks[i]
	var text, source string
	switch {
	case t.kind == '(' || t.kind == '[' || t.kind == '{':
		var ok bool
		if text, source, i, ok = group(toks, i); !ok {
			return "", 0, false
		}
	case t.kind == 'i' && !operators[t.s], t.kind == 's', t.kind == 'n':
		text, source = t.s, t.s
		i++
	default:
		return t.s, i + 1, true
	}
	for i < len(toks) {
		switch t := toks[i]; {
		case t.s == "." && i+1 < len(toks) && toks[i+1].kind == 'i':
			text = "__need(" + text + ", " + quote(source) + ")." + toks[i+1].s
			source += "." + toks[i+1].s
			i += 2
		case t.kind == '[' || t.kind == '(':
			g, s, next, ok := group(toks, i)
			if !ok {
				return "", 0, false
			}
			if t.kind == '[' {
				text = "__need(" + text + ", " + quote(source) + ")"
			}
			text, source, i = text+g, source+s, next
		default:
			return text, i, true
		}
	}
	return text, i, true
}

// group emits the bracketed tokens that start at toks[i], returning them
// instrumented and as written, and the index after them.
func group(toks []token, i int) (text, source string, next int, ok bool) {
	j := match(toks, i)
	if j < 0 {
		return "", "", 0, false
	}
	inner, ok := emit(toks[i+1 : j])
	if !ok {
		return "", "", 0, false
	}
	return toks[i].s + inner + toks[j].s, joinTokens(toks[i : j+1]), j + 1, true
}

func joinTokens(toks []token) string {
	var b strings.Builder
	for _, t := range toks {
		b.WriteString(t.s)
	}
	return b.String()
}

// quote is s as a Jinja string literal on one line.
func quote(s string) string {
	s = strings.NewReplacer("\\", "\\\\", "'", "\\'", "\n", " ", "\r", " ").Replace(s)
	return "'" + s + "'"
}
