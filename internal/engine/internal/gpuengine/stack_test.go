package gpuengine

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native/nativetest"
	"logitscope/shaders"
)

// pieceSource serves matrices as given pieces and vectors as given.
type pieceSource struct {
	pieces  map[string][]Piece
	vectors map[string][]float32
}

func (s pieceSource) Matrix(name string, _ int64) ([]Piece, error) {
	if ps, ok := s.pieces[name]; ok {
		return ps, nil
	}
	return nil, fmt.Errorf("no tensor %s", name)
}

func (s pieceSource) Vector(name string) ([]float32, error) {
	if v, ok := s.vectors[name]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("no tensor %s", name)
}

// hardware is a device that says it is not a software adapter, so that the
// engine takes the real GPU's matmul entry points (main, main8) on
// lavapipe.
type hardware struct{ gpu.Device }

func (h hardware) Info() gpu.Info {
	info := h.Device.Info()
	info.Software = false
	return info
}

// productState is a State with what a product's ops need for steps of up
// to maxT tokens: X in h, the ids, no bias (NaN, never read) and the
// spare output.
func productState(t *testing.T, dev gpu.Device, x []float32, maxT int) *State {
	e := &State{dev: dev, pipes: map[string]gpu.Pipeline{}, maxPiece: 1 << 30}
	t.Cleanup(e.Close)
	e.none, e.spare = buf(t, dev, []float32{float32(math.NaN())}), buf(t, dev, []float32{0})
	e.ids, e.h = buf(t, dev, make([]uint32, maxT)), buf(t, dev, x)
	return e
}

// A stacked product (q, k and v, or gate and up, in one dispatch) gives
// each matrix's Y bit for bit what that matrix's own product gives, and
// writes nothing else of it: through the engine's own upload (stack) and
// ops (stackOps), against the same matrices uploaded and multiplied one by
// one, on a real GPU's entry points (main, main8) and a software
// adapter's (rows4, rows4x8; two formats), for one token and for several
// (the eight-token kernels from manyFrom on). Three matrices (48, 16 and
// 16 rows) with biases, the GGUF formats' first two interleaved in heads
// of 8 rows as Llama's q and k are; and two (40 rows each) without.
func TestStackedMatmul(t *testing.T) {
	base := nativetest.Device(t)
	formats := []shaders.Format{shaders.F32, shaders.BF16, shaders.Q4, shaders.Q8_0, shaders.Q4_K}
	for _, dev := range []gpu.Device{base, hardware{base}} {
		for _, f := range formats {
			// lavapipe compiles rows4 and rows4x8 slowly (10–20 s a kernel
			// with a cold shader cache, as in CI): there, one format of
			// each stacking (quant's two regions; GGUF blocks, interleaved).
			if dev.Info().Software && f != shaders.Q4 && f != shaders.Q8_0 {
				continue
			}
			for _, rows := range [][]int{{48, 16, 16}, {40, 40}} {
				name := fmt.Sprintf("software=%v/%s/%d", dev.Info().Software, f, len(rows))
				t.Run(name, func(t *testing.T) { testStacked(t, dev, f, rows) })
			}
		}
	}
}

