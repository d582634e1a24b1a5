// Package markup builds the HTML and SVG text that the page sets as an
// element's innerHTML (the token strip, the summary, the charts: too many
// nodes for vugu to diff at every render). It is the only way the page
// builds such text: every text and attribute value goes through Builder,
// which escapes it, so a value from a document (a token's text, a class,
// a label) can never close its attribute or open an element, whatever
// Parse let through. Everything else the page shows goes through vugu,
// which sets attributes and escapes string content itself.
package markup

import (
	"html"
	"strings"
)

// Builder accumulates markup. Tag and attribute names are the caller's
// constants and are checked, not escaped: a name that is not a plain
// identifier is a bug and panics.
type Builder struct{ b strings.Builder }

// Grow reserves room for n more bytes.
func (m *Builder) Grow(n int) { m.b.Grow(n) }

// Open writes a start tag; attrs are name, value pairs.
func (m *Builder) Open(tag string, attrs ...string) {
	m.tag(tag, attrs)
	m.b.WriteByte('>')
}

// Empty writes a self-closed element (SVG's <line/>, <path/>).
func (m *Builder) Empty(tag string, attrs ...string) {
	m.tag(tag, attrs)
	m.b.WriteString("/>")
}

// Close writes an end tag.
func (m *Builder) Close(tag string) {
	mustName(tag)
	m.b.WriteString("</" + tag + ">")
}

// Text writes s as text.
func (m *Builder) Text(s string) { m.b.WriteString(html.EscapeString(s)) }

// Elem writes a whole element holding the text s.
func (m *Builder) Elem(tag, s string, attrs ...string) {
	m.Open(tag, attrs...)
	m.Text(s)
	m.Close(tag)
}

// String is the markup built so far.
func (m *Builder) String() string { return m.b.String() }

func (m *Builder) tag(tag string, attrs []string) {
	mustName(tag)
	if len(attrs)%2 != 0 {
		panic("markup: <" + tag + "> attributes must come in name, value pairs")
	}
	m.b.WriteString("<" + tag)
	for i := 0; i < len(attrs); i += 2 {
		mustName(attrs[i])
		m.b.WriteString(" " + attrs[i] + `="` + html.EscapeString(attrs[i+1]) + `"`)
	}
}

// mustName accepts the names HTML and SVG elements and attributes use:
// letters, digits, '-' and ':' (xmlns:xlink), starting with a letter.
func mustName(s string) {
	for i, c := range s {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !letter && (i == 0 || !(c >= '0' && c <= '9' || c == '-' || c == ':')) {
			panic("markup: not a tag or attribute name: " + s)
		}
	}
	if s == "" {
		panic("markup: empty tag or attribute name")
	}
}
