package gpuengine

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/format/ggml"
	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native/nativetest"
	"logitscope/internal/peer/llamacpp"
	"logitscope/shaders"
)

// ggmlTypes are the GGUF types the kernels read, block types first.
var ggmlTypes = []ggml.Type{ggml.Q4_0, ggml.Q4_1, ggml.Q5_0, ggml.Q5_1, ggml.Q8_0,
	ggml.Q2_K, ggml.Q3_K, ggml.Q4_K, ggml.Q5_K, ggml.Q6_K,
	ggml.IQ2_XXS, ggml.IQ2_XS, ggml.IQ2_S, ggml.IQ3_XXS, ggml.IQ3_S, ggml.IQ1_S, ggml.IQ1_M,
	ggml.IQ4_NL, ggml.IQ4_XS, ggml.TQ1_0, ggml.TQ2_0, ggml.MXFP4,
	ggml.F32, ggml.F16, ggml.BF16}

// ggmlCols is the row length the tests give type t: an odd number of
// blocks, so that rows of Q4_0, Q5_0, Q8_0, Q3_K and Q6_K are not whole
// words (Q4_1's, Q5_1's and most K-quants' blocks always are), and several
// of them, so that the matmul's lanes take more than one group each;
// float rows odd, so that 16-bit rows start mid-word.
func ggmlCols(t ggml.Type) int {
	switch t.BlockSize() {
	case 1:
		return 75
	case 32:
		return 32 * 9
	}
	return 256 * 3
}

// halves are the byte offsets of the f16 fields (scales, minimums) in a
// block of each type.
var halves = map[ggml.Type][]int{
	ggml.Q4_0: {0}, ggml.Q4_1: {0, 2}, ggml.Q5_0: {0}, ggml.Q5_1: {0, 2}, ggml.Q8_0: {0},
	ggml.Q2_K: {80, 82}, ggml.Q3_K: {108}, ggml.Q4_K: {0, 2}, ggml.Q5_K: {0, 2}, ggml.Q6_K: {208},
	ggml.IQ2_XXS: {0}, ggml.IQ2_XS: {0}, ggml.IQ2_S: {0}, ggml.IQ3_XXS: {0}, ggml.IQ3_S: {0},
	ggml.IQ1_S: {0}, ggml.IQ4_NL: {0}, ggml.IQ4_XS: {0}, ggml.TQ1_0: {52}, ggml.TQ2_0: {64},
}

// randomBlocks is n weights of type t as random bytes with finite f16
// scales (and finite floats for the float types): with moderate, every
// scale's exponent (and float's) is pinned near 1 (f16 scales 2^-5..2^2,
// floats 2^-7..2^0), so that products stay moderate;
// without it they span f16's whole range, subnormals included (every
// seventh block's first scale is one), and so do F16's values and F32's
// and BF16's bits.
func randomBlocks(t ggml.Type, n int, rng *rand.Rand, moderate bool) []byte {
	size, _ := t.RowBytes(n)
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	fixHalf := func(h uint16, block int) uint16 {
		e := h >> 10 & 0x1f
		switch {
		case moderate:
			e = 10 + e%8
		case block%7 == 3:
			e = 0
		case e == 31:
			e = 15
		}
		return h&^0x7c00 | e<<10
	}
	fix16 := func(at int, block int) {
		binary.LittleEndian.PutUint16(b[at:], fixHalf(binary.LittleEndian.Uint16(b[at:]), block))
	}
	switch t {
	case ggml.F32:
		for i := 0; i < len(b); i += 4 {
			v := binary.LittleEndian.Uint32(b[i:])
			if e := v >> 23 & 0xff; moderate {
				v = v&^(0xff<<23) | (120+e%8)<<23
			} else if e == 0xff {
				v &^= 1 << 30
			}
			binary.LittleEndian.PutUint32(b[i:], v)
		}
	case ggml.BF16:
		for i := 0; i < len(b); i += 2 {
			v := binary.LittleEndian.Uint16(b[i:])
			if e := v >> 7 & 0xff; moderate {
				v = v&^(0xff<<7) | (120+e%8)<<7
			} else if e == 0xff {
				v &^= 1 << 14
			}
			binary.LittleEndian.PutUint16(b[i:], v)
		}
	case ggml.F16:
		for i := 0; i < len(b); i += 2 {
			fix16(i, i/2)
		}
	case ggml.IQ1_M:
		// Its f16 scale is the top nibbles of the four u16 at 48..55:
		// gathered into a scratch f16, fixed as the others, spread back.
		for k := 0; k < len(b)/56; k++ {
			at := k*56 + 48
			var h uint16
			for i := range 4 {
				h |= binary.LittleEndian.Uint16(b[at+2*i:]) >> 12 << (4 * i)
			}
			h = fixHalf(h, k)
			for i := range 4 {
				u := binary.LittleEndian.Uint16(b[at+2*i:])&0x0FFF | (h>>(4*i)&0xF)<<12
				binary.LittleEndian.PutUint16(b[at+2*i:], u)
			}
		}
	case ggml.MXFP4:
		// E8M0 scales whose weights are normal floats: 2^-126..2^-112
		// when moderate (e 2..16 taken to 123..137, about 1), else 2^-126
		// ..2^122 (e 2..250).
		for k := 0; k < len(b); k += 17 {
			if moderate {
				b[k] = 123 + b[k]%15
			} else {
				b[k] = 2 + b[k]%249
			}
		}
	default:
		bb := t.BlockBytes()
		for k := 0; k < len(b)/bb; k++ {
			for _, at := range halves[t] {
				fix16(k*bb+at, k)
			}
		}
	}
	return b
}

