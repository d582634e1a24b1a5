package cpu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"logitscope/internal/engine/internal/acts"
	"logitscope/internal/format/lookup"
	"logitscope/internal/format/lookup/lookuptest"
	"logitscope/internal/model"
)

// lookupW is the engine's W of lookup matrix m, with activations acts.
func lookupW(t testing.TB, m *lookup.Matrix, acts string) *model.Matrix {
	t.Helper()
	W := &model.Matrix{Rows: m.Rows, Cols: m.Cols, Pieces: []model.Piece{{Rows: m.Rows, Format: model.Format{Lookup: m, Acts: acts}}}}
	if err := W.CheckPieces("w"); err != nil {
		t.Fatal(err)
	}
	return W
}

// The product with a lookup matrix decodes each weight as lookup.Row does,
// bit for bit, and is then the float32 product with those weights, bit
// for bit, for every part of the form, one token or many; with an
// activation quantization it is the float product of the rounded
// activations (acts.Rows).
func TestMatmulLookup(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		rows, cols int
		s          lookuptest.Shape
		acts       string
	}{
		{48, 256, lookuptest.Shape{Bits: 4, GroupSize: 32}, ""},
		{48, 256, lookuptest.Shape{Bits: 4, GroupSize: 64, Offset: true}, ""},
		{33, 384, lookuptest.Shape{Bits: 4, GroupSize: 128, Offset: true}, ""},
		{33, 384, lookuptest.Shape{Bits: 4, GroupSize: -1}, ""},
		{40, 200, lookuptest.Shape{Bits: 4, GroupSize: 32, Offset: true}, ""}, // a short last group
		{21, 97, lookuptest.Shape{Bits: 4, GroupSize: 17, Offset: true}, ""},  // groups starting mid-byte
		{48, 256, lookuptest.Shape{Bits: 4, GroupSize: 32, GIdx: true, Offset: true}, ""},
		{48, 256, lookuptest.Shape{Bits: 4, GroupSize: 128, GIdx: true}, ""},
		{48, 256, lookuptest.Shape{Bits: 8, GroupSize: 32}, ""},
		{48, 256, lookuptest.Shape{Bits: 8, GroupSize: 64, Offset: true}, ""},
		{33, 384, lookuptest.Shape{Bits: 8, GroupSize: 128, GIdx: true, Offset: true}, ""},
		{33, 384, lookuptest.Shape{Bits: 8, GroupSize: -1, Offset: true}, ""},
		{48, 256, lookuptest.Shape{Bits: 8, GroupSize: -1}, acts.Int8},
		{48, 256, lookuptest.Shape{Bits: 8, GroupSize: -1}, acts.FP8},
		{48, 256, lookuptest.Shape{Bits: 4, GroupSize: 16}, acts.FP4},
	} {
		name := fmt.Sprintf("%dx%d/%+v/%s", c.rows, c.cols, c.s, c.acts)
		m := lookuptest.Random(rng, c.rows, c.cols, c.s)
		W := lookupW(t, m, c.acts)
		want := m.Dequantize()
		if got := Decode(W); !slices.Equal(got, want) {
			t.Fatalf("%s: Decode differs from lookup.Matrix.Row", name)
		}
		row0 := make([]float32, c.cols)
		row(W, c.rows-1, row0)
		if !slices.Equal(row0, want[(c.rows-1)*c.cols:]) {
			t.Fatalf("%s: the embedding's row differs from lookup.Matrix.Row", name)
		}
		dense := &model.Matrix{Rows: c.rows, Cols: c.cols, Data: want}
		b := randomValues(rng, c.rows, 0)
		for _, T := range []int{1, 3, 8} {
			x := randomValues(rng, T*c.cols, 0)
			got, ref := make([]float32, T*c.rows), make([]float32, T*c.rows)
			matmul(got, x, W, b, T)
			xr := slices.Clone(x)
			acts.Rows(c.acts, xr, T, c.cols)
			matmul(ref, xr, dense, b, T)
			if !slices.Equal(got, ref) {
				t.Errorf("%s, %d tokens: the product differs from the float product with the decoded weights", name, T)
			}
			if c.acts != "" && slices.Equal(xr, x) {
				t.Errorf("%s: rounding left the activations as they were", name)
			}
		}
	}
}

// BenchmarkMatmulLookup is BenchmarkMatmul for 4-bit lookup matrices in
// GPTQ's group of 128 and MLX's of 64 with offsets, beside quant's q4 (the
// q4 variant's kernel) on the same shapes.
func BenchmarkMatmulLookup(b *testing.B) {
	benchMatmul(b, []model.Format{{Scheme: "q4"},
		{Lookup: &lookup.Matrix{Bits: 4, GroupSize: 128}},
		{Lookup: &lookup.Matrix{Bits: 4, GroupSize: 64, Offset: []float32{}}},
		{Lookup: &lookup.Matrix{Bits: 8, GroupSize: 128}}}, matmul)
}

// benchLookup is a random lookup matrix in the bits and groups of f's
// template (an Offset not nil asks for offsets).
func benchLookup(rng *rand.Rand, f model.Format, rows, cols int) *model.Matrix {
	l := f.Lookup
	m := lookuptest.Random(rng, rows, cols, lookuptest.Shape{Bits: l.Bits, GroupSize: l.GroupSize, Offset: l.Offset != nil})
	return &model.Matrix{Rows: rows, Cols: cols, Pieces: []model.Piece{{Rows: rows, Format: model.Format{Lookup: m}}}}
}