func testStacked(t *testing.T, dev gpu.Device, f shaders.Format, rows []int) {
	const maxT, sentinel = 17, -7
	ty, isGGML := f.GGML()
	cols := 96
	if isGGML {
		cols = ggmlCols(ty)
	}
	r := rnd(f + 40)
	src := pieceSource{pieces: map[string][]Piece{}, vectors: map[string][]float32{}}
	var names, biases []string
	var ys []out
	var blanks [][]float32
	for i, n := range rows {
		name := fmt.Sprintf("w%d", i)
		data := randomWeights(t, f, n, cols, uint64(40+i))
		file, off := ggmlFile(t, data)
		p := Piece{Rows: n, Cols: cols, Format: f, File: file, Offset: off, Length: int64(len(data))}
		if isGGML && len(rows) == 3 && i < 2 {
			p.Interleaved = 8
		}
		src.pieces[name] = []Piece{p}
		names = append(names, name)
		if len(rows) == 3 {
			src.vectors[name+".bias"] = r.fill(n, 0.1)
			biases = append(biases, name+".bias")
		}
		// Y (maxT, n+3) from element 5+i: room to see a stray write.
		ld, off0 := n+3, 5+i
		ys = append(ys, out{off: func(s step) int { return off0 + s.pos0*ld }, ld: ld})
		blanks = append(blanks, slices.Repeat([]float32{sentinel}, off0+maxT*ld))
	}
	x := r.fill(maxT*cols, 1)

	// build makes the product of W (stacked or not) on a State of its own;
	// run takes a step of T tokens and returns each matrix's Y.
	build := func(stacked bool) (*State, []out) {
		e := productState(t, dev, x, maxT)
		up := uploader{e: e, src: src}
		var ms []matrix
		var bs []gpu.Buffer
		if stacked {
			ms, bs = up.stack(names, biases)
			if len(ms) != 1 || len(ms[0].splits) != len(rows)-1 {
				t.Fatalf("%s matrices of %v rows were not stacked", f, rows)
			}
		} else {
			for i, name := range names {
				ms, bs = append(ms, up.matrix(name)), append(bs, e.none)
				if biases != nil {
					bs[i] = up.vector(biases[i])
				}
			}
		}
		if up.err != nil {
			t.Fatal(up.err)
		}
		outs := slices.Clone(ys)
		for i := range outs {
			outs[i].buf = buf(t, dev, blanks[i])
		}
		if err := e.finish(e.stackOps(names, ms, bs, outs, func(s step) int { return s.T }, false)); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 1, false: len(rows)}[stacked]; len(e.prog) != want {
			t.Fatalf("stacked %v: %d dispatches, want %d", stacked, len(e.prog), want)
		}
		return e, outs
	}
	run := func(e *State, outs []out, T int) [][]float32 {
		for i, o := range outs {
			if err := dev.WriteBuffer(o.buf, 0, bytesOf(blanks[i])); err != nil {
				t.Fatal(err)
			}
		}
		runStep(t, e, step{T: T})
		var got [][]float32
		for i, o := range outs {
			got = append(got, read(t, dev, o.buf, len(blanks[i])))
		}
		return got
	}
	eAlone, outsAlone := build(false)
	eStacked, outsStacked := build(true)
	for _, T := range []int{1, 3, manyFrom, maxT} {
		alone, stacked := run(eAlone, outsAlone, T), run(eStacked, outsStacked, T)
		for i := range rows {
			written := 0
			for j, v := range alone[i] {
				if math.Float32bits(stacked[i][j]) != math.Float32bits(v) {
					t.Fatalf("T %d, matrix %d: element %d is %g stacked, %g alone", T, i, j, stacked[i][j], v)
				}
				if v != sentinel {
					written++
				}
			}
			if written != T*rows[i] {
				t.Fatalf("T %d, matrix %d: %d elements written, want %d", T, i, written, T*rows[i])
			}
		}
	}
}

// A block's last product added onto the residual stream (out.add: Y +=
// X Wᵀ + b) gives Y's old value plus the product as it would be stored,
// one float32 addition, bit for bit: what the add kernel made of the two
// before. On a software adapter's entry points and a real GPU's, for one
// token and for the eight-token kernels.
func TestMatmulAddsOntoY(t *testing.T) {
	base := nativetest.Device(t)
	const rows, cols, maxT = 40, 96, manyFrom + 3
	for _, dev := range []gpu.Device{base, hardware{base}} {
		for _, f := range []shaders.Format{shaders.F32, shaders.Q4, shaders.Q4_K} {
			t.Run(fmt.Sprintf("software=%v/%s", dev.Info().Software, f), func(t *testing.T) {
				ty, isGGML := f.GGML()
				n := cols
				if isGGML {
					n = ggmlCols(ty)
				}
				r := rnd(f + 60)
				data := randomWeights(t, f, rows, n, 60)
				file, off := ggmlFile(t, data)
				src := pieceSource{pieces: map[string][]Piece{"w": {{Rows: rows, Cols: n, Format: f, File: file, Offset: off, Length: int64(len(data))}}},
					vectors: map[string][]float32{"b": r.fill(rows, 0.1)}}
				e := productState(t, dev, r.fill(maxT*n, 1), maxT)
				up := uploader{e: e, src: src}
				w, b := up.matrix("w"), up.vector("b")
				if up.err != nil {
					t.Fatal(up.err)
				}
				y0 := r.fill(maxT*rows, 3)
				set, add := buf(t, dev, make([]float32, maxT*rows)), buf(t, dev, y0)
				zero := func(step) int { return 0 }
				T := func(s step) int { return s.T }
				prog := e.productOps("set", w, e.h, zero, []out{{set, zero, rows, false}}, b, T, false)
				prog = append(prog, e.productOps("add", w, e.h, zero, []out{{add, zero, rows, true}}, b, T, false)...)
				if err := e.finish(prog); err != nil {
					t.Fatal(err)
				}
				for _, steps := range []int{1, maxT} {
					if err := dev.WriteBuffer(add, 0, bytesOf(y0)); err != nil {
						t.Fatal(err)
					}
					runStep(t, e, step{T: steps})
					v, got := read(t, dev, set, maxT*rows), read(t, dev, add, maxT*rows)
					for i := range got {
						want := y0[i]
						if i < steps*rows {
							want += v[i]
						}
						if math.Float32bits(got[i]) != math.Float32bits(want) {
							t.Fatalf("T %d: element %d is %g, want %g + %g = %g", steps, i, got[i], y0[i], v[i], want)
						}
					}
				}
			})
		}
	}
}
