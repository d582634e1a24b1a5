package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"logitscope/internal/format/exl3"
	"logitscope/internal/format/exl3/exl3test"
	"logitscope/internal/model"
)

// exl3Matrix is a random EXL3 layer of format f for a (rows, cols)
// matrix (exl3test.Random), and the engine's W of it.
func exl3Matrix(t testing.TB, rng *rand.Rand, rows, cols int, f exl3.Format) (*model.Matrix, exl3.Layer) {
	t.Helper()
	l := exl3test.Random(rng, cols, rows, f)
	W := &model.Matrix{Rows: rows, Cols: cols, Pieces: []model.Piece{{Rows: rows, Format: model.Format{EXL3: f}, Data: l.Blob()}}}
	if err := W.CheckPieces("w"); err != nil {
		t.Fatal(err)
	}
	return W, l
}

// The product with an EXL3 layer is x @ the layer's exact W, to float32
// rounding, for padded and whole dims, one token or many, with a bias;
// one token gets the same bits alone as in a batch; Decode is the exact
// W.
func TestMatmulEXL3(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		rows, cols int
		f          exl3.Format
	}{
		{128, 256, exl3.Format{K: 4, Codebook: exl3.MCG}},
		{100, 200, exl3.Format{K: 6, Codebook: exl3.MCG}},
		{300, 64, exl3.Format{K: 2, Codebook: exl3.MUL1}},
		{128, 128, exl3.Format{K: 8, Codebook: exl3.Inst3}},
	} {
		W, l := exl3Matrix(t, rng, c.rows, c.cols, c.f)
		exact, err := l.Exact()
		if err != nil {
			t.Fatal(err)
		}
		dense := Decode(W)
		for r := range c.rows {
			for k := range c.cols {
				if d := float64(dense[r*c.cols+k]) - exact[k*l.Out+r]; math.Abs(d) > 1e-6*math.Abs(exact[k*l.Out+r])+1e-9 {
					t.Fatalf("%v %d×%d: Decode[%d][%d] = %g, exact %g", c.f, c.rows, c.cols, r, k, dense[r*c.cols+k], exact[k*l.Out+r])
				}
			}
		}
		b := make([]float32, c.rows)
		for i := range b {
			b[i] = float32(rng.NormFloat64())
		}
		for _, T := range []int{1, 5, 17} {
			x := make([]float32, T*c.cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			out := make([]float32, T*c.rows)
			matmul(out, x, W, b, T)
			var worst, scale float64
			for tk := range T {
				for r := range c.rows {
					want := float64(b[r])
					var mag float64
					for k := range c.cols {
						want += float64(x[tk*c.cols+k]) * exact[k*l.Out+r]
						mag += math.Abs(float64(x[tk*c.cols+k]) * exact[k*l.Out+r])
					}
					worst = max(worst, math.Abs(float64(out[tk*c.rows+r])-want))
					scale = max(scale, mag)
				}
			}
			if worst > 1e-5*scale {
				t.Errorf("%v %d×%d, %d tokens: off the exact product by %.3g (Σ|terms| up to %.3g)", c.f, c.rows, c.cols, T, worst, scale)
			}
			one := make([]float32, c.rows)
			last := T - 1
			matmul(one, x[last*c.cols:], W, b, 1)
			for r := range one {
				if math.Float32bits(one[r]) != math.Float32bits(out[last*c.rows+r]) {
					t.Fatalf("%v: token %d alone gives row %d = %g, in a batch of %d %g", c.f, last, r, one[r], T, out[last*c.rows+r])
				}
			}
		}
	}
}
