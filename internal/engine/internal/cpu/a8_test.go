package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/x448/float16"

	"logitscope/internal/format/ggml"
	"logitscope/internal/model"
	"logitscope/internal/model/synth"
	"logitscope/internal/quant"
)

// a8Formats are the formats that take 8-bit activations, at whole blocks.
func a8Formats() []formatCase {
	var out []formatCase
	for _, cols := range []int{32, 96, 1120} {
		for _, s := range quant.Schemes {
			out = append(out, formatCase{model.Format{Scheme: s}, cols})
		}
		for _, typ := range []ggml.Type{ggml.Q4_0, ggml.Q8_0} {
			out = append(out, formatCase{model.Format{Type: typ}, cols})
		}
	}
	return out
}

// naiveA8 is one output of the order in a8.go written from its text, on
// the reference-decoded values w (the codes are w / s exactly) and the
// block scales s.
func naiveA8(w, s, x []float32) float32 {
	var lanes [16]float32
	for b := range len(w) / 32 {
		xb, wb := x[32*b:32*b+32], w[32*b:32*b+32]
		amax := 0.0
		for _, v := range xb {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		var dx float32
		var sum int64
		if math.IsInf(amax, 0) || math.IsNaN(amax) {
			dx = float32(math.NaN())
		} else if id := 127 / float32(amax); amax > 0 && !math.IsInf(float64(id), 1) {
			dx = float16.Fromfloat32(float32(amax) / 127).Float32()
			for j, v := range xb {
				q := math.RoundToEven(float64(v * id))
				sum += int64(q) * int64(wb[j]/s[b])
			}
		}
		lanes[b%16] += float32(float32(sum) * float32(s[b]*dx))
	}
	for h := 8; h >= 1; h /= 2 {
		for i := range h {
			lanes[i] += lanes[i+h]
		}
	}
	return lanes[0]
}

// blockScales are the scales of W's blocks (rows, cols/32) as the
// reference formats store them.
func blockScales(t *testing.T, W *model.Matrix) []float32 {
	var out []float32
	for _, p := range W.Pieces {
		if p.Format.Scheme != "" {
			l, _ := quant.NewLayout(p.Format.Scheme, p.Rows, W.Cols)
			for r := range p.Rows {
				if err := l.Codes(p.Data, r, func(_ int, scale uint16, _ *[quant.GroupSize]int8) {
					out = append(out, half([]byte{byte(scale), byte(scale >> 8)}))
				}); err != nil {
					t.Fatal(err)
				}
			}
			continue
		}
		bb := p.Format.Type.BlockBytes()
		for i := 0; i < len(p.Data); i += bb {
			out = append(out, half(p.Data[i:]))
		}
	}
	return out
}

// With 8-bit activations every format computes the order of a8.go on
// both kernel paths, for one token and several, with a bias, across
// pieces; and the result is within the rounding of the activations of
// the float64 product: |x_j − q_j·dx| ≤ dx/2 per column.
func TestMatmulA8(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, fc := range a8Formats() {
		for _, rows := range []int{1, 6, 67} {
			W, ref := stored(t, rng, fc.f, rows, fc.cols)
			scales := blockScales(t, W)
			nb := fc.cols / 32
			for _, T := range []int{1, 5} {
				for trial := range 3 {
					x := randomValues(rng, T*fc.cols, trial)
					b := randomValues(rng, rows, 0)
					name := fmt.Sprintf("%v/%dx%d/T=%d/trial %d", fc.f, rows, fc.cols, T, trial)
					want := make([]float32, T*rows)
					for tk := range T {
						xt := x[tk*fc.cols : (tk+1)*fc.cols]
						for r := range rows {
							want[tk*rows+r] = naiveA8(ref[r*fc.cols:(r+1)*fc.cols], scales[r*nb:(r+1)*nb], xt) + b[r]
						}
					}
					for _, path := range kernelPaths() {
						onPath(path, func() {
							got := make([]float32, T*rows)
							matmulA8(got, x, W, b, T)
							sameBits(t, name+"/"+path, got, want)
						})
					}
					if trial != 0 {
						continue
					}
					for tk := range T {
						xt := x[tk*fc.cols : (tk+1)*fc.cols]
						for r := range rows {
							var exact, bound float64
							for j, v := range xt {
								w := float64(ref[r*fc.cols+j])
								exact += w * float64(v)
								amax := 0.0
								for _, u := range xt[j/32*32 : j/32*32+32] {
									amax = math.Max(amax, math.Abs(float64(u)))
								}
								bound += math.Abs(w) * (amax/127/2 + 1e-6*math.Abs(float64(v)))
							}
							got := float64(want[tk*rows+r] - b[r])
							if d := math.Abs(got - exact); d > bound*1.001+1e-6 {
								t.Fatalf("%s: [%d,%d] = %g, float64 %g: off by %g, bound %g", name, tk, r, got, exact, d, bound)
							}
						}
					}
				}
			}
		}
	}
}

// With 8-bit activations a stored model's KV-cache decode equals its
// teacher forcing on both kernel paths, and its logits stay near those
// of float32 activations (the rounding of a8's activations is small
// beside a logit's spread).
func TestForwardA8(t *testing.T) {
	for _, s := range []quant.Scheme{quant.Q8, quant.Q4} {
		p := synth.Tiny()[0]
		t.Run(p.Name+"/"+string(s), func(t *testing.T) {
			stored, _ := quantized(t, load(t, p), s)
			ids := sequence(20, stored.Vocab)
			run := func(acts8, decode bool) [][]float32 {
				st, err := New(stored, len(ids))
				if err != nil {
					t.Fatal(err)
				}
				if acts8 {
					st.Acts8()
				}
				split := len(ids)
				if decode {
					split = 7
				}
				rows, err := st.Forward(ids[:split], true)
				if err != nil {
					t.Fatal(err)
				}
				for _, id := range ids[split:] {
					r, err := st.Forward([]int{id}, false)
					if err != nil {
						t.Fatal(err)
					}
					rows = append(rows, r...)
				}
				return rows
			}
			want, float := run(true, false), run(false, false)
			for _, path := range kernelPaths() {
				onPath(path, func() {
					got := run(true, true)
					for i := range want {
						sameBits(t, "a8 KV-cache decode ("+path+")", got[i], want[i])
					}
				})
			}
			var worst, spread float64
			for i := range want {
				lo, hi := math.Inf(1), math.Inf(-1)
				for j, v := range float[i] {
					worst = math.Max(worst, math.Abs(float64(want[i][j]-v)))
					lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
				}
				spread = math.Max(spread, hi-lo)
			}
			if worst == 0 || worst > 0.05*spread {
				t.Fatalf("a8 logits differ from float32 activations' by up to %g (logit spread %g): want a small nonzero change", worst, spread)
			}
			t.Logf("a8 vs float32 activations: max |Δlogit| %.3g, logit spread %.3g", worst, spread)
		})
	}
}

// The a8 kernels give rowsA8Go's bits for every block count from 1 to
// 40 (whole chunks of 16 blocks and a partial last one), for quads of
// rows, the leftovers with the last quad, and ranges of fewer than four
// rows, at either end of a piece, on weight blocks that
// are zero or at the codes' extremes and activation blocks that are
// zero, negative zero, at ±127, tiny or infinite.
func TestRowsA8MatchGo(t *testing.T) {
	if !asmKernels() || packA8 == nil {
		t.Skip("no a8 assembly on this CPU")
	}
	rng := rand.New(rand.NewPCG(9, 10))
	const rows = 19 // four whole quads and three rows left
	var formats []model.Format
	for _, s := range quant.Schemes {
		formats = append(formats, model.Format{Scheme: s})
	}
	formats = append(formats, model.Format{Type: ggml.Q4_0}, model.Format{Type: ggml.Q8_0})
	for _, f := range formats {
		for nb := 1; nb <= 40; nb++ {
			k := nb * a8Block
			p := &model.Piece{Rows: rows, Format: f, Data: a8Weights(t, rng, f, rows, k)}
			for trial := range 3 {
				acts := newA8Acts(a8TestActs(rng, nb, trial))
				sums, ws := make([]int32, nb), make([]float32, nb)
				for _, span := range [][2]int{{0, rows}, {1, rows}, {rows - 4, rows}, {rows - 3, rows}, {rows - 1, rows}, {3, 8}, {0, 4}, {2, 4}} {
					a, z := span[0], span[1]
					got, want := make([]float32, z-a), make([]float32, z-a)
					rowsA8(p, k, a, z, acts, got, sums, ws)
					rowsA8Go(p, k, a, z, acts, want, sums, ws)
					sameBits(t, fmt.Sprintf("%v/%d blocks/trial %d/rows %d..%d", f, nb, trial, a, z), got, want)
				}
			}
		}
	}
}

// a8TestActs are nb blocks of activations that are zero, negative zero,
// at ±127, tiny, random or, at trials 2, 6, 10…, infinite, by block
// and trial.
func a8TestActs(rng *rand.Rand, nb, trial int) []float32 {
	x := make([]float32, nb*a8Block)
	for b := range nb {
		xb := x[b*a8Block : (b+1)*a8Block]
		for j := range xb {
			switch (b + trial) % 6 {
			case 0:
				xb[j] = float32(math.Copysign(0, -1))
			case 1:
				xb[j] = 3 // q = 127 throughout
			case 2:
				xb[j] = float32(rng.NormFloat64())
			case 3:
				xb[j] = -float32(rng.Float64()) * 1e-30
			case 4:
				xb[j] = float32(rng.NormFloat64())
				if trial%4 == 2 && j == 5 {
					xb[j] = float32(math.Inf(-1))
				}
			}
		}
	}
	return x
}

// The prefill kernels (a8Batch) give rowsA8Go's bits for each of T = 1..17
// tokens (one batch up to a8Tokens, then two), every block count from 1
// to 40 (whole chunks of 16 blocks and a partial last one), ranges of
// rows of odd and even lengths at either end of a piece, on the weight
// blocks of TestRowsA8MatchGo; each token's blocks take another of its
// activation patterns (tokens 1, 6 and 13 an infinite one).
func TestA8BatchMatchGo(t *testing.T) {
	if !asmKernels() || packA8 == nil {
		t.Skip("no a8 assembly on this CPU")
	}
	rng := rand.New(rand.NewPCG(17, 18))
	const rows = 11
	for _, f := range []model.Format{{Scheme: quant.Q4}, {Scheme: quant.Q8}, {Type: ggml.Q4_0}, {Type: ggml.Q8_0}} {
		if newA8Batch(f, []*a8Acts{newA8Acts(make([]float32, a8Block))}) == nil {
			continue // ggml's need AVX512_VBMI
		}
		for nb := 1; nb <= 40; nb++ {
			k := nb * a8Block
			p := &model.Piece{Rows: rows, Format: f, Data: a8Weights(t, rng, f, rows, k)}
			var acts []*a8Acts
			for T := 1; T <= a8Tokens+1; T++ {
				acts = append(acts, newA8Acts(a8TestActs(rng, nb, T%3+T)))
				for _, span := range [][2]int{{0, rows}, {1, rows}, {rows - 1, rows}, {3, 8}, {2, 4}} {
					sameA8Batches(t, fmt.Sprintf("%v/%d blocks/T=%d/rows %d..%d", f, nb, T, span[0], span[1]), p, k, span[0], span[1], acts)
				}
			}
		}
	}
}

// sameA8Batches checks that the batches of acts (a8Batches, or one batch
// of a token) give rowsA8Go's bits for rows [a, z) of p.
func sameA8Batches(t *testing.T, name string, p *model.Piece, k, a, z int, acts []*a8Acts) {
	t.Helper()
	W := &model.Matrix{Rows: p.Rows, Cols: k, Pieces: []model.Piece{*p}}
	batches := a8Batches(W, len(acts), k/a8Block, nil)
	if batches != nil {
		for tk, x := range acts {
			batches.put(tk, x)
		}
	}
	if len(acts) == 1 {
		batches = a8Split{newA8Batch(p.Format, acts)}
	}
	if batches == nil || batches[0] == nil {
		t.Fatalf("%s: no prefill kernel", name)
	}
	nb := k / a8Block
	want := make([]float32, z-a)
	t0 := 0
	// One worker's scratch for every batch, NaNs from the start: the
	// kernels must not read lanes they have not written.
	sc := &scratch{}
	l := sc.a8Lanes()
	for i := range l {
		l[i] = float32(math.NaN())
	}
	for _, b := range batches {
		// Token tk's outputs at got[tk·ldo:], ldo past the rows: the
		// gaps keep their NaNs.
		n, ldo := b.tokens(), z-a+3
		got := make([]float32, n*ldo)
		for i := range got {
			got[i] = float32(math.NaN())
		}
		b.rows(p, k, a, z, got, ldo, sc)
		for tk := range n {
			rowsA8Go(p, k, a, z, acts[t0+tk], want, make([]int32, nb), make([]float32, nb))
			sameBits(t, fmt.Sprintf("%s/token %d", name, t0+tk), got[tk*ldo:tk*ldo+z-a], want)
			for i, v := range got[tk*ldo+z-a : min(len(got), (tk+1)*ldo)] {
				if v == v {
					t.Fatalf("%s/token %d: wrote %g past its rows, at %d", name, t0+tk, v, z-a+i)
				}
			}
		}
		t0 += n
	}
	if t0 != len(acts) {
		t.Fatalf("%s: batches of %d tokens, want %d", name, t0, len(acts))
	}
}

// a8Weights are rows of format f (k columns) whose every seventh block
// is zero (with a scale of −0 for ggml's blocks) and every seventh from
// the fifth on at the codes' extremes.
func a8Weights(t testing.TB, rng *rand.Rand, f model.Format, rows, k int) []byte {
	if f.Scheme == "" {
		data := randomBlocks(t, rng, f.Type, rows, k, make([]float32, rows*k))
		bb := f.Type.BlockBytes()
		for b := range rows * k / a8Block {
			blk := data[b*bb : (b+1)*bb]
			switch b % 7 {
			case 3:
				blk[0], blk[1] = 0, 0x80
				for j := range blk[2:] {
					blk[2+j] = 0
				}
			case 5:
				for j := range blk[2:] {
					blk[2+j] = byte(0x80 + 0x7f*(j%2)) // −128 and 127, or nibbles 0 and 15
				}
			}
		}
		return data
	}
	w := make([]float32, rows*k)
	for i := range w {
		switch blk := i / a8Block; blk % 7 {
		case 3: // zero
		case 5: // the codes' extremes
			w[i] = float32(1 - 2*rng.IntN(2))
		default:
			w[i] = float32(rng.NormFloat64())
		}
	}
	data, err := quant.Quantize(f.Scheme, w, rows, k)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// The rounding of the activations in use gives quantizeActsGo's bits on
// blocks that are zero, negative zero, subnormal, so small that 127/amax
// overflows or just not, infinite or NaN, hold
// ties (amax 127: x·127/amax is x, and 2.5 rounds to 2, 3.5 to 4) or
// random values.
func TestQuantizeActsMatchGo(t *testing.T) {
	if !asmKernels() {
		t.Skip("no assembly kernels on this CPU")
	}
	rng := rand.New(rand.NewPCG(15, 16))
	blocks := [][]float32{{0}, {float32(math.Copysign(0, -1))}, {1e-42, -3e-43}, {3.7e-37, -1e-37}, {3.8e-37, 1e-38}, {float32(math.Inf(1)), 1}, {float32(math.NaN())}, {127, 2.5, 3.5, -2.5, -3.5, 0.5, -0.5, 126.5}, {-1e38, 3e38}}
	for range 20 {
		b := make([]float32, a8Block)
		for j := range b {
			b[j] = float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20)-10)))
		}
		blocks = append(blocks, b)
	}
	x := make([]float32, len(blocks)*a8Block)
	for i, b := range blocks {
		copy(x[i*a8Block:], b)
	}
	q, dx := make([]int8, len(x)), make([]float32, len(blocks))
	wq, wdx := make([]int8, len(x)), make([]float32, len(blocks))
	quantizeActs(x, q, dx)
	quantizeActsGo(x, wq, wdx)
	sameBits(t, "dx", dx, wdx)
	for i := range q {
		if q[i] != wq[i] {
			t.Fatalf("block %d: q[%d] = %d, want %d (x %g)", i/a8Block, i%a8Block, q[i], wq[i], x[i])
		}
	}
}
