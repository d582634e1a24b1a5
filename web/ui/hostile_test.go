package main

import (
	"encoding/xml"
	"io"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/format/receipt"
)

// hostile is markup meant to break out of text or an attribute.
const hostile = `agree"><img src=x onerror="window.__xss=1">'<script>window.__xss=2</script>`

// TestInnerHTMLOfHostileDoc: whatever a document holds, even what Parse
// refuses (the page must not depend on it), the markup the page sets as
// innerHTML has only the page's own elements and attributes, and the
// hostile strings come out as text or attribute values.
func TestInnerHTMLOfHostileDoc(t *testing.T) {
	d := testDoc(t)
	for i := range d.Report.Positions {
		d.Report.Positions[i].Class = margins.Class(hostile)
	}
	for k := range d.Texts {
		d.Texts[k] = hostile
	}
	d.Report.Criterion.Text = hostile
	d.Report.Criterion.SigmaScope = hostile
	d.Ref = snapshot.Side{Label: hostile, Device: hostile, Adapter: hostile, Rows: 4,
		Receipt: &receipt.Receipt{Variant: hostile, Model: hostile, Request: receipt.Request{Mode: hostile}}}
	d.Test.Label = hostile

	rep := splitReport(t)
	hostileText := func(int) string { return hostile }

	elements := []string{"div", "span", "h2", "h3", "p", "b", "ol", "li", "thead", "table", "tbody", "tr", "th", "td", "a", "small",
		"svg", "line", "text", "rect", "path"}
	attrs := []string{"id", "class", "title", "data-i", "data-pos", "href", "style", "xmlns", "viewBox", "role",
		"aria-label", "x", "y", "x1", "y1", "x2", "y2", "width", "height", "d", "text-anchor",
		"dominant-baseline", "transform", "visibility", "stroke-width"}
	for name, s := range map[string]string{
		"strip":       stripHTML(d),
		"summary":     summaryHTML(summaryView(d)),
		"kld":         kldChart(d, 1, span{}),
		"margin":      marginChart(d, 1, span{}),
		"split":       splitHTML(rep, [3]string{hostile, hostile, hostile}, hostileText),
		"split strip": stripHTMLMarked(d, engineFlips(rep, hostileText)),
	} {
		dec := xml.NewDecoder(strings.NewReader("<div>" + s + "</div>"))
		texts := 0
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v in %s", name, err, s)
			}
			switch tok := tok.(type) {
			case xml.StartElement:
				if !slices.Contains(elements, tok.Name.Local) {
					t.Errorf("%s: element <%s>", name, tok.Name.Local)
				}
				for _, a := range tok.Attr {
					if !slices.Contains(attrs, a.Name.Local) {
						t.Errorf("%s: <%s %s=%q>", name, tok.Name.Local, a.Name.Local, a.Value)
					}
					if strings.Contains(a.Value, hostile) {
						texts++
					}
				}
			case xml.CharData:
				if strings.Contains(string(tok), hostile) {
					texts++
				}
			}
		}
		if name == "strip" || name == "summary" || name == "split" || name == "split strip" {
			if texts == 0 {
				t.Errorf("%s: the hostile strings are nowhere as text", name)
			}
		}
	}
}
