package main

import (
	"encoding/xml"
	"io"
	"strings"
	"testing"

	"logitscope/internal/analysis/attribution"
)

// demoSweep is a sweep of two layers' down_proj and q_proj and the
// embedding, with one clear call.
func demoSweep(t *testing.T) *sweepDoc {
	t.Helper()
	unit := func(name, kind string, layer int, kld float64) attribution.UnitResult {
		return attribution.UnitResult{Unit: attribution.Unit{Name: name, Kind: kind, Layer: layer, Tensors: []string{name}, Format: "q4", Params: 64, Bytes: 36},
			Forward: attribution.Effect{MeanKLD: kld, KLD99: 2 * kld}, Reverse: attribution.Effect{MeanKLD: 0.01}}
	}
	res := &attribution.Result{Kind: attribution.Kind, Version: attribution.Version, Model: "demo", Test: "q4", Unit: attribution.ByTensor, NumLayers: 2,
		Whole: attribution.Effect{MeanKLD: 0.02, Clear: 1},
		Units: []attribution.UnitResult{
			unit("model.layers.1.mlp.down_proj.weight", "mlp.down_proj", 1, 0.15),
			unit("model.embed_tokens.weight", "embed_tokens", -1, 0.013),
			unit("model.layers.0.mlp.down_proj.weight", "mlp.down_proj", 0, 0.001),
			unit("model.layers.0.self_attn.q_proj.weight", "self_attn.q_proj", 0, 0.0004),
		},
		Layers: []attribution.Divergence{{Layer: 0, MeanRel: 0.08}, {Layer: 1, MeanRel: 0.33}},
		Start:  1,
		Calls: []attribution.Call{{Window: 0, Position: 7, Index: 7, Ref: 12, Test: 40, Margin: 2.5, Gap: -0.4,
			Culprits: []attribution.Share{{Unit: "model.layers.1.mlp.down_proj.weight", Share: 0.98, Undoes: true}, {Unit: "model.embed_tokens.weight", Share: 0.05}}}},
	}
	data, err := res.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	d, err := parseSweep(data, "sweep.json")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// elements parses html (the page's markup is well-formed XML apart from
// the charts' namespace) and counts elements with an attribute.
func elements(t *testing.T, html, attr string) int {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader("<root>" + html + "</root>"))
	n := 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatalf("not well-formed: %v", err)
		}
		if se, ok := tok.(xml.StartElement); ok {
			for _, a := range se.Attr {
				if a.Name.Local == attr {
					n++
				}
			}
		}
	}
}

// The heatmap has a cell per unit, in rows of layers (the embedding
// first) and columns of kinds; a selected unit opens its report; the
// clear call's button opens its culprits; the divergence chart marks
// where it starts.
func TestSweepHTML(t *testing.T) {
	d := demoSweep(t)
	html := sweepHTML(d, sweepView{Unit: -1, Call: -1})
	if n := elements(t, html, "data-unit"); n != 4 {
		t.Errorf("%d heatmap cells, want 4", n)
	}
	if n := elements(t, html, "data-call"); n != 1 {
		t.Errorf("%d what-caused-this buttons, want 1", n)
	}
	for _, want := range []string{">embed<", ">layer 0<", ">layer 1<", ">mlp.down_proj<", ">self_attn.q_proj<", "forward mean KLD", "reverse ΔKLD", "divergence starts", "svg"} {
		if !strings.Contains(html, want) {
			t.Errorf("no %q", want)
		}
	}
	if strings.Contains(html, "unit-report") || strings.Contains(html, "share-bar") {
		t.Error("a report or culprits open with nothing chosen")
	}
	if i, j := strings.Index(html, ">embed<"), strings.Index(html, ">layer 0<"); i > j {
		t.Error("the embedding's row is not first")
	}
	html = sweepHTML(d, sweepView{Measure: "fwd99", Unit: 0, Call: 0})
	for _, want := range []string{`id="unit-report"`, "#1 model.layers.1.mlp.down_proj.weight", "Culprit of the clear calls at position 7 (98%, undoes it)",
		"share-bar", "restoring it alone undoes the flip", `value="fwd99" selected="selected"`, `class="cell sel"`} {
		if !strings.Contains(html, want) {
			t.Errorf("unit 1 and call 1 open: no %q", want)
		}
	}
	// The hottest cell is the darkest.
	if !strings.Contains(html, "hsl(8 75% 40%)") || !strings.Contains(html, "hsl(8 75% 96%)") {
		t.Error("the heatmap's colours do not span the scale")
	}
}

// A sweep's view goes into a link and comes back from it.
func TestSweepViewQuery(t *testing.T) {
	// setQuery and sweepQueryView are in sweepdom.go (js only); the
	// measure falls back to the first the sweep has.
	d := demoSweep(t)
	if m := measureOf(d.Res, "nonsense"); m.ID != "fwd" {
		t.Errorf("an unknown measure falls to %s", m.ID)
	}
	if ms := measuresOf(d.Res); len(ms) != 5 {
		t.Errorf("%d measures for a sweep without controls, want fwd, fwd99, clear, dp, rev", len(ms))
	}
}

func TestRecipeHTML(t *testing.T) {
	r := &attribution.Recipe{Kind: attribution.RecipeKind, Version: attribution.RecipeVersion, Model: "demo", Unit: attribution.ByTensor,
		Budget: 100, Params: 128, Bytes: 100, BPW: 6.25, Base: "q6", GGUFBase: "Q6_K", GGUFRules: []attribution.Rule{{Match: `^blk\.0\.ffn_down\.weight$`, Scheme: "q6_K"}},
		Frontier: []attribution.Point{{Bytes: 72, BPW: 4.5, KLD: 0.02}, {Bytes: 104, BPW: 6.5, KLD: 0.001}, {Bytes: 512, BPW: 32}},
		Picks:    []attribution.Pick{{Unit: "a", Params: 64, Option: attribution.Option{Scheme: "q6", Bytes: 52}}},
	}
	r.Measure([]attribution.Measured{{Name: "q6", Bytes: 104, Effect: attribution.Effect{MeanKLD: 0.001}}}, attribution.Effect{MeanKLD: 0.0009})
	data, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	d, err := parseSweep(data, "recipe.json")
	if err != nil {
		t.Fatal(err)
	}
	html := sweepHTML(d, sweepView{Unit: -1, Call: -1})
	for _, want := range []string{"Recipe", `id="frontier"`, "polyline", ">recipe<", ">q6<", "logitscope quantize", "llama-quantize", "the recipe against q6"} {
		if !strings.Contains(html, want) {
			t.Errorf("no %q", want)
		}
	}
}
