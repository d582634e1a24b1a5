package cpu

import (
	"math/rand/v2"
	"slices"
	"testing"

	"logitscope/internal/format/ggml"
	"logitscope/internal/model"
	"logitscope/internal/quant"
)

// A stack refuses what it cannot read as one matrix, and its product is
// each part's product, bit for bit, unstacked.
func TestStack(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 22))
	q4 := model.Format{Scheme: quant.Q4}
	a, _ := stored(t, rng, q4, 9, 64)
	b, _ := stored(t, rng, q4, 5, 64)
	c, _ := stored(t, rng, q4, 3, 32)
	f32 := &model.Matrix{Rows: 2, Cols: 64, Data: randomValues(rng, 128, 0)}
	bf16 := benchMatrix(t, rng, model.Format{Type: ggml.BF16}, 2, 64)
	ba, bb := randomValues(rng, 9, 0), randomValues(rng, 5, 0)
	for _, refused := range []struct {
		name string
		ws   []*model.Matrix
		bs   [][]float32
	}{
		{"float32 rows", []*model.Matrix{a, f32}, [][]float32{nil, nil}},
		{"other columns", []*model.Matrix{a, c}, [][]float32{nil, nil}},
		{"one bias of two", []*model.Matrix{a, b}, [][]float32{ba, nil}},
		{"8-bit activations for one part only", []*model.Matrix{a, bf16}, [][]float32{nil, nil}},
	} {
		if _, _, ok := stack(refused.ws, refused.bs); ok {
			t.Errorf("%s: stacked", refused.name)
		}
	}
	W, bias, ok := stack([]*model.Matrix{a, b}, [][]float32{ba, bb})
	if !ok || W.Rows != 14 || !slices.Equal(bias, append(slices.Clone(ba), bb...)) {
		t.Fatalf("stack: %d rows, bias %v, ok %v", W.Rows, bias, ok)
	}
	if err := W.CheckPieces("stack"); err != nil {
		t.Fatal(err)
	}
	for _, T := range []int{1, 3, 5} {
		x := randomValues(rng, T*64, 0)
		y := make([]float32, T*14)
		matmul(y, x, W, bias, T)
		ya, yb := make([]float32, T*9), make([]float32, T*5)
		unstack(y, T, ya, yb)
		wa, wb := make([]float32, T*9), make([]float32, T*5)
		matmul(wa, x, a, ba, T)
		matmul(wb, x, b, bb, T)
		sameBits(t, "first part", ya, wa)
		sameBits(t, "second part", yb, wb)
	}
}
