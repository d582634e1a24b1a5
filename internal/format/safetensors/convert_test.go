package safetensors

import (
	"math"
	"strings"
	"testing"
)

func posInf() float64 { return math.Inf(1) }

func f32(bits uint32) float32 { return math.Float32frombits(bits) }

func TestToBF16(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   float32
		want uint16
	}{
		{"one", 1, 0x3f80},
		{"negative zero", f32(0x80000000), 0x8000},
		{"tie rounds down to even", f32(0x3f808000), 0x3f80},
		{"tie rounds up to even", f32(0x3f818000), 0x3f82},
		{"above tie rounds up", f32(0x3f808001), 0x3f81},
		{"below tie rounds down", f32(0x3f807fff), 0x3f80},
		{"carry into exponent", f32(0x3fffffff), 0x4000},
		{"max float rounds to inf", math.MaxFloat32, 0x7f80},
		{"+inf", float32(math.Inf(1)), 0x7f80},
		{"-inf", float32(math.Inf(-1)), 0xff80},
		{"quiet NaN", f32(0x7fc00000), 0x7fc0},
		{"NaN with low payload stays NaN", f32(0x7f800001), 0x7fc0},
		{"negative NaN keeps sign", f32(0xffc00001), 0xffc0},
		{"smallest subnormal rounds to zero", f32(0x00000001), 0x0000},
		{"subnormal tie to even (zero)", f32(0x00008000), 0x0000},
		{"subnormal tie to even (up)", f32(0x00018000), 0x0002},
		{"exact subnormal", f32(0x00010000), 0x0001},
	} {
		if got := ToBF16(tc.in); got != tc.want {
			t.Errorf("%s: ToBF16(%#08x) = %#04x, want %#04x", tc.name, math.Float32bits(tc.in), got, tc.want)
		}
	}
	if v := FromBF16(ToBF16(float32(math.NaN()))); !math.IsNaN(float64(v)) {
		t.Errorf("NaN round trip = %v", v)
	}
}

func TestToF16(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   float32
		want uint16
	}{
		{"one", 1, 0x3c00},
		{"max half", 65504, 0x7bff},
		{"tie above max half rounds to inf", 65520, 0x7c00},
		{"just below that tie", 65519, 0x7bff},
		{"tie rounds down to even", 1 + 1.0/2048, 0x3c00},
		{"tie rounds up to even", 1 + 3.0/2048, 0x3c02},
		{"smallest normal", 1.0 / 16384, 0x0400},
		{"smallest subnormal", f32(0x33800000), 0x0001},                   // 2^-24
		{"half smallest subnormal ties to zero", f32(0x33000000), 0x0000}, // 2^-25
		{"1.5 smallest subnormal ties to two", f32(0x33c00000), 0x0002},   // 3*2^-25
		{"+inf", float32(math.Inf(1)), 0x7c00},
		{"-inf", float32(math.Inf(-1)), 0xfc00},
	} {
		if got := ToF16(tc.in); got != tc.want {
			t.Errorf("%s: ToF16(%g) = %#04x, want %#04x", tc.name, tc.in, got, tc.want)
		}
	}
	if v := FromF16(ToF16(float32(math.NaN()))); !math.IsNaN(float64(v)) {
		t.Errorf("NaN round trip = %v", v)
	}
	if v := FromF16(0x0001); v != f32(0x33800000) {
		t.Errorf("FromF16(subnormal) = %g", v)
	}
}

func TestDecodeFloat32(t *testing.T) {
	want := []float32{1, -2, 0.5, float32(math.Inf(-1))}
	for _, dt := range []DType{F32, F16, BF16} {
		var raw []byte
		switch dt {
		case F32:
			raw = EncodeF32(want)
		case F16:
			raw = EncodeF16(want)
		case BF16:
			raw = EncodeBF16(want)
		}
		got := make([]float32, len(want))
		if err := DecodeFloat32(dt, raw, got); err != nil {
			t.Fatalf("%s: %v", dt, err)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: got %v, want %v", dt, got, want)
				break
			}
		}
	}
	if err := DecodeFloat32(BF16, make([]byte, 3), make([]float32, 2)); err == nil || !strings.Contains(err.Error(), "needs 4 bytes, got 3") {
		t.Errorf("length mismatch: %v", err)
	}
	if err := DecodeFloat32(I8, make([]byte, 2), make([]float32, 2)); err == nil || !strings.Contains(err.Error(), `"I8"`) {
		t.Errorf("non-float dtype: %v", err)
	}
}
