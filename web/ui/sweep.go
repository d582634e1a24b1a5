package main

// What the page shows of a sensitivity sweep or a recipe (package
// attribution), dropped as the CLI wrote it or shared at /r/<id>: a
// heatmap of layer × kind for a chosen measure, whose cells open a unit's
// report; the clear calls, each with a "what caused this?" button that
// lists its culprits and their shares of the margin; the divergence by
// layer; a recipe's frontier, measures and commands. Pure Go, tested
// natively; sweepdom.go puts it in the page.

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"logitscope/internal/analysis/attribution"
	"logitscope/web/ui/chart"
	"logitscope/web/ui/markup"
)

// sweepDoc is a sweep or a recipe (one of Res and Rec) and its bytes as
// read, which sharing stores unchanged: their seal covers them.
type sweepDoc struct {
	Res  *attribution.Result
	Rec  *attribution.Recipe
	Raw  []byte
	Name string
}

// isSweep says whether a document is a sweep's or a recipe's by its kind.
func isSweep(data []byte) bool {
	var head struct{ Kind string }
	json.Unmarshal(data, &head)
	return head.Kind == attribution.Kind || head.Kind == attribution.RecipeKind
}

func parseSweep(data []byte, name string) (*sweepDoc, error) {
	res, rec, err := attribution.Parse(data, name)
	if err != nil {
		return nil, err
	}
	return &sweepDoc{Res: res, Rec: rec, Raw: data, Name: name}, nil
}

// sweepView is what the page shows of a sweep: the heatmap's measure, the
// unit whose report is open (-1: none) and the clear call whose culprits
// are (-1: none). A link carries it (sweepQuery).
type sweepView struct {
	Measure string
	Unit    int
	Call    int
}

// measure is one of the heatmap's: its id (in links), its label, and its
// value for a unit; ok false where the sweep did not measure it.
type measure struct {
	ID, Label string
	Of        func(r *attribution.Result, u attribution.UnitResult) (float64, bool)
}

var measures = []measure{
	{"fwd", "forward mean KLD", func(_ *attribution.Result, u attribution.UnitResult) (float64, bool) { return u.Forward.MeanKLD, true }},
	{"fwd99", "forward 99% KLD", func(_ *attribution.Result, u attribution.UnitResult) (float64, bool) { return u.Forward.KLD99, true }},
	{"clear", "forward clear calls", func(_ *attribution.Result, u attribution.UnitResult) (float64, bool) {
		return float64(u.Forward.Clear), true
	}},
	{"dp", "forward −Δp of the target", func(_ *attribution.Result, u attribution.UnitResult) (float64, bool) {
		return -u.Forward.MeanDeltaP, true
	}},
	{"rev", "reverse ΔKLD (restoring it)", func(r *attribution.Result, u attribution.UnitResult) (float64, bool) {
		return r.Whole.MeanKLD - u.Reverse.MeanKLD, !r.ForwardOnly
	}},
	{"iso", "isotropic control's KLD", func(_ *attribution.Result, u attribution.UnitResult) (float64, bool) {
		if u.Iso == nil {
			return 0, false
		}
		return u.Iso.MeanKLD, true
	}},
	{"rel", "relative weight error", func(_ *attribution.Result, u attribution.UnitResult) (float64, bool) {
		if u.RelError == nil {
			return 0, false
		}
		return *u.RelError, true
	}},
}

// measuresOf lists the measures r has.
func measuresOf(r *attribution.Result) []measure {
	var out []measure
	for _, m := range measures {
		if len(r.Units) > 0 {
			if _, ok := m.Of(r, r.Units[0]); !ok {
				continue
			}
		}
		out = append(out, m)
	}
	return out
}

func measureOf(r *attribution.Result, id string) measure {
	ms := measuresOf(r)
	for _, m := range ms {
		if m.ID == id {
			return m
		}
	}
	return ms[0]
}

// grid places a sweep's units in rows of layers (the embedding first, the
// head last; one row for units of every layer, by kind) and columns of
// kinds in the order they first come.
type grid struct {
	Rows []int    // layers, -1 the embedding, len(r.Layers) the head
	Cols []string // kinds
	At   map[[2]int]int
}

