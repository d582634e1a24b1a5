package gpuengine

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"testing"

	"logitscope/internal/engine/internal/cpu"
	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native/nativetest"
	"logitscope/internal/model"
	"logitscope/internal/model/synth"
	"logitscope/internal/quant"
	"logitscope/shaders"
)

// elementwise.wgsl's quantize (quantize.wgsl) rounds X to 8-bit blocks
// bit for bit as the CPU engine does (cpu.RoundActs): the codes in both
// of xq's orders, dx and Σq, for random blocks and the edges: a block of
// zeros, amax just above and just below the bound where 127/amax
// overflows, ties of x·127/amax (ties to even), dx exactly halfway
// between two f16s, dx among f16's subnormals (halfway between two, and
// not) and past its largest float, an infinite and a NaN element.
func TestQuantizeKernel(t *testing.T) {
	dev := nativetest.Device(t)
	const cols = 64
	tie := float32(127 * (1 + 1.0/2048)) // amax/127 halfway between 1 and the f16 after it
	blocks := [][]float32{
		make([]float32, 32),
		spread(3.7321948e-37), spread(3.7321944e-37),
		{127, 2.5, 3.5, -2.5, -0.5, 0.5, 1.5, 126.5},
		{tie, tie / 3, -tie / 7},
		spread(127 * 50.5 / (1 << 24)), spread(127 * 50.75 / (1 << 24)), spread(127 * 65520), spread(127 * 65519),
		{1, float32(math.Inf(-1)), 2},
		{1, float32(math.NaN()), 2},
	}
	r := rnd(80)
	for range 6 {
		blocks = append(blocks, r.fill(32, 3))
	}
	var x []float32
	for _, b := range blocks {
		x = append(x, append(slices.Clone(b), make([]float32, 32-len(b))...)...)
	}
	T := len(x) / cols
	const xOff = 3
	words, scales := quantizeOnGPU(t, dev, append(make([]float32, xOff), x...), xOff, cols)
	for tk := range T {
		q, dx := cpu.RoundActs(x[tk*cols : (tk+1)*cols])
		row := words[tk*cols/2 : (tk+1)*cols/2]
		for c := range cols {
			// Column order, then per 8 columns the even ones' codes and
			// the odd ones'.
			nib := cols/4 + c/8*2 + c%2
			got := [2]int8{byteOf(row[c/4], c%4), byteOf(row[nib], c%8/2)}
			if got[0] != q[c] || got[1] != q[c] {
				t.Errorf("token %d column %d (x %g): codes %v, want %d", tk, c, x[tk*cols+c], got, q[c])
			}
		}
		for b := range dx {
			gotDX, sum := scales[(tk*cols/32+b)*2], scales[(tk*cols/32+b)*2+1]
			var want int
			for _, v := range q[b*32 : (b+1)*32] {
				want += int(v)
			}
			same := math.Float32bits(gotDX) == math.Float32bits(dx[b]) || gotDX != gotDX && dx[b] != dx[b]
			if !same || sum != float32(want) {
				t.Errorf("token %d block %d: dx %g (%#x), Σq %g; want %g (%#x), %d", tk, b, gotDX, math.Float32bits(gotDX), sum, dx[b], math.Float32bits(dx[b]), want)
			}
		}
	}
}

// quantizeOnGPU runs elementwise.wgsl's quantize on the (T, cols) rows
// of x from element off, and returns xq and xd (as float32 bits).
func quantizeOnGPU(t *testing.T, dev gpu.Device, x []float32, off, cols int) (xq, xd []float32) {
	T := (len(x) - off) / cols
	q, d := buf(t, dev, make([]uint32, T*cols/2)), buf(t, dev, make([]float32, T*cols/16))
	dispatch(t, dev, shaders.Elementwise(), "quantize", []gpu.Buffer{buf(t, dev, x), 0, buf(t, dev, params(T*cols, 0, cols, off)), 0, q, d},
		ceilDiv(T*cols/32, shaders.Workgroup), 1, 1)
	return read(t, dev, q, T*cols/2), read(t, dev, d, T*cols/16)
}

// sameBits is whether a and b hold the same float32 bits.
func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// spread is a block whose amax is a: a, then smaller values of both signs.
func spread(a float32) []float32 {
	return []float32{a, -a / 3, a / 5, -a * 0.75}
}

// byteOf is the int8 in byte i of word w (a float32 buffer's bits).
func byteOf(w float32, i int) int8 {
	var b [4]byte
	binary.LittleEndian.PutUint32(b[:], math.Float32bits(w))
	return int8(b[i])
}

