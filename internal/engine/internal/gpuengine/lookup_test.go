package gpuengine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/engine/internal/acts"
	"logitscope/internal/format/lookup/lookuptest"
	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native/nativetest"
	"logitscope/internal/model"
)

// The embedding kernel gathers rows of a lookup matrix as lookup.Row
// decodes them, bit for bit, for 4 and 8 bits, groups of 32, 64 and 128
// columns, one group a row, scattered groups (GIdx) and offsets, the
// matrix split into pieces of 3 rows (each blob its own header).
func TestLookupEmbedExact(t *testing.T) {
	dev := nativetest.Device(t)
	const rows, cols = 10, 256
	rng := rand.New(rand.NewPCG(7, 8))
	for _, s := range lookupShapes {
		t.Run(fmt.Sprintf("%+v", s), func(t *testing.T) {
			m := lookuptest.Random(rng, rows, cols, s)
			pieces, err := LookupPieces("w", m, "", LookupBlobBytes(m, 3))
			if err != nil {
				t.Fatal(err)
			}
			ids, got := gatherRows(t, dev, pieces, cols)
			want := m.Dequantize()
			for i, id := range ids {
				for k := range cols {
					if g, w := got[i*cols+k], want[int(id)*cols+k]; math.Float32bits(g) != math.Float32bits(w) {
						t.Fatalf("row %d col %d: %g, lookup.Row %g", id, k, g, w)
					}
				}
			}
		})
	}
}

// lookupShapes are the forms the GPU tests run.
var lookupShapes = []lookuptest.Shape{
	{Bits: 4, GroupSize: 32}, {Bits: 4, GroupSize: 64, Offset: true}, {Bits: 4, GroupSize: 128, Offset: true},
	{Bits: 4, GroupSize: -1}, {Bits: 4, GroupSize: 16, Offset: true}, {Bits: 4, GroupSize: 32, GIdx: true, Offset: true},
	{Bits: 8, GroupSize: 32}, {Bits: 8, GroupSize: 128, GIdx: true}, {Bits: 8, GroupSize: -1, Offset: true},
}

// Y = X @ Wᵀ + b for lookup matrices, through the engine's matmulOps (a
// piece of 20 rows each, offsets into X and Y, a Y wider than W), against
// float64 over lookup.Row's weights and X rounded by package acts (the
// CPU's activations), error measured in ε·Σ|w·x| as TestGGMLMatmul
// measures it; 1 and 5 tokens (main or rows4, main8 or rows4x8); every
// activation quantization.
func TestLookupMatmul(t *testing.T) {
	dev := nativetest.Device(t)
	const rows, cols, ldy, xOff, yOff = 48, 256, 52, 5, 7
	rng := rand.New(rand.NewPCG(9, 10))
	type tc struct {
		s    lookuptest.Shape
		mode string
	}
	var cases []tc
	for _, s := range lookupShapes {
		cases = append(cases, tc{s, ""})
	}
	for _, mode := range []string{acts.Int8, acts.FP8, acts.FP4} {
		cases = append(cases, tc{lookuptest.Shape{Bits: 4, GroupSize: 32, Offset: true}, mode})
	}
	for _, c := range cases {
		m := lookuptest.Random(rng, rows, cols, c.s)
		deq := m.Dequantize()
		for _, T := range []int{1, 5} {
			t.Run(fmt.Sprintf("%+v/%s/T%d", c.s, c.mode, T), func(t *testing.T) {
				r := rnd(T*7 + len(cases))
				x := append(make([]float32, xOff), r.fill(T*cols, 1)...)
				bias := r.fill(rows, 0.1)
				pieces, err := LookupPieces("w", m, c.mode, LookupBlobBytes(m, 20))
				if err != nil {
					t.Fatal(err)
				}
				e := &State{dev: dev, pipes: map[string]gpu.Pipeline{}, g: model.Geometry{Dim: cols}, chunk: T}
				t.Cleanup(e.Close)
				if c.mode != "" {
					if err := e.actsScratch(); err != nil {
						t.Fatal(err)
					}
				}
				w := matrix{pieces: pieces, bufs: uploadPieces(t, dev, pieces)}
				e.none = buf(t, dev, []float32{float32(math.NaN())})
				e.ids = buf(t, dev, make([]uint32, T))
				y := buf(t, dev, make([]float32, yOff+T*ldy))
				at := func(off int) func(step) int { return func(step) int { return off } }
				ops := e.matmulOps("w", w, buf(t, dev, x), at(xOff), y, at(yOff), ldy, buf(t, dev, bias), func(s step) int { return s.T })
				if err := e.finish(ops); err != nil {
					t.Fatal(err)
				}
				runStep(t, e, step{T: T})
				got := read(t, dev, y, yOff+T*ldy)
				xr := slices.Clone(x[xOff:])
				acts.Rows(c.mode, xr, T, cols)
				worst := 0.0
				var want []float64
				var gotVals []float32
				for tk := range T {
					for n := range rows {
						v, mag := float64(bias[n]), math.Abs(float64(bias[n]))
						for k := range cols {
							p := float64(deq[n*cols+k]) * float64(xr[tk*cols+k])
							v += p
							mag += math.Abs(p)
						}
						g := got[yOff+tk*ldy+n]
						if d := math.Abs(float64(g) - v); d > 0 {
							worst = max(worst, d/(mag*0x1p-24))
						}
						want, gotVals = append(want, v), append(gotVals, g)
					}
				}
				nmse, _ := errors(gotVals, want)
				t.Logf("NMSE %.2e, worst %.1f ε·Σ|w·x|", nmse, worst)
				if nmse > 1e-12 || worst > 16 {
					t.Fatalf("NMSE %g, worst %.1f ε·Σ|w·x|", nmse, worst)
				}
			})
		}
	}
}

