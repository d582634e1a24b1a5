package attribution

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/quant"
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