// A product with 8-bit activations (matmul_a8.wgsl behind
// elementwise.wgsl's quantize, as productOps lays them out) gives the CPU
// engine's product with 8-bit activations (cpu.MatmulA8), and each
// token's row is the same bits whether the token comes alone (KV-cache
// decode) or among others (a8rows4x8 from manyFrom tokens: teacher
// forcing). Every format with integer codes through a software adapter's
// entry points (a8rows4 for one token), and two (q6's split codes, Q4_0's
// unaligned blocks) through a real GPU's (a8main: its 16 lanes across
// invocations), there in workgroups of the smallest size for one token
// and the largest for eight: the size must not change a bit. 70 rows (a
// last quad of rows short), 37 blocks of 32 (the 16 lanes hold two or
// three each), a bias. (Stacked q/k/v and gate/up with 8-bit activations
// run in TestA8NormsRound and engine's TestActivationsQ8OnGPU.)
func TestA8Matmul(t *testing.T) {
	base := nativetest.Device(t)
	const rows, cols, maxT = 70, 37 * 32, 11
	for _, dev := range []gpu.Device{base, hardware{base}} {
		for _, f := range []shaders.Format{shaders.Q8, shaders.Q6, shaders.Q4, shaders.Q8_0, shaders.Q4_0} {
			if !dev.Info().Software && f != shaders.Q6 && f != shaders.Q4_0 {
				continue
			}
			t.Run(fmt.Sprintf("%s/software=%t", f, dev.Info().Software), func(t *testing.T) {
				r := rnd(f + 90)
				data := randomWeights(t, f, rows, cols, 90)
				file, off := ggmlFile(t, data)
				bias := r.fill(rows, 0.1)
				src := pieceSource{pieces: map[string][]Piece{"w": {{Rows: rows, Cols: cols, Format: f, File: file, Offset: off, Length: int64(len(data))}}},
					vectors: map[string][]float32{"b": bias}}
				x := r.fill(maxT*cols, 1)
				x[5] = 40 // an outlier, as trained models' activations have
				e := a8State(t, dev, x, maxT, cols)
				if !dev.Info().Software {
					e.wg = sizes{workgroupSizes[0], workgroupSizes[len(workgroupSizes)-1]}
				}
				up := uploader{e: e, src: src}
				w, b := up.matrix("w"), up.vector("b")
				if up.err != nil {
					t.Fatal(up.err)
				}
				y := buf(t, dev, make([]float32, maxT*rows))
				xOff := func(s step) int { return s.pos0 * cols }
				if err := e.finish(e.productOps("w", w, e.h, xOff, []out{{y, func(step) int { return 0 }, rows, false}}, b, func(s step) int { return s.T }, false)); err != nil {
					t.Fatal(err)
				}
				if len(e.prog) != 2 || e.prog[0].family != "quantize" {
					t.Fatalf("%d ops, want quantize and the product", len(e.prog))
				}

				want := make([]float32, maxT*rows)
				cpu.MatmulA8(want, x, cpuMatrix(f, rows, cols, data), bias, maxT)
				runStep(t, e, step{T: maxT})
				all := read(t, dev, y, maxT*rows)
				for tk := range maxT {
					runStep(t, e, step{T: 1, pos0: tk})
					alone := read(t, dev, y, rows)
					for n := range rows {
						i := tk*rows + n
						if math.Float32bits(all[i]) != math.Float32bits(alone[n]) {
							t.Fatalf("token %d row %d: %g among %d tokens, %g alone", tk, n, all[i], maxT, alone[n])
						}
						if math.Float32bits(all[i]) != math.Float32bits(want[i]) {
							t.Errorf("token %d row %d: %g, the CPU %g", tk, n, all[i], want[i])
						}
					}
				}
			})
		}
	}
}

// a8State is productState with 8-bit activations for products of up to
// cols columns.
func a8State(t *testing.T, dev gpu.Device, x []float32, maxT, cols int) *State {
	e := productState(t, dev, x, maxT)
	e.acts8 = true
	e.xq, e.xd = buf(t, dev, make([]uint32, maxT*cols/2)), buf(t, dev, make([]float32, maxT*cols/16))
	return e
}

// cpuMatrix is W (rows, cols) stored in format f as the CPU engine holds it.
func cpuMatrix(f shaders.Format, rows, cols int, data []byte) *model.Matrix {
	mf := model.Format{Scheme: quant.Scheme(f.String())}
	if ty, ok := f.GGML(); ok {
		mf = model.Format{Type: ty}
	}
	return &model.Matrix{Rows: rows, Cols: cols, Pieces: []model.Piece{{Rows: rows, Format: mf, Data: data}}}
}

