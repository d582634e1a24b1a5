package sensitivity

import (
	"strings"
	"testing"

	"logitscope/internal/analysis/attribution"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
)

// recipeOf makes a recipe of dir's model at q6's size (6.5 bits per
// weight) from sweeps of q8, q6 and q4 over windows, measured there, and
// returns it and its text.
func recipeOf(t *testing.T, dir string, windows [][]int) (*attribution.Recipe, string) {
	t.Helper()
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	r, err := Recipe(ck, windows, RecipeOptions{Schemes: quant.Schemes, Unit: attribution.ByTensor, TargetBPW: 6.5, Dir: variant.DefaultDir(dir, "recipe")})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + text.String())
	if r.Uniform[1].Name != "q6" || r.Bytes > r.Uniform[1].Bytes {
		t.Errorf("the recipe takes %d bytes, %s %d", r.Bytes, r.Uniform[1].Name, r.Uniform[1].Bytes)
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
