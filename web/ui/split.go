package main

// What the page shows of a three-way split (package split): the dropped
// reference, the file decoded exactly and the engine's dump, as
// `logitscope report --engine-dump` prints it: what the file does next to
// what the engine adds, the flips by cause and the positions whose flip
// the engine alone caused. Pure Go, tested natively.

import (
	"fmt"
	"strconv"

	"logitscope/internal/analysis/split"
	"logitscope/web/ui/markup"
)

// splitHTML draws rep; names are the reference's, the file's and the
// engine's dump names, text the token texts (nil: ids only).
func splitHTML(rep *split.Report, names [3]string, text func(int) string) string {
	var m markup.Builder
	m.Elem("h2", "What your file does, what your engine adds")
	m.Open("p", "class", "note")
	m.Text(fmt.Sprintf("%d positions (vocab %d): reference %s, file decoded exactly %s, engine %s.",
		rep.Positions, rep.Vocab, names[0], names[1], names[2]))
	m.Close("p")
	m.Open("table", "class", "split-sides")
	m.Open("thead")
	m.Open("tr")
	m.Elem("th", "")
	for _, h := range []struct{ id, title, note string }{
		{"split-file", "what your file does", "reference → exact decode"},
		{"split-engine", "what your engine adds", "exact decode → engine"},
		{"split-total", "together", "reference → engine"},
	} {
		m.Open("th", "id", h.id)
		m.Text(h.title + " ")
		m.Elem("small", h.note)
		m.Close("th")
	}
	m.Close("tr")
	m.Close("thead")
	m.Open("tbody")
	sides := []split.Side{rep.File, rep.Engine, rep.Total}
	for _, row := range []struct {
		label, class string
		value        func(split.Side) string
	}{
		{"mean KLD", "kld", func(s split.Side) string { return split.Mean(s.KLD) }},
		{"flips", "flips", func(s split.Side) string { return strconv.Itoa(s.Flips) }},
		{"same top-1", "same", func(s split.Side) string { return strconv.FormatFloat(100*s.SameTop, 'f', 2, 64) + "%" }},
	} {
		m.Open("tr", "class", row.class)
		m.Elem("th", row.label)
		for i, s := range sides {
			m.Elem("td", row.value(s), "class", [...]string{"file", "engine", "total"}[i])
		}
		m.Close("tr")
	}
	m.Close("tbody")
	m.Close("table")
	m.Open("p", "class", "causes")
	m.Text("Flips by cause: the file's ")
	m.Elem("b", strconv.Itoa(rep.ByCause[split.File]), "class", "c-file")
	m.Text(", the engine's alone ")
	m.Elem("b", strconv.Itoa(rep.ByCause[split.Engine]), "class", "c-engine")
	m.Text(", both ")
	m.Elem("b", strconv.Itoa(rep.ByCause[split.Both]), "class", "c-both")
	m.Text(", the file's undone by the engine ")
	m.Elem("b", strconv.Itoa(rep.ByCause[split.EngineUndo]), "class", "c-undone")
	m.Text(".")
	m.Close("p")
	if len(rep.EngineOnly) == 0 {
		m.Elem("p", "No flip is the engine's alone.", "class", "note")
		return m.String()
	}
	m.Elem("h3", "Engine-only flips (marked in the token strip)")
	m.Open("ol", "class", "engine-only")
	for _, i := range rep.EngineOnly {
		p := rep.Rows[i]
		m.Open("li", "data-i", strconv.Itoa(p.Index))
		m.Elem("a", "position "+strconv.Itoa(p.Index), "href", "#inspector", "class", "poslink", "data-pos", strconv.Itoa(p.Index))
		m.Text(fmt.Sprintf(": reference and file pick %s, the engine %s (file margin %.4g, KLD file→engine %.3g)",
			splitToken(p.Ref, text), splitToken(p.EngineTop, text), p.EngineMargin, p.KLDEngine))
		m.Close("li")
	}
	m.Close("ol")
	return m.String()
}

// splitToken names a token: its text (from text; "" or nil text: not
// known) and its id.
func splitToken(id int, text func(int) string) string {
	if text != nil {
		if s := text(id); s != "" {
			return strconv.Quote(s) + " (" + strconv.Itoa(id) + ")"
		}
	}
	return strconv.Itoa(id)
}

// engineFlips marks the strip's positions whose flip the engine alone
// caused (class ef), with the engine's choice in the title.
func engineFlips(rep *split.Report, text func(int) string) func(i int) (class, title string) {
	return func(i int) (string, string) {
		if i >= len(rep.Rows) || rep.Rows[i].Cause != split.Engine {
			return "", ""
		}
		return " ef", " · the engine alone flips it, to " + splitToken(rep.Rows[i].EngineTop, text)
	}
}