func gridOf(r *attribution.Result) grid {
	g := grid{At: map[[2]int]int{}}
	col := map[string]int{}
	row := map[int]bool{}
	for _, u := range slices.SortedStableFunc(slices.Values(r.Units), func(a, b attribution.UnitResult) int { return cmp.Compare(a.Layer, b.Layer) }) {
		if _, ok := col[u.Kind]; !ok {
			col[u.Kind] = len(g.Cols)
			g.Cols = append(g.Cols, u.Kind)
		}
		row[u.Layer] = true
	}
	for l := range row {
		g.Rows = append(g.Rows, l)
	}
	slices.Sort(g.Rows)
	for i, u := range r.Units {
		g.At[[2]int{u.Layer, col[u.Kind]}] = i
	}
	return g
}

func layerLabel(r *attribution.Result, l int) string {
	switch {
	case r.Unit == attribution.ByKind:
		return "all layers"
	case l < 0:
		return "embed"
	case l >= r.NumLayers:
		return "head"
	}
	return "layer " + strconv.Itoa(l)
}

// heat is a cell's colour for v on a log scale between lo and hi (the
// measure's smallest and largest positive values): pale to deep red.
func heat(v, lo, hi float64) string {
	t := 0.0
	if v > 0 && hi > lo {
		t = (math.Log(v) - math.Log(lo)) / (math.Log(hi) - math.Log(lo))
	} else if v > 0 {
		t = 1
	}
	return fmt.Sprintf("background:hsl(8 75%% %.0f%%)", 96-56*t)
}

// sweepHTML is the whole view of a sweep or a recipe: markup built by
// Builders, and the charts' SVG (built by package chart's) between them.
func sweepHTML(d *sweepDoc, v sweepView) string {
	if d.Rec != nil {
		return recipeHTML(d.Rec)
	}
	r := d.Res
	var m markup.Builder
	m.Open("div", "class", "sweep-head")
	m.Elem("h2", "Sensitivity sweep")
	m.Elem("p", fmt.Sprintf("%s against %s: %d units by %s over %d windows (%d positions). %s", r.Test, r.Model, len(r.Units), r.Unit, r.Windows, r.Positions, r.Criterion.Text), "class", "about")
	m.Open("table", "class", "sweep-whole")
	m.Open("tbody")
	row := func(label, value string) {
		m.Open("tr")
		m.Elem("th", label)
		m.Elem("td", value)
		m.Close("tr")
	}
	row("whole test", fmt.Sprintf("mean KLD %.6f, 99%% %.6f, %d flips (%d clear)", r.Whole.MeanKLD, r.Whole.KLD99, r.Whole.Flips, r.Whole.Clear))
	if r.Floor != nil {
		row("noise floor", fmt.Sprintf("mean KLD %.2g (bf16-rounding noise on every reference matrix)", r.Floor.MeanKLD))
	}
	if r.ForwardOnly {
		row("additivity", fmt.Sprintf("forward %.3f; no reverse sweep", r.Additivity.Forward))
	} else {
		row("additivity", fmt.Sprintf("forward %.3f, reverse %.3f", r.Additivity.Forward, r.Additivity.Reverse))
	}
	if len(r.Layers) > 0 {
		row("divergence starts", layerLabel(r, r.Start))
	}
	m.Close("tbody")
	m.Close("table")
	m.Close("div")

	heatmapHTML(&m, r, v)
	if v.Unit >= 0 && v.Unit < len(r.Units) {
		unitHTML(&m, r, v.Unit)
	}
	callsHTML(&m, r, v.Call)
	if len(r.Layers) == 0 {
		return m.String() // swept on a device: no boundaries
	}
	m.Open("div", "class", "sweep-chart", "id", "divergence")
	m.Elem("h3", "Divergence by layer: the residual stream leaving each layer, test against reference")
	rel := make([]float64, len(r.Layers))
	for i, l := range r.Layers {
		rel[i] = l.MeanRel
	}
	return m.String() + chart.Bars(chart.Default, 0, rel, nil, r.Start, "layer", "mean relative error") + "</div>"
}

