package sensitivity

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
)

func TestHull(t *testing.T) {
	o := func(s string, b int64, k float64) Option { return Option{Scheme: s, Bytes: b, KLD: k} }
	for _, c := range []struct {
		name string
		in   []Option
		want []string
	}{
		{"convex", []Option{o("q4", 45, 0.1), o("q6", 65, 0.01), o("q8", 85, 0.001), o("f32", 320, 0)}, []string{"q4", "q6", "q8", "f32"}},
		{"unsorted", []Option{o("f32", 320, 0), o("q8", 85, 0.001), o("q4", 45, 0.1), o("q6", 65, 0.01)}, []string{"q4", "q6", "q8", "f32"}},
		// q6 buys less per byte than q8 does after it: the step goes
		// straight to q8.
		{"not convex", []Option{o("q4", 45, 0.1), o("q6", 65, 0.09), o("q8", 85, 0.001), o("f32", 320, 0)}, []string{"q4", "q8", "f32"}},
		// A noisy measure that makes more bits worse is no step.
		{"dominated", []Option{o("q4", 45, 0.1), o("q6", 65, 0.2), o("q8", 85, 0.001), o("f32", 320, 0)}, []string{"q4", "q8", "f32"}},
		{"all equal", []Option{o("q4", 45, 0), o("q8", 85, 0), o("f32", 320, 0)}, []string{"q4"}},
	} {
		var got []string
		for _, x := range hull(c.in) {
			got = append(got, x.Scheme)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: hull %v, want %v", c.name, got, c.want)
		}
	}
}

// sweepsOf are forward sweeps in q8, q6 and q4 of units of 80 weights
// each, whose KLDs in each scheme kld gives.
func sweepsOf(kld map[quant.Scheme][]float64) []*Result {
	var sweeps []*Result
	for _, s := range quant.Schemes {
		bytes := map[quant.Scheme]int64{quant.Q4: 45, quant.Q6: 65, quant.Q8: 85}[s]
		r := &Result{Unit: ByTensor, Test: string(s)}
		for i, k := range kld[s] {
			name := fmt.Sprintf("model.layers.%d.mlp.down_proj.weight", i)
			r.Units = append(r.Units, UnitResult{Unit: Unit{Name: name, Tensors: []string{name}, Format: string(s), Params: 80, Bytes: bytes},
				Forward: Effect{MeanKLD: k}})
		}
		sweeps = append(sweeps, r)
	}
	return sweeps
}

// Units a (q4 KLD 0.1), b (0.01) and c (0.001), q6 and q8 dividing each
// KLD by 8 and 64: each budget buys the upgrades of most KLD per byte.
func TestPlan(t *testing.T) {
	sweeps := sweepsOf(map[quant.Scheme][]float64{
		quant.Q4: {0.1, 0.01, 0.001}, quant.Q6: {0.1 / 8, 0.01 / 8, 0.001 / 8}, quant.Q8: {0.1 / 64, 0.01 / 64, 0.001 / 64}})
	for _, c := range []struct {
		budget int64
		want   []string // layers 0, 1, 2
	}{
		{135, []string{"q4", "q4", "q4"}},
		{155, []string{"q6", "q4", "q4"}}, // the most sensitive first
		{175, []string{"q8", "q4", "q4"}}, // a's q6→q8 (0.0109/20 bytes) beats b's q4→q6 (0.00875/20)
		{195, []string{"q8", "q6", "q4"}},
		{215, []string{"q8", "q8", "q4"}}, // b's q6→q8 (0.00109) beats c's q4→q6 (0.000875)
		{225, []string{"q8", "q8", "q4"}}, // 10 bytes spare buy nothing
		{255, []string{"q8", "q8", "q8"}},
		{255 + 235, []string{"f32", "q8", "q8"}},
	} {
		r, err := Plan(sweeps, c.budget)
		if err != nil {
			t.Fatalf("budget %d: %v", c.budget, err)
		}
		var got []string
		for _, p := range r.Picks {
			got = append(got, p.Scheme)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("budget %d: %v, want %v", c.budget, got, c.want)
		}
		if r.Bytes > c.budget {
			t.Errorf("budget %d: the recipe takes %d", c.budget, r.Bytes)
		}
		var kld float64
		for _, p := range r.Picks {
			kld += p.KLD
		}
		if kld != r.Predicted {
			t.Errorf("budget %d: predicted %g, Σ picks %g", c.budget, r.Predicted, kld)
		}
		for i := 1; i < len(r.Frontier); i++ {
			a, b := r.Frontier[i-1], r.Frontier[i]
			if b.Bytes <= a.Bytes || b.KLD >= a.KLD {
				t.Fatalf("frontier %d→%d is no step: %+v → %+v", i-1, i, a, b)
			}
		}
		if f := r.Frontier[len(r.Frontier)-1]; f.KLD > 1e-15 || f.BPW != 32 {
			t.Errorf("the frontier ends at %+v, not everything in f32", f)
		}
	}
	if _, err := Plan(sweeps, 134); err == nil || !strings.Contains(err.Error(), "below the smallest recipe") {
		t.Errorf("a budget below all-q4: %v", err)
	}
	other := slices.Clone(sweeps)
	other[1] = &Result{Unit: ByTensor, Test: "q6", Units: sweeps[1].Units[1:]}
	if _, err := Plan(other, 1000); err == nil || !strings.Contains(err.Error(), "the same units") {
		t.Errorf("sweeps of other units: %v", err)
	}
}