// quantizable is rows × cols inputs for llama.cpp's quantizer, one kind per
// row (cycling): normal at scales 1, 1e-3 (K-quants' and Q8_0's scales
// become f16 subnormals) and 1e3; all zeros; alternate zero and outlier
// blocks; values near f16's top whose scales stay finite; a constant block
// after a block of one sign; a scale that changes by 10× block to block.
func quantizable(rows, cols int, rng *rand.Rand) []float32 {
	x := make([]float32, rows*cols)
	for r := range rows {
		row := x[r*cols : (r+1)*cols]
		for i := range row {
			n := float32(rng.NormFloat64())
			switch r % 8 {
			case 0:
				row[i] = n
			case 1:
				row[i] = 1e-3 * n
			case 2:
				row[i] = 1e3 * n
			case 3:
				row[i] = 0
			case 4:
				if i/32%2 == 1 {
					row[i] = n
					if i%32 == 5 {
						row[i] = -300
					}
				}
			case 5:
				row[i] = float32(3e4 * math.Tanh(float64(n)))
			case 6:
				switch i / 32 % 3 {
				case 0:
					row[i] = 2.5
				case 1:
					row[i] = float32(math.Abs(float64(n)))
				default:
					row[i] = n
				}
			case 7:
				row[i] = float32(math.Pow(10, float64(i/32%5-2))) * n
			}
		}
	}
	return x
}

// ggmlFile writes a GGUF-like file: 3 bytes, the tensor data at offset 3
// (not word aligned), 5 more bytes; pieces must neither start nor end on
// a word boundary to be read right.
func ggmlFile(t *testing.T, data []byte) (string, int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.gguf")
	content := append(append([]byte{0xa1, 0xa2, 0xa3}, data...), 0xb1, 0xb2, 0xb3, 0xb4, 0xb5)
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, 3
}

// uploadPieces uploads pieces as the engine does.
func uploadPieces(t *testing.T, dev gpu.Device, pieces []Piece) []gpu.Buffer {
	t.Helper()
	e := &State{dev: dev}
	t.Cleanup(e.Close)
	var bufs []gpu.Buffer
	for i, p := range pieces {
		if err := p.check(); err != nil {
			t.Fatal(err)
		}
		b, err := e.uploadPiece(fmt.Sprint("piece ", i), p)
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
	}
	return bufs
}

// ggmlData is a test matrix: its bytes as GGUF stores them.
type ggmlData struct {
	name string
	data []byte
}

