package ggml_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"logitscope/internal/format/ggml"
	"logitscope/internal/peer/llamacpp"
)

// The tests in this file compare with llama.cpp's own libraries through
// package llamacpp; they skip where its npm install, cc or git is missing
// (and fail under CI). The golden files (golden_test.go) carry a few of
// the same checks to machines without them.

// supported lists the types Dequantize decodes, in ggml's numbering.
func supported() []ggml.Type {
	var ts []ggml.Type
	for t := range ggml.Type(64) {
		if ggml.Supported(t) {
			ts = append(ts, t)
		}
	}
	return ts
}

// TestTypeTable checks type.go's table against the library's:
// every type the table lays out has ggml's block size, block bytes and
// name, and every type ggml lays out is either in the table or named.
func TestTypeTable(t *testing.T) {
	h := llamacpp.Harness(t)
	for typ := range ggml.Type(64) {
		if typ.BlockSize() == 0 {
			continue
		}
		bs, bb := h.TypeSize(t, typ)
		if typ.BlockSize() != bs || typ.BlockBytes() != bb {
			t.Errorf("%v: %d weights in %d bytes, ggml has %d in %d", typ, typ.BlockSize(), typ.BlockBytes(), bs, bb)
		}
		if name := h.TypeName(t, typ); !strings.EqualFold(name, typ.String()) {
			t.Errorf("type %d is %v here, %s in ggml", uint32(typ), typ, name)
		}
	}
}

// A quantInput is one kind of weights to quantize with the library.
type quantInput struct {
	name string
	gen  func(rng *rand.Rand, x []float32)
}

func normal(scale float64) func(*rand.Rand, []float32) {
	return func(rng *rand.Rand, x []float32) {
		for i := range x {
			x[i] = float32(rng.NormFloat64() * scale)
		}
	}
}

func constant(v float32) func(*rand.Rand, []float32) {
	return func(_ *rand.Rand, x []float32) {
		for i := range x {
			x[i] = v
		}
	}
}

// quantInputs are the weights whose quantized blocks are compared: the
// ordinary (normal at several scales), the degenerate (zeros, constants,
// one sign), and the ones that push the f16 scales to their ends (over-
// and underflow, f16 and f32 subnormals, one outlier per block).
var quantInputs = []quantInput{
	{"normal σ=1", normal(1)},
	{"normal σ=0.02", normal(0.02)},
	{"normal σ=1e-3", normal(1e-3)},
	{"normal σ=300", normal(300)},
	{"zeros", constant(0)},
	{"constant 0.37", constant(0.37)},
	{"constant -2.5", constant(-2.5)},
	{"negative only", func(rng *rand.Rand, x []float32) {
		for i := range x {
			x[i] = -float32(math.Abs(rng.NormFloat64()))
		}
	}},
	{"positive, offset", func(rng *rand.Rand, x []float32) {
		for i := range x {
			x[i] = 1 + float32(math.Abs(rng.NormFloat64()))
		}
	}},
	{"one huge among tiny", func(rng *rand.Rand, x []float32) {
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 1e-4)
		}
		for b := 0; b < len(x); b += 32 {
			x[b+rng.IntN(32)] = float32(1e3 * (2*float64(rng.IntN(2)) - 1))
		}
	}},
	{"near f16 overflow", func(rng *rand.Rand, x []float32) {
		for i := range x {
			x[i] = float32((2*rng.Float64() - 1) * 65504)
		}
	}},
	{"past f16 overflow", normal(1e5)},
	{"f16 subnormal scales", normal(1e-6)},
	{"below f16", normal(1e-9)},
	{"f32 subnormals", normal(1e-39)},
	{"block scales 1e-5..1e5", func(rng *rand.Rand, x []float32) {
		for b := 0; b < len(x); b += 32 {
			s := math.Pow(10, 10*rng.Float64()-5)
			for i := b; i < b+32; i++ {
				x[i] = float32(rng.NormFloat64() * s)
			}
		}
	}},
}

func inputNamed(name string) quantInput {
	for _, in := range quantInputs {
		if in.name == name {
			return in
		}
	}
	panic("no input " + name)
}

// TestDequantizeQuantized quantizes every input with the library's
// ggml_quantize_chunk and checks that Dequantize gives the library's
// to_float bit for bit. Each input is two rows of 1024 weights: several
// blocks per row, and K-quant super-blocks that do not start a row.
func TestDequantizeQuantized(t *testing.T) {
	h := llamacpp.Harness(t)
	const rows, cols = 2, 1024
	for _, typ := range supported() {
		if typ == ggml.F32 {
			continue // not quantized: TestDequantizeRandomBytes covers it
		}
		t.Run(typ.String(), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(typ), 1))
			x := make([]float32, len(quantInputs)*rows*cols)
			for i, in := range quantInputs {
				in.gen(rng, x[i*rows*cols:(i+1)*rows*cols])
			}
			blocks := h.QuantizeImatrix(t, typ, x, llamacpp.Importance(typ, cols), len(quantInputs)*rows, cols)
			perInput := rows * cols / typ.BlockSize()
			compare(t, typ, blocks, h.Dequantize(t, typ, blocks), func(block int) string {
				return quantInputs[block/perInput].name
			})
		})
	}
}

// TestDequantizeRandomBytes decodes blocks of random bytes, which reach
// what the quantizer never writes (all quant patterns, any scale: NaN,
// infinite, subnormal), and blocks whose f16 scales are set to each such
// value, with the library's to_float as the reference.
func TestDequantizeRandomBytes(t *testing.T) {
	h := llamacpp.Harness(t)
	for _, typ := range supported() {
		t.Run(typ.String(), func(t *testing.T) {
			t.Parallel()
			data, labels := randomBlocks(typ, 512, uint64(typ))
			compare(t, typ, data, h.Dequantize(t, typ, data), func(block int) string { return labels[block] })
		})
	}
}

