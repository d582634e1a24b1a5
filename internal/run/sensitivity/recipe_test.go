package sensitivity

import (
	"strings"
	"testing"

	"logitscope/internal/analysis/attribution"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
)

// recipeOf sweeps dir's model in q8, q6 and q4 over windows, plans a
// recipe within q6's bytes, builds it and measures it there; it returns
// the recipe (its Uniform the schemes' measures) and its text.
func recipeOf(t *testing.T, dir string, windows [][]int) (*attribution.Recipe, string) {
	t.Helper()
	var sweeps []*attribution.Result
	var uniform []attribution.Measured
	for _, s := range quant.Schemes {
		x := mix(t, dir, s)
		units, err := Units(x.Changed(), x.Geometry().NumLayers, attribution.ByTensor)
		if err != nil {
			t.Fatal(err)
		}
		res, err := Sweep(x, windows, units, Options{Unit: attribution.ByTensor, ForwardOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		res.Test = string(s)
		sweeps = append(sweeps, res)
		var bytes int64
		for _, u := range res.Units {
			bytes += u.Bytes
		}
		uniform = append(uniform, attribution.Measured{Name: string(s), Bytes: bytes, Effect: res.Whole})
	}
	r, err := attribution.Plan(sweeps, uniform[1].Bytes)
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
	if err := variant.Write(ck, base, out, variant.Options{Policy: Policy(r)}); err != nil {
		t.Fatal(err)
	}
	res, err := Sweep(mixOf(t, ck, out), windows, nil, Options{ForwardOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	r.Measure(uniform, res.Whole)
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
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
	if got := r.Assignment()[culprit]; got != attribution.F32 {
		t.Errorf("the recipe keeps %s in %s, want f32", culprit, got)
	}
	if q6 := r.Uniform[1].Effect.MeanKLD; r.Measured.Effect.MeanKLD > q6/4 {
		t.Errorf("the recipe's mean KLD %.6g is not a quarter of q6's %.6g", r.Measured.Effect.MeanKLD, q6)
	}
}

// A recipe's f32 is a variant's: the rules Policy writes name it.
func TestF32IsTheVariants(t *testing.T) {
	if attribution.F32 != variant.SchemeF32 {
		t.Errorf("attribution.F32 %q, variant.SchemeF32 %q", attribution.F32, variant.SchemeF32)
	}
}