// ggmlInputs are the matrices of type t (rows, cols) a test runs on:
// random bytes always, and llama.cpp's quantization of varied inputs
// where the harness is installed (without it the harness skips the
// subtest, and fails it under CI). moderate: see randomBlocks.
func ggmlInputs(t *testing.T, ty ggml.Type, rows, cols int, moderate bool, seed uint64, run func(t *testing.T, in ggmlData)) {
	t.Run("random", func(t *testing.T) {
		run(t, ggmlData{"random", randomBlocks(ty, rows*cols, rand.New(rand.NewPCG(seed, uint64(ty))), moderate)})
	})
	t.Run("llamacpp", func(t *testing.T) {
		h := llamacpp.Harness(t)
		x := quantizable(rows, cols, rand.New(rand.NewPCG(seed+1, uint64(ty))))
		if moderate {
			x = make([]float32, rows*cols)
			rng := rand.New(rand.NewPCG(seed+2, uint64(ty)))
			for i := range x {
				x[i] = float32(0.5 * rng.NormFloat64())
			}
		}
		run(t, ggmlData{"llamacpp", h.QuantizeImatrix(t, ty, x, llamacpp.Importance(ty, cols), rows, cols)})
	})
}

// The embedding kernel gathers rows of every GGUF type the GPU reads as
// ggml dequantizes them, bit for bit: random blocks with finite scales
// over f16's whole range (subnormals included), and llama.cpp's own
// quantization of normal values at several scales, zero blocks, outliers
// and values near f16's top. The matrix lies at an odd file offset and is
// split into pieces of 3 rows, whose lengths are mostly not whole words;
// every row is looked up, in shuffled order, some twice.
func TestGGMLEmbedExact(t *testing.T) {
	dev := nativetest.Device(t)
	const rows = 10
	for _, ty := range ggmlTypes {
		t.Run(ty.String(), func(t *testing.T) {
			cols := ggmlCols(ty)
			ggmlInputs(t, ty, rows, cols, false, 41, func(t *testing.T, in ggmlData) {
				want := make([]float32, rows*cols)
				if err := ggml.Dequantize(ty, in.data, want); err != nil {
					t.Fatal(err)
				}
				for _, v := range want {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						t.Fatalf("the input decodes to %g: the test wants finite weights", v)
					}
				}
				file, off := ggmlFile(t, in.data)
				rowBytes, _ := ty.RowBytes(cols)
				pieces, err := GGMLPieces(file, off, ty, rows, cols, 3*rowBytes+rowBytes/2, 0)
				if err != nil {
					t.Fatal(err)
				}
				ids, got := gatherRows(t, dev, pieces, cols)
				subnormal := 0
				for i, id := range ids {
					for k := range cols {
						g, w := got[i*cols+k], want[int(id)*cols+k]
						if math.Float32bits(g) != math.Float32bits(w) {
							t.Fatalf("row %d col %d: %g (%#08x), ggml %g (%#08x)", id, k, g, math.Float32bits(g), w, math.Float32bits(w))
						}
						if w != 0 && math.Abs(float64(w)) < 0x1p-14 {
							subnormal++
						}
					}
				}
				t.Logf("%s %s: %d rows × %d bit for bit (%d weights below f16's normal range)", ty, in.name, rows, cols, subnormal)
			})
		})
	}
}

// gatherRows is the embedding kernel's rows of a matrix of 10 rows of
// cols columns, in 4 pieces, for ids (every row, shuffled, some twice).
func gatherRows(t *testing.T, dev gpu.Device, pieces []Piece, cols int) (ids []uint32, got []float32) {
	t.Helper()
	if len(pieces) != 4 {
		t.Fatalf("%d pieces, want 4", len(pieces))
	}
	bufs := uploadPieces(t, dev, pieces)
	ids = []uint32{7, 2, 9, 0, 5, 3, 3, 8, 1, 6, 4, 9}
	out := buf(t, dev, make([]float32, len(ids)*cols))
	idb := buf(t, dev, ids)
	groups := (cols + 31) / 32
	for i, p := range pieces {
		pb := buf(t, dev, params(p.Rows, p.Cols, groups, 0, p.Row0))
		dispatch(t, dev, shaders.Embed(p.Format), "main", []gpu.Buffer{bufs[i], idb, out, 0, pb}, ceilDiv(groups, shaders.Workgroup), uint32(len(ids)), 1)
	}
	return ids, read(t, dev, out, len(ids)*cols)
}

