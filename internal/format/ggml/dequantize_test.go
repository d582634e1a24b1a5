package ggml_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"logitscope/internal/format/ggml"
)

func TestSupported(t *testing.T) {
	for _, c := range []struct {
		t    ggml.Type
		want bool
	}{
		{ggml.F32, true}, {ggml.F16, true}, {ggml.BF16, true},
		{ggml.Q4_0, true}, {ggml.Q4_1, true}, {ggml.Q5_0, true}, {ggml.Q5_1, true}, {ggml.Q8_0, true},
		{ggml.Q2_K, true}, {ggml.Q3_K, true}, {ggml.Q4_K, true}, {ggml.Q5_K, true}, {ggml.Q6_K, true},
		{ggml.Q8_1, false}, {ggml.Q8_K, false}, {ggml.I8, false}, {ggml.F64, false},
		{ggml.IQ1_S, true}, {ggml.IQ1_M, true}, {ggml.IQ2_XXS, true}, {ggml.IQ2_XS, true}, {ggml.IQ2_S, true},
		{ggml.IQ3_XXS, true}, {ggml.IQ3_S, true}, {ggml.IQ4_NL, true}, {ggml.IQ4_XS, true},
		{ggml.TQ1_0, true}, {ggml.TQ2_0, true}, {ggml.MXFP4, true},
		{ggml.Type(40), false}, {ggml.Type(200), false},
	} {
		if got := ggml.Supported(c.t); got != c.want {
			t.Errorf("Supported(%v) = %v, want %v", c.t, got, c.want)
		}
	}
}

// block builds a block from its fields' bytes.
func block(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func rep(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

// at is a block's expected weights: v[i] for the indices listed, rest for
// every other.
func at(rest float32, v map[int]float32) func(int) float32 {
	return func(i int) float32 {
		if w, ok := v[i]; ok {
			return w
		}
		return rest
	}
}

// split is a block's expected weights: a below index n, b from it on.
func split(n int, a, b float32) func(int) float32 {
	return func(i int) float32 {
		if i < n {
			return a
		}
		return b
	}
}

// group0 is a block's expected weights when only its first group of n
// is not zero: w0 for weight 0, rest for the others of the group.
func group0(n int, w0, rest float32) func(int) float32 {
	return func(i int) float32 {
		switch {
		case i == 0:
			return w0
		case i < n:
			return rest
		}
		return 0
	}
}

// TestDequantizeByHand decodes blocks whose values follow from the layout
// documented on each decoder, worked out by hand: a check of the layouts
// that does not lean on llama.cpp.
func TestDequantizeByHand(t *testing.T) {
	one, half, two := []byte{0x00, 0x3C}, []byte{0x00, 0x38}, []byte{0x00, 0x40} // f16 1, 0.5, 2
	minusOne := []byte{0x00, 0xBC}
	for _, c := range []struct {
		name string
		t    ggml.Type
		data []byte
		want func(i int) float32
	}{
		{"f16 one", ggml.F16, one, at(1, nil)},
		{"bf16 -2", ggml.BF16, []byte{0x00, 0xC0}, at(-2, nil)},
		{"f32 1.5", ggml.F32, []byte{0, 0, 0xC0, 0x3F}, at(1.5, nil)},
		// q = 9 in every low nibble, 3 in every high one: (9-8)/2, (3-8)/2.
		{"q4_0", ggml.Q4_0, block(half, rep(0x39, 16)), split(16, 0.5, -2.5)},
		// q = 0 low, 15 high, d = 1, m = -1: 0*1 - 1, 15*1 - 1.
		{"q4_1", ggml.Q4_1, block(one, minusOne, rep(0xF0, 16)), split(16, -1, 14)},
		// Fifth bits 0 and 16 set, low bits 0, d = 2: (16-16)*2 for weights
		// 0 and 16, (0-16)*2 for the rest.
		{"q5_0", ggml.Q5_0, block(two, []byte{1, 0, 1, 0}, rep(0, 16)), at(-32, map[int]float32{0: 0, 16: 0})},
		// Low bits 15, fifth bit 31 set, d = m = 1: 15+1, and 31+1 for weight 31.
		{"q5_1", ggml.Q5_1, block(one, one, []byte{0, 0, 0, 0x80}, rep(0xFF, 16)), at(16, map[int]float32{31: 32})},
		{"q8_0", ggml.Q8_0, block(two, []byte{0x81, 0x7F}, rep(3, 30)), at(6, map[int]float32{0: -254, 1: 254})},
		// Group 0's scale byte 0x21: scale 1, min 2, the other groups' 0;
		// d = dmin = 1. Bits 0..1 of qs byte 0 are 3: weight 0 = 1*3 - 2,
		// the rest of group 0 = 1*0 - 2, the other groups 0.
		{"q2_k", ggml.Q2_K, block([]byte{0x21}, rep(0, 15), []byte{3}, rep(0, 63), one, one),
			group0(16, 1, -2)},
		// Group 0's 6-bit scale is 33 (low nibble 1 in byte 0, high bits 2
		// in byte 8): 33-32 = 1; every other group's is 0: -32. Quants 0,
		// high bits all set (q = 0) except weight 1's (q = -4): weight 1 =
		// 1*-4, all others 0.
		{"q3_k", ggml.Q3_K, block([]byte{0xFF, 0xFE}, rep(0xFF, 30), rep(0, 64), []byte{1}, rep(0, 7), []byte{2}, rep(0, 3), one),
			at(0, map[int]float32{1: -4})},
		// Group 0: scale 2, min 1 (bytes 0 and 4); d = 1, dmin = 0.5:
		// weight 0 = 2*5 - 0.5, the rest of group 0 = 2*0 - 0.5, the other
		// groups (scale 0, min 0) 0.
		{"q4_k", ggml.Q4_K, block(one, half, []byte{2, 0, 0, 0, 1}, rep(0, 7), []byte{5}, rep(0, 127)),
			group0(32, 9.5, -0.5)},
		// As q4_k, with the fifth bit of weight 0 set (qh byte 0, bit 0):
		// 2*(5+16) - 0.5.
		{"q5_k", ggml.Q5_K, block(one, half, []byte{2, 0, 0, 0, 1}, rep(0, 7), []byte{1}, rep(0, 31), []byte{5}, rep(0, 127)),
			group0(32, 41.5, -0.5)},
		// Scales all 1, d = 0.5, low and high bits 0: q = -32 → -16 for
		// every weight but weight 0, whose low nibble is 15 and high bits 3:
		// q = 63-32 → 15.5.
		{"q6_k", ggml.Q6_K, block([]byte{0x0F}, rep(0, 127), []byte{3}, rep(0, 63), rep(1, 16), half),
			at(-16, map[int]float32{0: 15.5})},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := make([]float32, c.t.BlockSize())
			if err := ggml.Dequantize(c.t, c.data, out); err != nil {
				t.Fatal(err)
			}
			for i, got := range out {
				if want := c.want(i); got != want {
					t.Errorf("weight %d = %g, want %g", i, got, want)
				}
			}
		})
	}
}

func TestDequantizeErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		t      ggml.Type
		data   int // bytes
		out    int // weights
		errHas []string
	}{
		{"unsupported named", ggml.Q8_K, 292, 256, []string{"cannot dequantize Q8_K"}},
		{"unsupported NVFP4", ggml.Type(40), 36, 64, []string{"cannot dequantize NVFP4"}},
		{"unknown type", ggml.Type(99), 0, 0, []string{"cannot dequantize type 99"}},
		{"partial block", ggml.Q4_0, 18, 31, []string{"31 Q4_0 weights", "32-weight blocks"}},
		{"short data", ggml.Q4_K, 143, 256, []string{"256 Q4_K weights", "1 blocks of 144 bytes", "are 144 bytes, have 143"}},
		{"long data", ggml.Q8_0, 70, 64, []string{"64 Q8_0 weights", "are 68 bytes, have 70"}},
		{"f16 odd bytes", ggml.F16, 3, 1, []string{"1 F16 weights", "are 2 bytes, have 3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := ggml.Dequantize(c.t, make([]byte, c.data), make([]float32, c.out))
			if err == nil {
				t.Fatal("no error")
			}
			for _, s := range c.errHas {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
	// Nothing to decode is no error.
	if err := ggml.Dequantize(ggml.Q4_K, nil, nil); err != nil {
		t.Errorf("zero weights: %v", err)
	}
}

// FuzzDequantize: any type and any bytes are decoded or refused, never a
// panic; whole blocks of a supported type always decode.
func FuzzDequantize(f *testing.F) {
	for _, typ := range supported() {
		data, _ := randomBlocks(typ, 1, 9)
		f.Add(byte(typ), data[:2*typ.BlockBytes()])
	}
	f.Add(byte(16), []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, typ byte, data []byte) {
		tt := ggml.Type(typ)
		bs, bb := tt.BlockSize(), tt.BlockBytes()
		if bb == 0 {
			if ggml.Dequantize(tt, data, make([]float32, len(data))) == nil {
				t.Fatalf("%v without a layout decoded", tt)
			}
			return
		}
		whole := len(data) / bb
		err := ggml.Dequantize(tt, data[:whole*bb], make([]float32, whole*bs))
		if (err == nil) != ggml.Supported(tt) {
			t.Fatalf("%v, %d whole blocks: %v", tt, whole, err)
		}
		// The untrimmed bytes and other counts decode exactly when they are
		// whole blocks of a supported type; the rest are refused, never
		// decoded past either end.
		for _, n := range []int{whole * bs, whole*bs + 1, whole*bs + bs, len(data)} {
			err := ggml.Dequantize(tt, data, make([]float32, n))
			valid := ggml.Supported(tt) && n%bs == 0 && len(data) == n/bs*bb
			if (err == nil) != valid {
				t.Fatalf("%v: %d weights from %d bytes: %v", tt, n, len(data), err)
			}
		}
	})
}

// BenchmarkDequantize reports each type's decoding speed in MB/s of
// decoded float32 output (b.SetBytes), over 1 Mi weights.
func BenchmarkDequantize(b *testing.B) {
	const n = 1 << 20
	for _, typ := range supported() {
		b.Run(typ.String(), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(1, 1))
			data := make([]byte, n/typ.BlockSize()*typ.BlockBytes())
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			out := make([]float32, n)
			b.SetBytes(4 * n)
			for b.Loop() {
				if err := ggml.Dequantize(typ, data, out); err != nil {
					b.Fatal(fmt.Sprint(err))
				}
			}
		})
	}
}