func heatmapHTML(m *markup.Builder, r *attribution.Result, v sweepView) {
	ms := measuresOf(r)
	cur := measureOf(r, v.Measure)
	m.Open("div", "class", "heatmap", "id", "heatmap")
	m.Open("h3")
	m.Text("Units: ")
	m.Open("select", "id", "sweep-measure", "aria-label", "measure")
	for _, x := range ms {
		if x.ID == cur.ID {
			m.Elem("option", x.Label, "value", x.ID, "selected", "selected")
		} else {
			m.Elem("option", x.Label, "value", x.ID)
		}
	}
	m.Close("select")
	m.Close("h3")
	lo, hi := math.Inf(1), 0.0
	for _, u := range r.Units {
		if x, _ := cur.Of(r, u); x > 0 {
			lo, hi = math.Min(lo, x), math.Max(hi, x)
		}
	}
	g := gridOf(r)
	m.Open("table", "class", "heat")
	m.Open("thead")
	m.Open("tr")
	m.Elem("th", "")
	for _, k := range g.Cols {
		m.Elem("th", k)
	}
	m.Close("tr")
	m.Close("thead")
	m.Open("tbody")
	for _, l := range g.Rows {
		m.Open("tr")
		m.Elem("th", layerLabel(r, l))
		for c := range g.Cols {
			i, ok := g.At[[2]int{l, c}]
			if !ok {
				m.Elem("td", "", "class", "none")
				continue
			}
			u := r.Units[i]
			x, _ := cur.Of(r, u)
			class := "cell"
			if i == v.Unit {
				class += " sel"
			}
			m.Elem("td", chart.Label(x), "class", class, "data-unit", strconv.Itoa(i), "style", heat(x, lo, hi),
				"title", u.Name+": "+cur.Label+" "+strconv.FormatFloat(x, 'g', 4, 64))
		}
		m.Close("tr")
	}
	m.Close("tbody")
	m.Close("table")
	m.Close("div")
}

// unitHTML is unit i's report: what it is, its sweeps, the clear calls it
// is a culprit of.
func unitHTML(m *markup.Builder, r *attribution.Result, i int) {
	u := r.Units[i]
	m.Open("div", "class", "unit-report", "id", "unit-report")
	m.Elem("h3", fmt.Sprintf("#%d %s", i+1, u.Name))
	m.Elem("p", fmt.Sprintf("%s, %s, %d weights in %s: %.2f bits per weight, %s; its first layer %s", u.Kind, strings.Join(u.Tensors, ", "), u.Params, u.Format, u.Bits(), attribution.Size(u.Bytes), layerLabel(r, u.Layer)), "class", "about")
	m.Open("table")
	m.Open("thead")
	m.Open("tr")
	for _, h := range []string{"run", "mean KLD", "99% KLD", "max KLD", "flips", "clear", "mean Δp"} {
		m.Elem("th", h)
	}
	m.Close("tr")
	m.Close("thead")
	m.Open("tbody")
	effect := func(label string, e attribution.Effect) {
		m.Open("tr")
		m.Elem("th", label)
		for _, s := range []string{fmt.Sprintf("%.6f", e.MeanKLD), fmt.Sprintf("%.6f", e.KLD99), fmt.Sprintf("%.6f", e.MaxKLD), strconv.Itoa(e.Flips), strconv.Itoa(e.Clear), fmt.Sprintf("%+.5f", e.MeanDeltaP)} {
			m.Elem("td", s)
		}
		m.Close("tr")
	}
	effect("forward: this unit alone quantized", u.Forward)
	if !r.ForwardOnly {
		effect("reverse: everything else quantized", u.Reverse)
	}
	if u.Iso != nil {
		effect("isotropic noise of its error's norm", *u.Iso)
	}
	m.Close("tbody")
	m.Close("table")
	if u.RelError != nil {
		m.Elem("p", fmt.Sprintf("‖W_test − W_ref‖ / ‖W_ref‖ = %.4f", *u.RelError))
	}
	var in []string
	for _, call := range r.Calls {
		for _, s := range call.Culprits {
			if s.Unit == u.Name {
				in = append(in, fmt.Sprintf("position %d (%.0f%%%s)", call.Index, 100*s.Share, map[bool]string{true: ", undoes it"}[s.Undoes]))
			}
		}
	}
	if len(in) > 0 {
		m.Elem("p", "Culprit of the clear calls at "+strings.Join(in, "; "))
	}
	m.Close("div")
}