// The ops that round their output for the a8 products that follow
// (rmsnorm.wgsl's main_q8, elementwise.wgsl's silu_mul_q8 and
// gelu_tanh_mul_q8) write the same bits as the ops they stand in for, and
// round them as quantize rounds them.
func TestRoundingOps(t *testing.T) {
	dev := nativetest.Device(t)
	const T, d = 3, 96
	r := rnd(95)
	x, w, up := r.fill(T*d, 2), r.fill(d, 1), r.fill(T*d, 3)
	x[7] = 30
	newQ := func() (gpu.Buffer, gpu.Buffer) {
		return buf(t, dev, make([]uint32, T*d/2)), buf(t, dev, make([]float32, T*d/16))
	}
	for _, c := range []struct{ entry, rounding string }{{"main", "main_q8"}, {"silu_mul", "silu_mul_q8"}, {"gelu_tanh_mul", "gelu_tanh_mul_q8"}} {
		t.Run(c.rounding, func(t *testing.T) {
			xq, xd := newQ()
			var plain, rounded []float32
			if c.entry == "main" {
				p := buf(t, dev, params(d, float32(1e-6), 0, 0, 0))
				a, b := buf(t, dev, make([]float32, T*d)), buf(t, dev, make([]float32, T*d))
				dispatch(t, dev, shaders.RMSNorm(), c.entry, []gpu.Buffer{buf(t, dev, x), buf(t, dev, w), a, p}, T, 1, 1)
				dispatch(t, dev, shaders.RMSNorm(), c.rounding, []gpu.Buffer{buf(t, dev, x), buf(t, dev, w), b, p, xq, xd}, T, 1, 1)
				plain, rounded = read(t, dev, a, T*d), read(t, dev, b, T*d)
			} else {
				a, b := buf(t, dev, x), buf(t, dev, x)
				p := buf(t, dev, params(T*d, 0, d, 0))
				dispatch(t, dev, shaders.Elementwise(), c.entry, []gpu.Buffer{a, buf(t, dev, up), p}, ceilDiv(T*d, shaders.Workgroup), 1, 1)
				dispatch(t, dev, shaders.Elementwise(), c.rounding, []gpu.Buffer{b, buf(t, dev, up), p, 0, xq, xd}, ceilDiv(T*d/32, shaders.Workgroup), 1, 1)
				plain, rounded = read(t, dev, a, T*d), read(t, dev, b, T*d)
			}
			if !sameBits(plain, rounded) {
				t.Fatalf("%s writes other values than %s", c.rounding, c.entry)
			}
			wantQ, wantD := quantizeOnGPU(t, dev, plain, 0, d)
			gotQ, gotD := read(t, dev, xq, T*d/2), read(t, dev, xd, T*d/16)
			if !sameBits(gotQ, wantQ) || !sameBits(gotD, wantD) {
				t.Fatalf("%s rounds its values otherwise than quantize", c.rounding)
			}
		})
	}
}

// Where the norms round their own output for the products that follow
// (a real GPU: normRounds), a model with 8-bit activations computes the
// same bits as where a quantize dispatch does it after them (a software
// adapter), in fewer dispatches: tiny (Qwen2: q/k/v biases, tied head)
// in q4 and q8, a 6-token step and a decode step.
func TestA8NormsRound(t *testing.T) {
	dev := nativetest.Device(t)
	for _, vname := range []string{"q4", "q8"} {
		t.Run(vname, func(t *testing.T) {
			g, src := benchModel(t, synth.Presets["tiny"], vname)
			var logits [2][]float32
			var dispatches [2]int64
			for i, d := range []gpu.Device{dev, hardware{dev}} {
				e, err := New(d, g, src, Options{Capacity: 16, Acts8: true})
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				for _, step := range [][]int{{5, 17, 300, 2, 9, 41}, {77}} {
					if err := e.Submit(step, len(step)); err != nil {
						t.Fatal(err)
					}
					logits[i] = append(logits[i], read(t, dev, e.Logits(), len(step)*g.Vocab)...)
				}
				dispatches[i] = e.Dispatches()
			}
			if !sameBits(logits[0], logits[1]) {
				t.Fatal("the norms' rounding gives other logits than quantize after them")
			}
			// Per step: attn-norm and mlp-norm a layer, and the final norm.
			if saved := dispatches[0] - dispatches[1]; saved != 2*int64(2*g.NumLayers+1) {
				t.Fatalf("%d dispatches, %d with the norms rounding: want %d fewer", dispatches[0], dispatches[1], 2*(2*g.NumLayers+1))
			}
		})
	}
}
