package main

// What the page shows of a snapshot document, as plain values for the
// .vugu templates: the summary's sections, the inspector of one position,
// the token strip's HTML and the charts' SVG. Pure Go, tested natively.

import (
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/format/routing"
	"logitscope/internal/format/sidecar"
	"logitscope/web/ui/chart"
	"logitscope/web/ui/markup"
)

// kv is one labelled value; Pos ≥ 0 makes it a link to that position.
type kv struct {
	Label, Value, Note, Class string
	Pos                       int
}

// section is a titled list of values.
type section struct {
	Title string
	Rows  []kv
}

func row(label, value string) kv { return kv{Label: label, Value: value, Pos: -1} }

// summaryView lays out the report's statistics in llama.cpp's order and
// with its labels, then the flips, the timings and both sides.
func summaryView(d *snapshot.Doc) []section {
	s := &d.Report.Summary
	var out []section
	if c := d.Conform; c != nil {
		out = append(out, conformSection(c))
	}
	if p := s.PPL; p != nil {
		cor := "n/a"
		if p.Cor != nil {
			cor = pct(*p.Cor, 2)
		}
		var rows []kv
		if synthetic(d) {
			rows = append(rows, kv{Label: "Note", Value: "synthetic random weights: perplexity is meaningless here", Class: "note", Pos: -1,
				Note: "a random model predicts text no better than chance over its vocabulary; compare the KLD and flips instead"})
		}
		out = append(out, section{"Perplexity", append(rows,
			row("Mean PPL(Q)", est(p.Test, 1, 6, "")),
			row("Mean PPL(base)", est(p.Ref, 1, 6, "")),
			row("Cor(ln(PPL(Q)), ln(PPL(base)))", cor),
			row("Mean ln(PPL(Q)/PPL(base))", est(p.LnRatio, 1, 6, "")),
			row("Mean PPL(Q)/PPL(base)", est(p.Ratio, 1, 6, "")),
			row("Mean PPL(Q)-PPL(base)", est(p.Diff, 1, 6, "")),
		)})
	}
	k := section{Title: "KL divergence", Rows: []kv{row("Mean KLD", est(&s.KLD, 1, 6, ""))}}
	for _, q := range quantileRows(s.KLDQuant, false) {
		k.Rows = append(k.Rows, row(q.label+" KLD", fixed(q.v, 6)))
	}
	out = append(out, k)

	dp := section{Title: "Token probability", Rows: []kv{row("Mean Δp", est(&s.DeltaP, 100, 3, "%"))}}
	for _, q := range quantileRows(s.DeltaPQ, true) {
		dp.Rows = append(dp.Rows, row(q.label+" Δp", pct(q.v, 3)))
	}
	dp.Rows = append(dp.Rows,
		row("RMS Δp", est(&s.DeltaPRMS, 100, 3, "%")),
		row("Same top p", est(&s.SameTop, 100, 3, "%")),
		row("Ref top-1 in test top-5", pct(s.RefTop1InTestTop5, 3)),
		row("Test top-1 in ref top-5", pct(s.TestTop1InRefTop5, 3)))
	out = append(out, dp)

	mode := "argmax: Δp is of the reference's top-1; no PPL without targets"
	if s.TeacherForced {
		mode = "teacher-forced: Δp and PPL are of the given target tokens"
	}
	fl := section{Title: "Argmax flips", Rows: []kv{
		row("Flips", strconv.Itoa(s.Flips)+" of "+strconv.Itoa(s.Positions)+" positions"),
		{Label: "Close calls", Value: strconv.Itoa(s.CloseFlips), Class: "close", Pos: -1, Note: closeNote},
		{Label: "Clear calls", Value: strconv.Itoa(s.ClearFlips), Class: "clear", Pos: -1, Note: clearNote},
	}}
	if f := s.FirstDisagreement; f >= 0 && f < len(d.Report.Positions) {
		p := &d.Report.Positions[f]
		fl.Rows = append(fl.Rows, kv{Label: "First disagreement", Pos: f, Class: string(p.Class),
			Value: "position " + strconv.Itoa(f),
			Note:  "reference " + quoted(d, p.RefChoice) + ", test " + quoted(d, p.TestChoice) + ", " + string(p.Class) + " call"})
	} else {
		fl.Rows = append(fl.Rows, row("First disagreement", "none"))
	}
	fl.Rows = append(fl.Rows,
		row("Criterion", d.Report.Criterion.Text),
		row("Capture σ", fixed(s.CaptureSigma, 6)),
		row("Mode", mode),
		row("Geometry", strconv.Itoa(d.Report.Rows)+" positions × "+strconv.Itoa(d.Report.Vocab)+" vocab"))
	out = append(out, fl)
	out = append(out, breakdownSections(d.Breakdown)...)

	if rt := d.Report.Routing; rt != nil {
		out = append(out, routingSection(rt))
	}

	t := d.Timing
	tm := section{Title: "Timing"}
	for _, x := range []struct {
		l string
		v float64
	}{{"Page load", t.PageLoad}, {"Open reference", t.OpenRef}, {"First token", t.FirstToken},
		{"Reference run", t.RefRun}, {"Open test", t.OpenTest}, {"Test run", t.TestRun}, {"Analysis", t.Analysis}} {
		if x.v > 0 {
			tm.Rows = append(tm.Rows, row(x.l, ms(x.v)))
		}
	}
	if len(tm.Rows) > 0 {
		out = append(out, tm)
	}
	out = append(out, section{"Sides", []kv{sideRow("Reference", d.Ref), sideRow("Test", d.Test)}})
	return out
}