// acts.wgsl rounds activations as package acts does, bit for bit: rows of
// normal values at several scales, with outliers, ties and zeros, rows
// whose length is not a multiple of 16, an all-zero row.
func TestActsKernel(t *testing.T) {
	dev := nativetest.Device(t)
	rng := rand.New(rand.NewPCG(11, 12))
	const T, cols = 6, 200
	x := make([]float32, 3+T*cols)
	for tk := range T - 1 {
		scale := math.Pow(10, float64(tk-3))
		for k := range cols {
			v := float32(rng.NormFloat64() * scale)
			switch k % 23 {
			case 0:
				v *= 40 // outliers
			case 1:
				v = 0
			case 2:
				v = float32(scale) * 2.5 // ties for some scales
			}
			x[3+tk*cols+k] = v
		}
	}
	for _, mode := range []string{acts.Int8, acts.FP8, acts.FP4} {
		t.Run(mode, func(t *testing.T) {
			e := &State{dev: dev, pipes: map[string]gpu.Pipeline{}, g: model.Geometry{Dim: cols}, chunk: T}
			t.Cleanup(e.Close)
			if err := e.actsScratch(); err != nil {
				t.Fatal(err)
			}
			e.ids = buf(t, dev, make([]uint32, T))
			op := e.actsOp("x", mode, buf(t, dev, x), func(step) int { return 3 }, cols, func(s step) int { return s.T })
			if err := e.finish([]pending{op}); err != nil {
				t.Fatal(err)
			}
			runStep(t, e, step{T: T})
			got := read(t, dev, e.actsX, T*cols)
			want := slices.Clone(x[3:])
			acts.Rows(mode, want, T, cols)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("token %d element %d (%g): %g, package acts %g", i/cols, i%cols, x[3+i], got[i], want[i])
				}
			}
		})
	}
}

// LookupPieces splits on rows under the limit and refuses a matrix the
// kernels cannot read, naming it.
func TestLookupPieces(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	m := lookuptest.Random(rng, 100, 64, lookuptest.Shape{Bits: 4, GroupSize: 32, Offset: true})
	ps, err := LookupPieces("w", m, "", LookupBlobBytes(m, 30)+3)
	if err != nil {
		t.Fatal(err)
	}
	var rows []int
	for _, p := range ps {
		if err := p.check(); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, p.Rows)
	}
	if !slices.Equal(rows, []int{30, 30, 30, 10}) {
		t.Errorf("pieces of %v rows, want 30, 30, 30, 10", rows)
	}
	odd := lookuptest.Random(rng, 4, 40, lookuptest.Shape{Bits: 4, GroupSize: 8})
	for _, c := range []struct {
		name, mode string
		max        int64
	}{
		{"cols", "", 1 << 20},
		{"limit", "", LookupBlobBytes(m, 1) - 4},
		{"acts", "int4", 1 << 20},
	} {
		mm := m
		if c.name == "cols" {
			mm = odd
		}
		if _, err := LookupPieces("model.layers.0.mlp.up_proj.weight", mm, c.mode, c.max); err == nil {
			t.Errorf("%s: accepted", c.name)
		} else if !strings.Contains(err.Error(), "up_proj") {
			t.Errorf("%s: %v does not name the matrix", c.name, err)
		}
	}
}