// hfToGGUF permutes the rows of a q_proj or k_proj of heads of hd rows as
// llama.cpp's converter does (convert_hf_to_gguf.py's LlamaModel.permute:
// reshape(heads, 2, hd/2, cols), swap axes 1 and 2, reshape back): rows
// are byte ranges of rowBytes, which a row permutation moves whole.
func hfToGGUF(data []byte, rows int, rowBytes int64, hd int) []byte {
	out := make([]byte, 0, len(data))
	for h := 0; h < rows/hd; h++ {
		for i := 0; i < hd/2; i++ { // axis 2 before the swap ...
			for a := 0; a < 2; a++ { // ... then axis 1
				src := int64(h*hd + a*hd/2 + i)
				out = append(out, data[src*rowBytes:(src+1)*rowBytes]...)
			}
		}
	}
	return out
}

// Y = X @ Wᵀ + b on every GGUF type, through the engine's matmulOps,
// against float64 over ggml's dequantization: W (48, cols) split into pieces (of 20 rows, or of two
// heads when interleaved), 1, 3 or 5 tokens, offsets into X and Y, a Y
// wider than W; and Llama's permuted q/k rows (heads of 16), stored in
// GGUF's order and compared with the un-permuted matrix, bias in Hugging
// Face's order. The error of each output is measured against
// ε·Σ|w·x| (ε = 2⁻²⁴), the scale of float32 accumulation error.
func TestGGMLMatmul(t *testing.T) {
	dev := nativetest.Device(t)
	const rows, hd, ldy, xOff, yOff = 48, 16, 52, 5, 7
	cases := []struct {
		T, interleave, pieceRows int
		bias                     bool
	}{{1, 0, 20, false}, {5, 0, 20, true}, {3, hd, 2 * hd, true}}
	for _, ty := range ggmlTypes {
		t.Run(ty.String(), func(t *testing.T) {
			cols := ggmlCols(ty)
			rowBytes, _ := ty.RowBytes(cols)
			ggmlInputs(t, ty, rows, cols, true, 43, func(t *testing.T, in ggmlData) {
				deq := make([]float32, rows*cols) // Hugging Face's row order
				if err := ggml.Dequantize(ty, in.data, deq); err != nil {
					t.Fatal(err)
				}
				for _, c := range cases {
					t.Run(fmt.Sprintf("T%d/interleave%d", c.T, c.interleave), func(t *testing.T) {
						r := rnd(c.T*100 + c.interleave + int(ty))
						x := append(make([]float32, xOff), r.fill(c.T*cols, 1)...)
						bias := r.fill(rows, 0.1)
						// The engine's no-bias buffer: the kernel must not
						// read it, NaNs there would show.
						nb := buf(t, dev, []float32{float32(math.NaN()), float32(math.NaN())})
						b := nb
						stored := in.data
						if c.interleave != 0 {
							stored = hfToGGUF(in.data, rows, rowBytes, c.interleave)
						}
						file, off := ggmlFile(t, stored)
						pieces, err := GGMLPieces(file, off, ty, rows, cols, int64(c.pieceRows)*rowBytes+rowBytes-1, c.interleave)
						if err != nil {
							t.Fatal(err)
						}
						if want := (rows + c.pieceRows - 1) / c.pieceRows; len(pieces) != want {
							t.Fatalf("%d pieces, want %d", len(pieces), want)
						}
						// The engine's own ops: matmulOps' params and
						// dispatches, one per piece.
						e := &State{dev: dev, pipes: map[string]gpu.Pipeline{}}
						t.Cleanup(e.Close)
						w := matrix{pieces: pieces, bufs: uploadPieces(t, dev, pieces)}
						if c.bias {
							b = buf(t, dev, bias)
						}
						e.none = nb
						e.ids = buf(t, dev, make([]uint32, c.T))
						y := buf(t, dev, make([]float32, yOff+c.T*ldy))
						at := func(off int) func(step) int { return func(step) int { return off } }
						ops := e.matmulOps("w", w, buf(t, dev, x), at(xOff), y, at(yOff), ldy, b, func(s step) int { return s.T })
						if err := e.finish(ops); err != nil {
							t.Fatal(err)
						}
						runStep(t, e, step{T: c.T})
						got := read(t, dev, y, yOff+c.T*ldy)
						var want []float64
						var gotVals []float32
						worst := 0.0 // the largest error in units of ε·Σ|w·x|
						for tk := 0; tk < c.T; tk++ {
							for n := 0; n < ldy; n++ {
								v, mag := 0.0, 0.0
								if n < rows {
									if c.bias {
										v, mag = float64(bias[n]), math.Abs(float64(bias[n]))
									}
									for k := range cols {
										p := float64(deq[n*cols+k]) * float64(x[xOff+tk*cols+k])
										v += p
										mag += math.Abs(p)
									}
								}
								g := got[yOff+tk*ldy+n]
								if d := math.Abs(float64(g) - v); d > 0 {
									worst = max(worst, d/(mag*0x1p-24))
								}
								want = append(want, v)
								gotVals = append(gotVals, g)
							}
						}
						nmse, maxAbs := errors(gotVals, want)
						t.Logf("%s %s T %d interleave %d: NMSE %.2e, max abs %.2e, worst %.1f ε·Σ|w·x|", ty, in.name, c.T, c.interleave, nmse, maxAbs, worst)
						// Measured on lavapipe: NMSE ≤ 2e-14, worst ≤ 2.5.
						if nmse > 1e-12 || worst > 16 {
							t.Fatalf("matmul %s: NMSE %g, worst %.1f ε·Σ|w·x|", ty, nmse, worst)
						}
						for i := range yOff {
							if got[i] != 0 {
								t.Fatal("wrote before y_off")
							}
						}
					})
				}
			})
		})
	}
}