// Where the greedy path blocks a unit whose one large step does not fit
// after the small ones before it, the knapsack leaves the small ones out
// for it: x's q4→q6 (0.06 for 20 bytes) comes first, y's q4→q8 (0.1 for
// 40) next and does not fit in 130 bytes, x's q6→q8 (0.03 for 20) does:
// 0.11. y in q8 and x in q4 is 0.1 in the same bytes.
func TestPlanIsNoGreedyFill(t *testing.T) {
	sweeps := sweepsOf(map[quant.Scheme][]float64{quant.Q4: {0.1, 0.1}, quant.Q6: {0.04, 0.099}, quant.Q8: {0.01, 0}})
	r, err := Plan(sweeps, 130)
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{r.Picks[0].Scheme, r.Picks[1].Scheme}; !slices.Equal(got, []string{"q4", "q8"}) || r.Predicted != 0.1 || r.Bytes != 130 {
		t.Errorf("picks %v, predicted %g in %d bytes; want q4, q8: 0.1 in 130", got, r.Predicted, r.Bytes)
	}
	// The frontier is the greedy path nonetheless: x's step, y's, x's.
	var klds []float64
	for _, f := range r.Frontier[:4] {
		klds = append(klds, math.Round(f.KLD*1000)/1000)
	}
	if !slices.Equal(klds, []float64{0.2, 0.14, 0.04, 0.01}) {
		t.Errorf("frontier %v", r.Frontier)
	}
}

func ExampleRules() {
	assign := map[string]string{
		"model.embed_tokens.weight":              "q8",
		"model.layers.0.mlp.down_proj.weight":    "q8",
		"model.layers.1.mlp.down_proj.weight":    "q4",
		"model.layers.3.mlp.down_proj.weight":    "q8",
		"model.layers.2.mlp.down_proj.weight":    "q4",
		"model.layers.2.self_attn.q_proj.weight": "f32",
	}
	for _, r := range Rules(assign, "q4") {
		fmt.Println(r)
	}
	// Output:
	// ^model\.layers\.2\.self_attn\.q_proj\.weight$=f32
	// ^model\.embed_tokens\.weight$=q8
	// ^model\.layers\.(0|3)\.mlp\.down_proj\.weight$=q8
}