// halfOffsets are where each type keeps its f16 scales in a block.
var halfOffsets = map[ggml.Type][]int{
	ggml.F16: {0}, ggml.Q4_0: {0}, ggml.Q4_1: {0, 2}, ggml.Q5_0: {0}, ggml.Q5_1: {0, 2}, ggml.Q8_0: {0},
	ggml.Q2_K: {80, 82}, ggml.Q3_K: {108}, ggml.Q4_K: {0, 2}, ggml.Q5_K: {0, 2}, ggml.Q6_K: {208},
	ggml.IQ2_XXS: {0}, ggml.IQ2_XS: {0}, ggml.IQ2_S: {0}, ggml.IQ3_XXS: {0}, ggml.IQ3_S: {0},
	ggml.IQ1_S: {0}, ggml.IQ4_NL: {0}, ggml.IQ4_XS: {0}, ggml.TQ1_0: {52}, ggml.TQ2_0: {64},
}

// specialHalves are f16 values at the ends of the format: infinities,
// quiet and signaling NaNs of both signs and several payloads, zeros,
// subnormals and the largest finite.
var specialHalves = []uint16{
	0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x7C01, 0xFC01, 0x7E01, 0x7FFF, 0x7D55,
	0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF,
}

// randomBlocks returns n blocks of random bytes of type t, then one per
// special f16 value in each scale field, then one per pair of special
// values in two scale fields (NaN meeting NaN, 0·∞), with a label per
// block. For the plain types a "block" is one value, so n is scaled up;
// their special values come from the bit patterns of their own format.
func randomBlocks(t ggml.Type, n int, seed uint64) ([]byte, []string) {
	rng := rand.New(rand.NewPCG(seed, 2))
	bb := t.BlockBytes()
	if t.BlockSize() == 1 {
		n *= 16
	}
	var data []byte
	var labels []string
	add := func(label string, set func(b []byte)) {
		b := make([]byte, bb)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		set(b)
		data = append(data, b...)
		labels = append(labels, label)
	}
	for range n {
		add("random", func([]byte) {})
	}
	switch t {
	case ggml.F32:
		for _, v := range []uint32{0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0x00000001, 0x80000000, 0x7F7FFFFF} {
			add(fmt.Sprintf("f32 %08x", v), func(b []byte) { binary.LittleEndian.PutUint32(b, v) })
		}
	case ggml.BF16:
		for _, v := range []uint16{0x7F80, 0xFF80, 0x7FC0, 0x7F81, 0xFFFF, 0x0001, 0x8000, 0x7F7F} {
			add(fmt.Sprintf("bf16 %04x", v), func(b []byte) { binary.LittleEndian.PutUint16(b, v) })
		}
	case ggml.IQ1_M:
		// Its f16 scale is the top nibbles of the four u16 at 48..55.
		for _, v := range specialHalves {
			add(fmt.Sprintf("f16 %04x in the scales' top nibbles", v), func(b []byte) {
				for i := range 4 {
					at := 48 + 2*i
					u := binary.LittleEndian.Uint16(b[at:])&0x0FFF | (v>>(4*i)&0xF)<<12
					binary.LittleEndian.PutUint16(b[at:], u)
				}
			})
		}
	case ggml.MXFP4:
		for e := range 256 {
			add(fmt.Sprintf("e8m0 %d", e), func(b []byte) { b[0] = byte(e) })
		}
	}
	offs := halfOffsets[t]
	for _, off := range offs {
		for _, v := range specialHalves {
			add(fmt.Sprintf("f16 %04x at %d", v, off), func(b []byte) { binary.LittleEndian.PutUint16(b[off:], v) })
		}
	}
	if len(offs) == 2 {
		for _, v := range specialHalves {
			for _, w := range specialHalves {
				add(fmt.Sprintf("f16 %04x at %d, %04x at %d", v, offs[0], w, offs[1]), func(b []byte) {
					binary.LittleEndian.PutUint16(b[offs[0]:], v)
					binary.LittleEndian.PutUint16(b[offs[1]:], w)
				})
			}
		}
	}
	return data, labels
}

// compare decodes data with Dequantize and checks it against want bit for
// bit, reporting the first mismatch (type, block and its label, index)
// and how many there are.
func compare(t *testing.T, typ ggml.Type, data []byte, want []float32, label func(block int) string) {
	t.Helper()
	got := make([]float32, len(want))
	if err := ggml.Dequantize(typ, data, got); err != nil {
		t.Fatal(err)
	}
	bs := typ.BlockSize()
	bad, nan := 0, 0
	for i := range want {
		g, w := math.Float32bits(got[i]), math.Float32bits(want[i])
		if math.IsNaN(float64(want[i])) {
			nan++
		}
		if g == w {
			continue
		}
		if bad == 0 {
			b := i / bs
			t.Errorf("%v block %d (%s) weight %d: got %08x (%g), llama.cpp %08x (%g)\nblock: %x",
				typ, b, label(b), i%bs, g, got[i], w, want[i], data[b*typ.BlockBytes():(b+1)*typ.BlockBytes()])
		}
		bad++
	}
	if bad > 0 {
		t.Errorf("%v: %d of %d weights differ", typ, bad, len(want))
	}
	t.Logf("%v: %d blocks, %d weights (%d NaN) compared", typ, len(want)/bs, len(want), nan)
}