// GGMLPieces splits on rows (on heads when interleaved) under the limit,
// at byte offsets and lengths that need not be words, and refuses what the
// kernels cannot read, naming it.
func TestGGMLPieces(t *testing.T) {
	// Qwen2.5-7B's down_proj width in Q6_K: 3990-byte rows.
	ps, err := GGMLPieces("m.gguf", 1001, ggml.Q6_K, 10, 4864, 3*3990+1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var rows []int
	for i, p := range ps {
		if p.Offset != 1001+int64(p.Row0)*3990 || p.Length != int64(p.Rows)*3990 || p.Format != shaders.Q6_K || p.Cols != 4864 {
			t.Errorf("piece %d: %+v", i, p)
		}
		rows = append(rows, p.Row0, p.Rows)
	}
	if !slices.Equal(rows, []int{0, 3, 3, 3, 6, 3, 9, 1}) {
		t.Errorf("pieces at rows %v", rows)
	}
	// Heads of 128 Q4_K rows of 4096 (2304 bytes): 3.5 heads fit, 3 taken.
	ps, err = GGMLPieces("m.gguf", 0, ggml.Q4_K, 128*8, 4096, 2304*128*7/2, 128)
	if err != nil {
		t.Fatal(err)
	}
	rows = rows[:0]
	for _, p := range ps {
		rows = append(rows, p.Row0, p.Rows)
		if p.Interleaved != 128 || p.check() != nil {
			t.Errorf("%+v: %v", p, p.check())
		}
	}
	if !slices.Equal(rows, []int{0, 384, 384, 384, 768, 256}) {
		t.Errorf("interleaved pieces at rows %v", rows)
	}
	if ps, err := GGMLPieces("m.gguf", 0, ggml.F16, 3, 5, 1<<20, 0); err != nil || len(ps) != 1 || ps[0].Format != shaders.F16 || ps[0].Length != 30 {
		t.Errorf("F16: %+v, %v", ps, err)
	}
	for _, c := range []struct {
		t              ggml.Type
		rows, cols, hd int
		max            int64
		want           string
	}{
		{ggml.Type(40), 4, 256, 0, 1 << 20, "NVFP4"},
		{ggml.Q8_K, 4, 256, 0, 1 << 20, "Q8_K"},
		{ggml.Q4_0, 4, 100, 0, 1 << 20, "not whole 32-weight blocks"},
		{ggml.Q4_0, 48, 64, 16, 16*36 - 1, "over the device's"},
		{ggml.Q4_0, 40, 64, 16, 1 << 20, "heads of 16"},
		{ggml.Q4_0, 30, 64, 15, 1 << 20, "heads of 15"},
		{ggml.Q4_0, 0, 64, 0, 1 << 20, "0 × 64"},
	} {
		if _, err := GGMLPieces("m.gguf", 0, c.t, c.rows, c.cols, c.max, c.hd); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %d×%d hd %d: %v, want an error naming %q", c.t, c.rows, c.cols, c.hd, err, c.want)
		}
	}
	bad := Piece{Row0: 8, Rows: 16, Cols: 64, Format: shaders.Q4_0, Length: 16 * 36, Interleaved: 16}
	if bad.check() == nil {
		t.Error("a piece starting mid-head passed")
	}
	bad = Piece{Rows: 16, Cols: 64, Format: shaders.Q4_0, Length: 16*36 - 1}
	if bad.check() == nil {
		t.Error("a piece shorter than its rows passed")
	}
}

