package acts

import (
	"fmt"
	"slices"
	"testing"
)

// Each quantization rounds a row to the values worked out by hand from
// the definitions (the constants' comments): scales from the row's
// absmax, ties to even, saturation.
func TestRow(t *testing.T) {
	s127 := float32(1) / 127 // int8's scale for an absmax of 1
	d22 := float32(22) / 448 // fp4's block scale: E4M3(448·0.3/6 = 22.4) = 22, over G = 448
	for _, c := range []struct {
		mode    string
		in, out []float32
	}{
		// absmax 127: scale 1, codes the values rounded, ties to even.
		{Int8, []float32{2.5, 127, -1.5, 0.5, -0.5, 3.49}, []float32{2, 127, -2, 0, 0, 3}},
		// absmax 1: x·127 = 63.5 → 64 (even), 12.7 → 13.
		{Int8, []float32{0.5, 1, -0.1}, []float32{64 * s127, 127 * s127, -13 * s127}},
		{Int8, []float32{0, 0}, []float32{0, 0}},
		// absmax 448: scale 1. 0.1 = 12.8·2^-7 → 13·2^-7; 17 = 8.5·2 → 16,
		// 19 = 9.5·2 → 20 (ties to even); 0.005 subnormal: 2.56·2^-9 → 3·2^-9.
		{FP8, []float32{448, 1, -3, 0.1, 17, 19, 0.005}, []float32{448, 1, -3, 0.1015625, 16, 20, 0.005859375}},
		// absmax 4.48: scale 0.01, 1/0.01 rounded to float32 first.
		{FP8, []float32{4.48, 0}, []float32{448 * float32(4.48/448), 0}},
		// absmax 0: the smallest scale, 1/(448·512), and zeros.
		{FP8, []float32{0, 0}, []float32{0, 0}},
		// absmax 6: G = 448, the first block's scale E4M3(448) = 448, d = 1:
		// 5 → 4 and 1.75 → 2 and 3.5 → 4 and 0.25 → 0 (ties to even),
		// 2.5 → 2, -1.25 → -1, 0.75 → 1. The second block's max 0.3:
		// 0.3/d = 6.1 → 6, 0.1/d = 2.04 → 2, 0.2/d = 4.07 → 4.
		{FP4,
			[]float32{6, 5, 1.75, 0.25, 3.5, 2.5, -1.25, 0.75, 0, 1, 2, 3, 4, -6, 5.5, 0.2,
				0.3, 0.1, -0.2},
			[]float32{6, 4, 2, 0, 4, 2, -1, 1, 0, 1, 2, 3, 4, -6, 6, 0,
				6 * d22, 2 * d22, -4 * d22}},
		{FP4, []float32{0, 0, 0}, []float32{0, 0, 0}},
	} {
		got := slices.Clone(c.in)
		Row(c.mode, got)
		if !slices.Equal(got, c.out) {
			t.Errorf("%s of %v = %v, want %v", c.mode, c.in, got, c.out)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, m := range []string{"", Int8, FP8, FP4} {
		if err := Check(m); err != nil {
			t.Error(err)
		}
	}
	if err := Check("int4"); err == nil {
		t.Error("int4 accepted")
	}
}

// ExampleRow rounds a token's activations to int8 at absmax/127: here
// steps of 0.01, -63.5 steps rounding to the even -64.
func ExampleRow() {
	x := []float32{1.27, -0.635, 0.3175}
	Row(Int8, x)
	fmt.Printf("%.4f\n", x)
	// Output: [1.2700 -0.6400 0.3200]
}