// conformSection names the conformance case first, and the thresholds it
// failed as conform's JUnit failure words them: the reason the link was
// followed from a CI log.
func conformSection(c *snapshot.Conform) section {
	sec := section{Title: "Conformance case", Rows: []kv{row("Case", c.Case)}}
	if c.Suite != "" {
		sec.Rows = append(sec.Rows, row("Suite", c.Suite))
	}
	if c.Pairs > 1 {
		sec.Rows = append(sec.Rows, row("Capture", strconv.Itoa(c.Pair)+" of "+strconv.Itoa(c.Pairs)))
	}
	if len(c.Failures) == 0 {
		return section{sec.Title, append(sec.Rows, row("Result", "pass"))}
	}
	for _, f := range c.Failures {
		sec.Rows = append(sec.Rows, kv{Label: "Failed", Value: f, Class: "clear", Pos: -1,
			Note: "the case's metric past its threshold, over all its captures"})
	}
	return sec
}

// breakdownSections are the report's statistics by the panel windows'
// domain and by their role, a section per key and a row per label, in
// the order report prints its tables: positions, mean KLD, its 99th
// percentile, same top-1, flips and clear calls.
func breakdownSections(b margins.Breakdown) []section {
	var out []section
	for _, key := range b.Keys() {
		labels := b[key]
		if len(labels) == 0 {
			continue
		}
		sec := section{Title: "By " + key}
		for _, label := range slices.Sorted(maps.Keys(labels)) {
			s := labels[label]
			sec.Rows = append(sec.Rows, kv{Label: label, Pos: -1,
				Value: strconv.Itoa(s.Positions) + " positions · KLD " + fixed(s.KLD.Value, 6) + " · 99% " + fixed(s.KLDQuant.P99, 6) +
					" · same top " + pct(s.SameTop.Value, 2) + " · " + strconv.Itoa(s.Flips) + " flips, " + strconv.Itoa(s.ClearFlips) + " clear",
				Note: "the positions of the panel's windows whose " + key + " is " + label})
		}
		out = append(out, sec)
	}
	return out
}

// What a close and a clear call mean, in the words the page uses next to
// their counts.
const (
	closeNote = "the reference was nearly tied, within the noise quantization adds: a flip is expected there, not a defect"
	clearNote = "the reference clearly preferred its token and the test picked another: a defect worth a look"
)

// synthetic says whether d's model has random weights.
func synthetic(d *snapshot.Doc) bool { return d.Model != nil && d.Model.Nature == sidecar.Synthetic }

