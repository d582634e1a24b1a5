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
		// Integer grids (table[q] = q − 128, q − 8): what GPTQ, MLX and
		// int8 store, which a decoder may compute rather than look up.
		{48, 256, lookuptest.Shape{Bits: 8, GroupSize: 64, Offset: true, Grid: true}, ""},
		{33, 384, lookuptest.Shape{Bits: 8, GroupSize: -1, Grid: true}, acts.Int8},
		{48, 256, lookuptest.Shape{Bits: 4, GroupSize: 32, Offset: true, Grid: true}, ""},
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

func TestAffineTable(t *testing.T) {
	grid := func(n int, base float32) []float32 {
		t := make([]float32, n)
		for q := range t {
			t[q] = base + float32(q)
		}
		return t
	}
	for _, c := range []struct {
		name   string
		table  []float32
		base   int32
		affine bool
	}{
		{"int8", grid(256, -128), -128, true},
		{"uint4", grid(16, 0), 0, true},
		{"int4", grid(16, -8), -8, true},
		{"half steps", grid(16, -7.5), 0, false},
		{"nf4-like", []float32{-1, -0.7, -0.5, -0.4, -0.3, -0.2, -0.1, 0, 0.08, 0.16, 0.25, 0.34, 0.44, 0.56, 0.72, 1}, 0, false},
		{"one off", append(grid(15, 0), 99), 0, false},
		{"empty", nil, 0, false},
	} {
		if base, affine := affineTable(c.table); base != c.base || affine != c.affine {
			t.Errorf("%s: affineTable = %d, %v; want %d, %v", c.name, base, affine, c.base, c.affine)
		}
	}
}

// BenchmarkMatmulLookup is BenchmarkMatmul for 4-bit lookup matrices in
// GPTQ's group of 128 and MLX's of 64 with offsets, and 8-bit ones (a
// random table in groups of 128, FP8's kind; int8's grid per row, W8A8's),
// beside quant's q4 (the q4 variant's kernel) on the same shapes.
func BenchmarkMatmulLookup(b *testing.B) {
	benchMatmul(b, []model.Format{{Scheme: "q4"},
		{Lookup: &lookup.Matrix{Bits: 4, GroupSize: 128}},
		{Lookup: &lookup.Matrix{Bits: 4, GroupSize: 64, Offset: []float32{}}},
		{Lookup: &lookup.Matrix{Bits: 8, GroupSize: 128}},
		{Lookup: &lookup.Matrix{Bits: 8, GroupSize: -1, Table: []float32{}}}}, matmul)
}

// benchLookup is a random lookup matrix in the bits and groups of f's
// template (an Offset not nil asks for offsets, a Table not nil for an
// integer grid).
func benchLookup(rng *rand.Rand, f model.Format, rows, cols int) *model.Matrix {
	l := f.Lookup
	m := lookuptest.Random(rng, rows, cols, lookuptest.Shape{Bits: l.Bits, GroupSize: l.GroupSize, Offset: l.Offset != nil, Grid: l.Table != nil})
	return &model.Matrix{Rows: rows, Cols: cols, Pieces: []model.Piece{{Rows: rows, Format: model.Format{Lookup: m}}}}
}