// callsHTML lists the clear calls, each with its "what caused this?"
// button; call open shows its culprits.
func callsHTML(m *markup.Builder, r *attribution.Result, open int) {
	m.Open("div", "class", "calls", "id", "clear-calls")
	m.Elem("h3", fmt.Sprintf("Clear calls: %d", len(r.Calls)))
	if len(r.Calls) == 0 {
		m.Elem("p", "No flip against a clear preference of the reference.", "class", "about")
	}
	m.Open("ol")
	for c, call := range r.Calls {
		m.Open("li", "data-call-item", strconv.Itoa(c))
		m.Text(fmt.Sprintf("position %d (window %d, %d): the reference's #%d, the test's #%d; margin %.3f → %.3f ", call.Index, call.Window+1, call.Position, call.Ref, call.Test, call.Margin, call.Gap))
		if !r.ForwardOnly {
			m.Elem("button", "what caused this?", "type", "button", "class", "why", "data-call", strconv.Itoa(c))
		}
		if c == open {
			m.Open("table", "class", "culprits")
			m.Open("tbody")
			for _, s := range call.Culprits {
				m.Open("tr")
				m.Elem("th", s.Unit)
				w := math.Max(0, math.Min(1, s.Share))
				m.Open("td", "class", "share")
				m.Elem("span", "", "class", "share-bar", "style", fmt.Sprintf("width:%.0f%%", 100*w))
				m.Close("td")
				note := fmt.Sprintf("%.0f%% of the margin back", 100*s.Share)
				if s.Undoes {
					note += "; restoring it alone undoes the flip"
				}
				m.Elem("td", note)
				m.Close("tr")
			}
			m.Close("tbody")
			m.Close("table")
			m.Elem("p", fmt.Sprintf("Σ of every unit's share: %.0f%%", 100*call.Total), "class", "about")
		}
		m.Close("li")
	}
	m.Close("ol")
	m.Close("div")
}

// recipeHTML is a recipe's view: the frontier with the uniform schemes
// and the recipe on it, the measures, and how to make it.
func recipeHTML(r *attribution.Recipe) string {
	var m markup.Builder
	m.Open("div", "class", "sweep-head")
	m.Elem("h2", "Recipe")
	m.Elem("p", fmt.Sprintf("%s: %d units by %s within %s of matrices (%.3f bpw): %.3f bpw, predicted KLD %.6f.", r.Model, len(r.Picks), r.Unit, attribution.Size(r.Budget), 8*float64(r.Budget)/float64(r.Params), r.BPW, r.Predicted), "class", "about")
	m.Close("div")
	var line, marks []chart.Mark
	x1 := r.BPW
	for _, p := range r.Frontier {
		line = append(line, chart.Mark{X: p.BPW, Y: p.KLD})
	}
	for _, u := range r.Uniform {
		marks = append(marks, chart.Mark{X: u.BPW, Y: u.Effect.MeanKLD, Label: u.Name, Class: "uniform"})
		x1 = math.Max(x1, u.BPW)
	}
	if r.Measured != nil {
		marks = append(marks, chart.Mark{X: r.Measured.BPW, Y: r.Measured.Effect.MeanKLD, Label: "recipe", Class: "recipe"})
	}
	x0 := math.Floor(r.Frontier[0].BPW)
	m.Open("div", "class", "sweep-chart", "id", "frontier")
	m.Elem("h3", "Frontier: predicted mean KLD against bits per weight (line); the uniform schemes and the recipe as measured (dots)")
	svg := chart.Frontier(chart.Default, line, marks, x0, math.Ceil(x1+0.5), "bits per weight", "mean KLD")
	var text strings.Builder
	r.WriteText(&text)
	var t markup.Builder
	t.Close("div")
	t.Open("div", "class", "recipe-text")
	t.Elem("h3", "The recipe")
	t.Elem("pre", text.String())
	t.Close("div")
	return m.String() + svg + t.String()
}