// noFileUploader hides the device's UploadFile: the engine then reads the
// file itself.
type noFileUploader struct{ gpu.Device }

// A piece at an odd file offset with an odd length arrives whole and
// zero-padded to a word, through the device's UploadFile and without it.
func TestUploadUnaligned(t *testing.T) {
	dev := nativetest.Device(t)
	data := []byte("0123456789abcdefghij")
	file, off := ggmlFile(t, data)
	for _, d := range []gpu.Device{dev, noFileUploader{dev}} {
		_, direct := d.(gpu.FileUploader)
		e := &State{dev: d}
		b, err := e.uploadPiece("odd", Piece{File: file, Offset: off + 1, Length: 13})
		if err != nil {
			t.Fatal(err)
		}
		got, err := dev.ReadBuffer(b, 0, 16)
		e.Close()
		if err != nil {
			t.Fatal(err)
		}
		if want := append(slices.Clone(data[1:14]), 0, 0, 0); !bytes.Equal(got, want) {
			t.Errorf("UploadFile %v: %q, want %q", direct, got, want)
		}
	}
}

// fmaProbe computes a*b + c as WGSL writes it.
const fmaProbe = `@group(0) @binding(0) var<storage, read_write> v: array<f32>;
@compute @workgroup_size(1)
fn main() { v[3] = v[0] * v[1] + v[2]; }
`

// Whether this driver contracts a*b + c into a fused multiply-add (SPIR-V
// allows it unless NoContraction is set, which naga does not): with a = b
// = 1 + 2⁻¹² and c = -1, a*b rounds its last bit (2⁻²⁴) away unfused. The
// ggml decoders do not depend on it (their products are exact), so this
// only reports.
func TestFMAContraction(t *testing.T) {
	dev := nativetest.Device(t)
	a := float32(1 + 0x1p-12)
	v := buf(t, dev, []float32{a, a, -1, 0})
	dispatch(t, dev, fmaProbe, "main", []gpu.Buffer{v}, 1, 1, 1)
	got := read(t, dev, v, 4)[3]
	fused := float32(math.FMA(float64(a), float64(a), -1))
	unfused := float32(float32(a*a) - 1)
	switch got {
	case fused:
		t.Logf("%s contracts a*b + c into an FMA (%g; unfused %g)", dev.Info().Adapter, got, unfused)
	case unfused:
		t.Logf("%s rounds a*b before adding c (%g; fused %g)", dev.Info().Adapter, got, fused)
	default:
		t.Errorf("a*b + c = %g: neither fused (%g) nor unfused (%g)", got, fused, unfused)
	}
}