// Each rule matches exactly the names it was made of, on a model's whole
// list of names.
func TestRulesMatchTheirNames(t *testing.T) {
	var names []string
	for l := range 12 {
		for _, k := range []string{"self_attn.q_proj", "mlp.down_proj", "mlp.experts.3.up_proj", "mlp.experts.13.up_proj"} {
			names = append(names, fmt.Sprintf("model.layers.%d.%s.weight", l, k))
		}
	}
	names = append(names, "model.embed_tokens.weight", "lm_head.weight")
	assign := map[string]string{}
	for i, n := range names {
		assign[n] = []string{"q4", "q6", "q8", "f32"}[(i*7)%4]
	}
	rules := Rules(assign, "q6")
	for _, n := range slices.Sorted(maps.Keys(assign)) {
		var by []string
		for _, r := range rules {
			if regexp.MustCompile(r.Match).MatchString(n) {
				by = append(by, r.Scheme)
			}
		}
		want := []string{assign[n]}
		if assign[n] == "q6" {
			want = nil
		}
		if !slices.Equal(by, want) {
			t.Errorf("%s (%s) is matched by rules of %v", n, assign[n], by)
		}
	}
}

// recipeOf sweeps dir's model in q8, q6 and q4 over windows, plans a
// recipe within q6's bytes, builds it and measures it there; it returns
// the recipe (its Uniform the schemes' measures) and its text.
func recipeOf(t *testing.T, dir string, windows [][]int) (*Recipe, string) {
	t.Helper()
	var sweeps []*Result
	var uniform []Measured
	for _, s := range quant.Schemes {
		x := mix(t, dir, s)
		units, err := Units(x.Changed(), x.Geometry().NumLayers, ByTensor)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Sweep(x, windows, units, Options{Unit: ByTensor, ForwardOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		res.Test = string(s)
		sweeps = append(sweeps, res)
		var bytes int64
		for _, u := range res.Units {
			bytes += u.Bytes
		}
		uniform = append(uniform, Measured{Name: string(s), Bytes: bytes, Effect: res.Whole})
	}
	r, err := Plan(sweeps, uniform[1].Bytes)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	out := variant.DefaultDir(dir, "recipe")
	base, _ := quant.ParseScheme(r.Base)
	if err := variant.Write(ck, base, out, variant.Options{Policy: r.Policy()}); err != nil {
		t.Fatal(err)
	}
	res, err := Sweep(mixOf(t, ck, out), windows, nil, Options{ForwardOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	r.Measure(uniform, res.Whole)
	var text strings.Builder
	if err := r.WriteText(&text, sweeps[1].Additivity.Forward); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + text.String())
	if r.Bytes > uniform[1].Bytes {
		t.Errorf("the recipe takes %d bytes, q6 %d", r.Bytes, uniform[1].Bytes)
	}
	return r, text.String()
}

// The done-criterion of a recipe, on the trained demo model: a recipe at
// q6's size, built as a variant and run, beats uniform q6.
func TestRecipeBeatsTheUniformScheme(t *testing.T) {
	dir := demoCopy(t)
	r, text := recipeOf(t, dir, panel(t, dir, 64))
	if q6 := r.Uniform[1].Effect.MeanKLD; r.Measured.Effect.MeanKLD >= q6 {
		t.Errorf("the recipe's mean KLD %.6g is no better than q6's %.6g at its size", r.Measured.Effect.MeanKLD, q6)
	}
	if !strings.Contains(text, "the recipe against q6 at 100.0% of its size") {
		t.Error("the text does not compare the recipe with q6")
	}
}

// Where one tensor needs the bits, the recipe spends them there: the
// rescaled down_proj's outliers make q8 round its other columns to
// nothing as q4 does, so it takes f32, paid for by q4 elsewhere, and the
// recipe at q6's size is far better than q6.
func TestRecipeSpendsOnTheCulprit(t *testing.T) {
	dir := rescaled(t)
	r, _ := recipeOf(t, dir, panel(t, dir, 48))
	if got := r.Assignment()[culprit]; got != F32 {
		t.Errorf("the recipe keeps %s in %s, want f32", culprit, got)
	}
	if q6 := r.Uniform[1].Effect.MeanKLD; r.Measured.Effect.MeanKLD > q6/4 {
		t.Errorf("the recipe's mean KLD %.6g is not a quarter of q6's %.6g", r.Measured.Effect.MeanKLD, q6)
	}
}