// verdict is the one line above a document that says what the page
// shows: how many predictions differ, and what close and clear calls are.
func verdict(d *snapshot.Doc) string {
	s := &d.Report.Summary
	n := strconv.Itoa(s.Positions)
	switch {
	case s.Positions == 0:
		return "No positions to compare."
	case s.Flips == 0:
		return "All " + n + " predictions agree: at every position the test picked the reference's top token."
	}
	return strconv.Itoa(s.Flips) + " of " + n + " predictions differ: " +
		plural(s.CloseFlips, "close call", "close calls") + " (" + closeNote + ") and " +
		plural(s.ClearFlips, "clear call", "clear calls") + " (" + clearNote + ")."
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// natureLine says what the model is, from a document's model note: its
// nature in words and the note's one line; "" for none.
func natureLine(m *snapshot.Model) string {
	if m == nil {
		return ""
	}
	what := map[string]string{
		sidecar.Synthetic:   "synthetic model, random weights: its text is noise and its numbers say nothing of a quantizer",
		sidecar.TrainedDemo: "trained demo model",
		sidecar.User:        "your model",
	}[m.Nature]
	if m.About != "" {
		what += " · " + m.About
	}
	return what
}

// routingSection counts a mixture of experts' routing changes: positions
// routed to another set of experts (linked to the first), positions only
// reordered, experts swapped, flips that fell on a set change, and each
// sparse layer's share.
func routingSection(rt *routing.Report) section {
	s := &rt.Summary
	of := func(n, m int) string { return strconv.Itoa(n) + " of " + strconv.Itoa(m) }
	sec := section{Title: "Expert routing", Rows: []kv{
		{Label: "Another expert set", Value: of(s.SetChanged, s.Positions) + " positions", Class: "rs", Pos: -1,
			Note: "at least one sparse layer ran an expert the reference did not pick"},
		{Label: "Only reordered", Value: strconv.Itoa(s.OrderOnly), Class: "ro", Pos: -1,
			Note: "the same experts, ranked (and so weighted) differently"},
	}}
	if f := s.FirstSetChange; f >= 0 && f < len(rt.Positions) {
		sec.Rows = append(sec.Rows, kv{Label: "First routing change", Value: "position " + strconv.Itoa(f), Pos: f, Class: "rs",
			Note: "layers " + routing.FormatLayers(rt.Positions[f].SetLayers)})
	} else {
		sec.Rows = append(sec.Rows, row("First routing change", "none"))
	}
	swapped := "—"
	if s.Slots > 0 {
		swapped = pct(float64(s.Swapped)/float64(s.Slots), 3)
	}
	sec.Rows = append(sec.Rows,
		kv{Label: "Experts swapped", Value: of(s.Swapped, s.Slots) + " choices", Note: swapped, Pos: -1},
		row("Flips at a set change", of(s.FlipsAtSetChange, s.Flips)),
		row("Sparse layers", rt.Layout.String()))
	for _, l := range s.Layers {
		sec.Rows = append(sec.Rows, row("Layer "+strconv.Itoa(l.Layer),
			strconv.Itoa(l.SetChanged)+" set · "+strconv.Itoa(l.OrderOnly)+" order · "+strconv.Itoa(l.Swapped)+" swapped"))
	}
	return sec
}

func sideRow(label string, s snapshot.Side) kv {
	parts := []string{s.Label}
	if s.Device != "" {
		parts = append(parts, s.Device)
	}
	if s.Adapter != "" {
		parts = append(parts, s.Adapter)
	}
	parts = append(parts, strconv.Itoa(s.Rows)+" rows")
	r := row(label, strings.Join(parts, " · "))
	if rc := s.Receipt; rc != nil {
		r.Note = "receipt verified: variant " + rc.Variant + ", model " + short(rc.Model) + ", " + rc.Request.Mode
	}
	return r
}

// summaryHTML renders the sections as tables. The summary does not change
// while a document is shown, so the page sets it once per document rather
// than having vugu diff its hundreds of cells at every render. A row with
// a position links to it (data-pos).
func summaryHTML(secs []section) string {
	var m markup.Builder
	for _, s := range secs {
		m.Open("div", "class", "sec")
		m.Elem("h3", s.Title)
		m.Open("table")
		m.Open("tbody")
		for _, r := range s.Rows {
			m.Open("tr", "class", r.Class)
			m.Elem("th", r.Label)
			m.Open("td")
			if r.Pos >= 0 {
				m.Elem("a", r.Value, "href", "#inspector", "class", "poslink", "data-pos", strconv.Itoa(r.Pos))
			} else {
				m.Elem("span", r.Value)
			}
			if r.Note != "" {
				m.Text(" ")
				m.Elem("small", r.Note)
			}
			m.Close("td")
			m.Close("tr")
		}
		m.Close("tbody")
		m.Close("table")
		m.Close("div")
	}
	return m.String()
}

type labeled struct {
	label string
	v     float64
}

// quantileRows are llama.cpp's order statistics with its labels; Δp adds
// the quartiles, as llama.cpp prints them for Δp only.
func quantileRows(q margins.Quantiles, quartiles bool) []labeled {
	rows := []labeled{{"Maximum", q.Max}, {"99.9%", q.P99_9}, {"99.0%", q.P99}, {"95.0%", q.P95}, {"90.0%", q.P90}}
	if quartiles {
		rows = append(rows, labeled{"75.0%", q.P75})
	}
	rows = append(rows, labeled{"Median", q.Median})
	if quartiles {
		rows = append(rows, labeled{"25.0%", q.P25})
	}
	return append(rows, labeled{"10.0%", q.P10}, labeled{"5.0%", q.P5}, labeled{"1.0%", q.P1},
		labeled{"0.1%", q.P0_1}, labeled{"Minimum", q.Min})
}

func quoted(d *snapshot.Doc, id int) string {
	return "“" + visible(d.Text(id)) + "” (" + strconv.Itoa(id) + ")"
}

// topRow is one line of a side's top-k table.
type topRow struct {
	Rank        int
	Text        []glyph
	Logit, Prob string
	ID          int
	Mark        string // "a" (the reference's choice), "b" (the test's), "ab" both
}

// inspector is the view of one position.
type inspector struct {
	Index, Count int
	Token        []glyph // the text of the position's token: the target, or the reference's choice
	TokenID      int
	TokenLabel   string // what that token is: "target" or "reference chose"
	Class        string
	Ref, Test    []topRow
	Facts        []kv
	// Routing: the position's change (same, order, set) and one row per
	// sparse layer; "" and nil for a dense model.
	Route  string
	Routes []routeRow
}

// routeRow is one sparse layer of a position: both sides' experts, most
// probable first, each marked when the other side did not pick it.
type routeRow struct {
	Layer     int
	Change    string
	Ref, Test []expert
}

// expert is one chosen expert; Other says the other side did not pick it.
type expert struct {
	ID    int
	Other bool
}

// routeRows lays out position i's routing, or nil without routing.
func routeRows(rt *routing.Report, i int) []routeRow {
	if rt == nil || i >= len(rt.Positions) {
		return nil
	}
	p := &rt.Positions[i]
	mark := func(ids, other []int) []expert {
		out := make([]expert, len(ids))
		for k, id := range ids {
			out[k] = expert{ID: id, Other: !slices.Contains(other, id)}
		}
		return out
	}
	rows := make([]routeRow, len(rt.Layers))
	for j, layer := range rt.Layers {
		change := routing.Same
		switch {
		case slices.Contains(p.SetLayers, layer):
			change = routing.Set
		case slices.Contains(p.OrderLayers, layer):
			change = routing.Order
		}
		rows[j] = routeRow{Layer: layer, Change: string(change), Ref: mark(p.Ref[j], p.Test[j]), Test: mark(p.Test[j], p.Ref[j])}
	}
	return rows
}

// routeLabel names a routing change for people.
func routeLabel(c string) string {
	return map[string]string{
		string(routing.Same):  "same experts",
		string(routing.Order): "experts reordered",
		string(routing.Set):   "another expert set",
	}[c]
}

func topRows(d *snapshot.Doc, toks []margins.Token, a, b int) []topRow {
	out := make([]topRow, len(toks))
	for i, t := range toks {
		m := ""
		if t.ID == a {
			m += "a"
		}
		if t.ID == b {
			m += "b"
		}
		out[i] = topRow{Rank: i + 1, Text: glyphs(d.Text(t.ID), false), ID: t.ID,
			Logit: fixed(t.Logit, 4), Prob: pct(t.Prob, 2), Mark: m}
	}
	return out
}

// inspectorView describes position i of d (i in range).
func inspectorView(d *snapshot.Doc, i int) inspector {
	p := &d.Report.Positions[i]
	a, b := p.RefChoice, p.TestChoice
	v := inspector{Index: i, Count: len(d.Report.Positions), Token: glyphs(d.Text(d.Tokens[i]), false),
		TokenID: d.Tokens[i], TokenLabel: "reference chose", Class: string(p.Class),
		Ref: topRows(d, p.RefTop, a, b), Test: topRows(d, p.TestTop, a, b)}

	if d.Report.Summary.TeacherForced {
		// The text's next token, which neither side chose: calling it
		// what the position "predicts" read as a prediction.
		v.TokenLabel = "target"
	}
	ratio := "—"
	if p.Ratio != nil {
		ratio = fixed(*p.Ratio, 2)
	}
	mLabel := "m = z_ref[a] − z_ref[b]"
	if p.MarginOf != "flip" {
		mLabel = "m = z_ref[a] − z_ref[runner-up]"
	}
	crit := d.Report.Criterion
	limit := "—"
	switch {
	case crit.Mode == "abs":
		limit = fixed(crit.AbsMargin, 4) + " (fixed)"
	case crit.K > 0:
		limit = fixed(crit.K*p.Sigma, 4) + " (" + strconv.FormatFloat(crit.K, 'g', -1, 64) + "·σ)"
	}
	verdict := map[string]string{
		"agree": "both sides chose the same token",
		"close": "a flip within the noise: m ≤ the limit",
		"clear": "a flip against a clear reference preference: m > the limit",
	}[v.Class]
	v.Facts = []kv{
		{Label: "Class", Value: v.Class, Note: verdict, Class: v.Class, Pos: -1},
		row("Reference choice a", quoted(d, a)),
		row("Test choice b", quoted(d, b)),
		{Label: mLabel, Value: fixed(p.Margin, 4) + " logits", Note: pct(p.MarginProb, 3) + " in probability", Pos: -1},
		{Label: "Reference top-1 − top-2", Value: fixed(p.RefTop12, 4) + " logits", Note: pct(p.RefTop12Prob, 3) + " in probability", Pos: -1},
		row("σ (pair noise)", fixed(p.Sigma, 4)),
		row("m / σ", ratio),
		row("Close-call limit", limit),
		row("Pair shift d[b] − d[a]", fixed(p.PairShift, 4)),
		row("Rank of a in test", strconv.Itoa(p.RefChoiceRankInTest)),
		row("Rank of b in reference", strconv.Itoa(p.TestChoiceRankInRef)),
		row("KLD", fixed(p.KLD, 6)),
		{Label: "Δp of the target", Value: pct(p.DeltaP, 3),
			Note: "target " + quoted(d, p.Target) + ": " + pct(p.PRefTarget, 2) + " → " + pct(p.PTestTarget, 2), Pos: -1},
	}
	if rt := d.Report.Routing; rt != nil {
		v.Route = string(rt.Positions[i].Change)
		v.Routes = routeRows(rt, i)
	}
	return v
}

// flagged says whether position i passes filter, the strip's tab
// (snapshot.Tab*): every flip and routing change, the flips, or the
// positions routed to another set of experts. The strip dims the others;
// the flagged-position buttons step between those it keeps.
func flagged(d *snapshot.Doc, i int, filter string) bool {
	flip := d.Report.Positions[i].Flip
	set := d.Report.Routing != nil && d.Report.Routing.Positions[i].Change == routing.Set
	switch filter {
	case snapshot.TabFlips:
		return flip
	case snapshot.TabRoutes:
		return set
	}
	return flip || set
}

// nextFlagged is the first position after from (dir 1) or before it (dir
// −1) that passes filter, or −1.
func nextFlagged(d *snapshot.Doc, from, dir int, filter string) int {
	for i := from + dir; i >= 0 && i < len(d.Report.Positions); i += dir {
		if flagged(d, i, filter) {
			return i
		}
	}
	return -1
}

// kinds are the positions' classes as chart kinds.
func kinds(d *snapshot.Doc) []chart.Kind {
	k := make([]chart.Kind, len(d.Report.Positions))
	for i, p := range d.Report.Positions {
		switch p.Class {
		case margins.Close:
			k[i] = chart.Close
		case margins.Clear:
			k[i] = chart.Clear
		}
	}
	return k
}

// kldScale is the KLD that saturates the strip's colour: the 99th
// percentile (the maximum when that is 0), so that one outlier does not
// wash out the rest.
func kldScale(d *snapshot.Doc) float64 {
	q := d.Report.Summary.KLDQuant
	if q.P99 > 0 {
		return q.P99
	}
	return q.Max
}

// stripHTML is the token strip's content: the prompt's tokens (greyed),
// then one span per position with its class and KLD intensity (--k, 0–1).
// A panel's window starts with a token that no row predicts (it is the
// context of the first row): it is drawn before the window's first
// position, marked as a window start, so that the strip shows the whole
// text and where each window begins. Built once per document; the page
// sets it as the strip's innerHTML. The class is escaped like any value:
// Parse admits only margins' three, but the page does not rely on it.
func stripHTML(d *snapshot.Doc) string { return stripHTMLMarked(d, nil) }

// stripHTMLMarked is stripHTML with mark's class and title added to each
// position (nil: none): a split's engine-only flips.
func stripHTMLMarked(d *snapshot.Doc, mark func(i int) (class, title string)) string {
	var m markup.Builder
	m.Grow(64 * (len(d.PromptIDs) + len(d.Tokens)))
	for _, id := range d.PromptIDs {
		m.Open("span", "class", "p", "title", "prompt · "+strconv.Itoa(id))
		stripGlyphs(&m, d.Text(id))
		m.Close("span")
	}
	scale := kldScale(d)
	rt := d.Report.Routing
	w := 0
	for i, p := range d.Report.Positions {
		for ; w < len(d.Windows) && d.Windows[w].Pos <= i; w++ {
			win := d.Windows[w]
			starts := "window " + strconv.Itoa(w+1) + " of " + strconv.Itoa(len(d.Windows)) + " starts · " +
				visible(d.Text(win.Token)) + " (" + strconv.Itoa(win.Token) + ")"
			if win.Prefix {
				// The model's BOS before each window is no part of the
				// text: a bar marks where the window starts, mid-sentence
				// as it may be, and its title names the token.
				m.Open("span", "class", "w0 pre", "data-w", strconv.Itoa(w),
					"title", starts+", the model's BOS put before each window, is context: no row predicts it")
				m.Close("span")
				continue
			}
			m.Open("span", "class", "w0", "data-w", strconv.Itoa(w), "title", starts+" is context: no row predicts it")
			stripGlyphs(&m, d.Text(win.Token))
			m.Close("span")
		}
		k := 0.0
		if scale > 0 {
			k = math.Sqrt(math.Min(1, math.Max(0, p.KLD/scale)))
		}
		class := "t " + string(p.Class)
		title := strconv.Itoa(i) + " · " + string(p.Class) + " · KLD " + strconv.FormatFloat(p.KLD, 'g', 3, 64)
		if rt != nil {
			// rs: routed to another set of experts; ro: only reordered.
			switch r := &rt.Positions[i]; r.Change {
			case routing.Set:
				class += " rs"
				title += " · another expert set at layers " + routing.FormatLayers(r.SetLayers)
			case routing.Order:
				class += " ro"
				title += " · experts reordered at layers " + routing.FormatLayers(r.OrderLayers)
			}
		}
		if mark != nil {
			c, t := mark(i)
			class, title = class+c, title+t
		}
		m.Open("span",
			"class", class,
			"data-i", strconv.Itoa(i),
			"style", "--k:"+strconv.FormatFloat(k, 'f', 2, 64),
			"title", title)
		stripGlyphs(&m, d.Text(d.Tokens[i]))
		m.Close("span")
	}
	return m.String()
}

// stripGlyphs writes a token's text as the strip draws it: plain text
// as it is, other glyphs in a span of their class (g-ws, g-ctl, g-byte,
// g-empty).
func stripGlyphs(m *markup.Builder, s string) {
	for _, g := range glyphs(s, true) {
		if g.Class == "" {
			m.Text(g.Text)
		} else {
			m.Elem("span", g.Text, "class", "g-"+g.Class)
		}
	}
}

// span is the charts' zoom: positions [From, To) of a document; To 0
// means all of them.
type span struct{ From, To int }

// of is s within n positions: all of them when s is empty or does not fit.
func (s span) of(n int) (from, to int) {
	if s.To <= 0 || s.From < 0 || s.From >= s.To || s.To > n {
		return 0, n
	}
	return s.From, s.To
}

// zoomed is the zoom after zooming by factor (0.5: in, 2: out) around
// position sel of n: a window of at least minZoom positions, kept inside
// the document, the whole document when it would cover it.
func (s span) zoomed(factor float64, sel, n int) span {
	from, to := s.of(n)
	w := int(math.Round(float64(to-from) * factor))
	w = max(w, min(minZoom, n))
	if w >= n {
		return span{}
	}
	from = min(max(sel-w/2, 0), n-w)
	return span{from, from + w}
}

// minZoom is the fewest positions a zoomed chart shows.
const minZoom = 16

// kldChart is the KLD-per-position bar chart of the positions z shows.
func kldChart(d *snapshot.Doc, sel int, z span) string {
	from, to := z.of(len(d.Report.Positions))
	v := make([]float64, to-from)
	for i, p := range d.Report.Positions[from:to] {
		v[i] = p.KLD
	}
	return chart.Bars(chart.Default, from, v, kinds(d)[from:to], sel, "position", "KLD (nats)")
}

// marginChart plots each position's margin m (against the test's choice
// on a flip, the runner-up elsewhere) with the close-call limit: k·σ per
// position, k·σ of the capture, or the fixed threshold; the positions z
// shows.
func marginChart(d *snapshot.Doc, sel int, z span) string {
	from, to := z.of(len(d.Report.Positions))
	pos := d.Report.Positions[from:to]
	y := make([]float64, len(pos))
	var boundary []float64
	hline := -1.0
	c := d.Report.Criterion
	switch {
	case c.Mode == "abs":
		hline = c.AbsMargin
	case c.SigmaScope == "capture":
		hline = c.K * d.Report.Summary.CaptureSigma
	default:
		boundary = make([]float64, len(pos))
	}
	for i, p := range pos {
		y[i] = p.Margin
		if boundary != nil {
			boundary[i] = c.K * p.Sigma
		}
	}
	return chart.Scatter(chart.Default, from, y, kinds(d)[from:to], boundary, hline, sel, "position", "margin m (logits)")
}

// softwareAdapter says whether a WebGPU adapter (as the probe names it:
// vendor and architecture) renders in software on the CPU: Chromium's
// SwiftShader, Mesa's llvmpipe or lavapipe. There the engine's CPU path
// is faster than WebGPU (the tiny model: 24.5 ms against 984 ms a token),
// so "auto" takes the CPU.
func softwareAdapter(name string) bool {
	name = strings.ToLower(name)
	for _, s := range []string{"swiftshader", "llvmpipe", "lavapipe"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}
