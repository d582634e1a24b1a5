package compressed

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/lookup/lookuptest"
	"logitscope/internal/format/safetensors"
)

// quantized is a writer's tensors for an 8 x 32 weight, as a map.
func quantized(t *testing.T, f lookup.Format, err error) (lookup.Format, lookuptest.Map) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	w := make([]float32, 8*32)
	for i := range w {
		w[i] = float32(i%7) - 3
	}
	ts, err := f.Quantize("m", w, 8, 32)
	if err != nil {
		t.Fatal(err)
	}
	m := lookuptest.Map{}
	for _, x := range ts {
		m[x.Name] = x
	}
	return f, m
}

func edit(name string, fn func(*safetensors.Tensor)) func(lookuptest.Map) {
	return func(m lookuptest.Map) {
		x := m[name]
		fn(&x)
		m[name] = x
	}
}

// TestMatrixErrors checks that a tensor of the wrong dtype or shape, or a
// missing one, is refused naming the tensor and what was wrong.
func TestMatrixErrors(t *testing.T) {
	w4, _ := W4A16(16, true, "")
	w4a, _ := W4A16(16, false, "")
	w4g, _ := W4A16(16, true, "group")
	w8, _ := W8A8()
	fp8, _ := FP8("tensor", false)
	nv, _ := NVFP4(1)
	for _, tc := range []struct {
		name  string
		f     lookup.Format
		edit  func(lookuptest.Map)
		wants string
	}{
		{"packed dtype", w4, edit("m.weight_packed", func(x *safetensors.Tensor) { x.DType = safetensors.U32 }), "m.weight_packed: dtype U32, want [I32]"},
		{"packed shape", w4, edit("m.weight_packed", func(x *safetensors.Tensor) { x.Shape = []int{4, 8}; x.Data = x.Data[:128] }), "m.weight_packed: shape [4 8], want [8 4] for weight_shape (8, 32) at 4 bits"},
		{"shape missing", w4, func(m lookuptest.Map) { delete(m, "m.weight_shape") }, "m.weight_shape"},
		{"shape dtype", w4, edit("m.weight_shape", func(x *safetensors.Tensor) { x.DType = safetensors.F64 }), "m.weight_shape: dtype F64"},
		{"shape negative", w4, edit("m.weight_shape", func(x *safetensors.Tensor) {
			x.Data = append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, x.Data[8:]...)
		}), "m.weight_shape: [-1 32]"},
		{"scale dtype", w4, edit("m.weight_scale", func(x *safetensors.Tensor) { x.DType = safetensors.I16 }), "m.weight_scale: dtype I16"},
		{"scale shape", w4, edit("m.weight_scale", func(x *safetensors.Tensor) { x.Shape = []int{2, 8} }), "m.weight_scale: shape [2 8], want [8 2] for strategy \"group\""},
		{"scale bytes", w4, edit("m.weight_scale", func(x *safetensors.Tensor) { x.Data = x.Data[1:] }), "m.weight_scale: 31 bytes for BF16 shape [8 2]"},
		{"zero missing", w4a, func(m lookuptest.Map) { delete(m, "m.weight_zero_point") }, "m.weight_zero_point"},
		{"zero shape", w4a, edit("m.weight_zero_point", func(x *safetensors.Tensor) { x.Shape = []int{2, 1} }), "m.weight_zero_point: shape [2 1], want [1 2] (packed along the output dim)"},
		{"zero f32 scale", w4a, edit("m.weight_scale", func(x *safetensors.Tensor) {
			x.DType = safetensors.F32
			x.Data = append(x.Data, x.Data...)
		}), "m.weight_scale: F32 scales with zero points"},
		{"gidx missing", w4g, func(m lookuptest.Map) { delete(m, "m.weight_g_idx") }, "m.weight_g_idx: missing, and config_groups.group_0.weights.actorder is \"group\""},
		{"gidx range", w4g, edit("m.weight_g_idx", func(x *safetensors.Tensor) { x.Data[0] = 9 }), "m.weight_g_idx: column 0 in group 9 of 2"},
		{"gidx uneven", w4g, edit("m.weight_g_idx", func(x *safetensors.Tensor) {
			for c := range 32 {
				x.Data[4*c] = byte(c % 16 / 15) // 30 columns in group 0, 2 in group 1
			}
		}), "m.weight_g_idx: group 0 has 30 columns, want 16"},
		{"int8 weight dtype", w8, edit("m.weight", func(x *safetensors.Tensor) { x.DType = safetensors.U8 }), "m.weight: dtype U8, want [I8]"},
		{"int8 weight 1-d", w8, edit("m.weight", func(x *safetensors.Tensor) { x.Shape = []int{256} }), "m.weight: shape [256], want (out, in)"},
		{"channel scale", w8, edit("m.weight_scale", func(x *safetensors.Tensor) { x.Shape = []int{1, 8} }), "m.weight_scale: shape [1 8], want [8 1]"},
		{"fp8 NaN", fp8, edit("m.weight", func(x *safetensors.Tensor) { x.Data[33] = 0xFF }), "m.weight: NaN (E4M3 byte 0xff) at (1, 1)"},
		{"fp8 tensor scale", fp8, edit("m.weight_scale", func(x *safetensors.Tensor) { x.Shape = []int{2}; x.Data = append(x.Data, x.Data...) }), "m.weight_scale: shape [2], want [1]"},
		{"nvfp4 scale dtype", nv, edit("m.weight_scale", func(x *safetensors.Tensor) { x.DType = safetensors.U8 }), "m.weight_scale: dtype U8, want [F8_E4M3]"},
		{"nvfp4 scale NaN", nv, edit("m.weight_scale", func(x *safetensors.Tensor) { x.Data[3] = 0x7F }), "m.weight_scale: NaN (E4M3 byte 0x7f) at 3"},
		{"nvfp4 global zero", nv, edit("m.weight_global_scale", func(x *safetensors.Tensor) { x.Data = safetensors.EncodeF32([]float32{0}) }), "m.weight_global_scale: 0, want a positive finite divisor"},
		{"nvfp4 global shape", nv, edit("m.weight_global_scale", func(x *safetensors.Tensor) { x.Shape = []int{2}; x.Data = append(x.Data, x.Data...) }), "m.weight_global_scale: shape [2]"},
		{"nvfp4 packed shape", nv, edit("m.weight_packed", func(x *safetensors.Tensor) { x.Shape = []int{128} }), "m.weight_packed: shape [128], want (out, in/2)"},
	} {
		f, m := quantized(t, tc.f, nil)
		tc.edit(m)
		_, err := f.Matrix(m, "m")
		if err == nil || !strings.Contains(err.Error(), tc.wants) {
			t.Errorf("%s: %v\nwant an error containing %q", tc.name, err, tc.wants)
		}
	}
	// A module the config ignores has no matrix.
	if _, err := w4.Matrix(lookuptest.Map{}, "lm_head"); err == nil || !strings.Contains(err.Error(), "lm_head: ignored") {
		t.Errorf("lm_head: %v", err)
	}
}

// TestE4M3 checks the FP8 table's landmarks and that rounding takes
// every finite value to itself and midpoints to the even neighbour.
func TestE4M3(t *testing.T) {
	for b, want := range map[byte]float32{0x00: 0, 0x01: 0x1p-9, 0x07: 7 * 0x1p-9, 0x08: 0x1p-6, 0x38: 1, 0x7E: 448, 0xFE: -448, 0xC4: -3} {
		if E4M3[b] != want {
			t.Errorf("E4M3[%#02x] = %v, want %v", b, E4M3[b], want)
		}
	}
	if !math.IsNaN(float64(E4M3[0x7F])) || !math.IsNaN(float64(E4M3[0xFF])) {
		t.Error("0x7F and 0xFF are NaN")
	}
	for b := range 256 {
		if b == 0x80 || isNaNE4M3(byte(b)) {
			continue
		}
		if got := ToE4M3(float64(E4M3[b])); got != byte(b) {
			t.Errorf("ToE4M3(%v) = %#02x, want %#02x", E4M3[b], got, b)
		}
	}
	for _, tc := range []struct {
		x    float64
		want byte
	}{
		{1.0625, 0x38},  // between 1 (m=0) and 1.125 (m=1): even, 1
		{1.1875, 0x3A},  // between 1.125 (m=1) and 1.25 (m=2): even, 1.25
		{1.07, 0x39},    // nearer 1.125
		{0x1p-10, 0x00}, // half the smallest subnormal: to 0
		{3 * 0x1p-10, 0x02},
		{1000, 0x7E}, // saturates
		{-1.0625, 0xB8},
	} {
		if got := ToE4M3(tc.x); got != tc.want {
			t.Errorf("ToE4M3(%v) = %#02x, want %#02x", tc.x, got, tc.want)
		}
	}
}

// TestE2M1 checks cast_to_fp4's rounding boundaries, transcribed from
// compressed-tensors: [0, 0.25] → 0, (0.25, 0.75) → 0.5, [0.75, 1.25] → 1,
// (1.25, 1.75) → 1.5, [1.75, 2.5] → 2, (2.5, 3.5) → 3, [3.5, 5] → 4, > 5 → 6.
func TestE2M1(t *testing.T) {
	for _, tc := range []struct {
		x    float64
		want float32
	}{
		{0.25, 0}, {0.26, 0.5}, {0.74, 0.5}, {0.75, 1}, {1.25, 1}, {1.26, 1.5}, {1.75, 2},
		{2.5, 2}, {2.51, 3}, {3.5, 4}, {5, 4}, {5.01, 6}, {6, 6}, {-0.75, -1}, {-5.5, -6},
	} {
		if got := E2M1[toE2M1(tc.x)]; got != tc.want {
			t.Errorf("toE2M1(%v) = %v, want %v", tc.x, got, tc.want)
		}
	}
	if toE2M1(-0.1) != 8 || toE2M1(0) != 0 {
		t.Error("a small negative value is −0 (code 8), zero is code 0")
	}
}

// TestQuantizeErrors covers weights a writer cannot store.
func TestQuantizeErrors(t *testing.T) {
	w4, _ := W4A16(128, true, "")
	nv, _ := NVFP4(0)
	blk, _ := Parse(json.RawMessage(cfg("float-quantized", `{"targets":["Linear"],"weights":{"num_bits":8,"type":"float","strategy":"block","block_structure":[2,2]}}`)))
	for _, tc := range []struct {
		f          lookup.Format
		module     string
		rows, cols int
		wants      string
	}{
		{w4, "m", 8, 100, "100 inputs are not a whole number of groups of 128"},
		{w4, "lm_head", 8, 128, "lm_head: not quantized by this config"},
		{w4, "m", 0, 128, "shape (0, 128)"},
		{nv, "m", 8, 40, "whole groups of 16"},
		{blk, "m", 8, 8, "block scales"},
	} {
		_, err := tc.f.Quantize(tc.module, make([]float32, tc.rows*tc.cols), tc.rows, tc.cols)
		if err == nil || !strings.Contains(err.Error(), tc.wants) {
			t.Errorf("%s (%d, %d): %v, want %q", tc.f.Name(), tc.rows, tc.cols, err, tc.wants)
		}
	}
}

// TestBlock reads FP8 block scales (llm-compressor's FP8_BLOCK layout),
// which the writer does not make: a 3 x 5 weight in 2 x 2 blocks.
func TestBlock(t *testing.T) {
	f, err := Parse(json.RawMessage(cfg("float-quantized", `{"targets":["Linear"],"weights":{"num_bits":8,"type":"float","strategy":"block","block_structure":[2,2]}}`)))
	if err != nil {
		t.Fatal(err)
	}
	q := make([]byte, 15)
	for i := range q {
		q[i] = 0x38 // 1.0
	}
	scales := []float32{1, 2, 3, 4, 5, 6} // (ceil(3/2), ceil(5/2)) = (2, 3)
	ts := []safetensors.Tensor{
		{Name: "m.weight", DType: safetensors.F8E4M3, Shape: []int{3, 5}, Data: q},
		{Name: "m.weight_scale", DType: safetensors.F32, Shape: []int{2, 3}, Data: safetensors.EncodeF32(scales)},
	}
	m, err := f.Matrix(lookuptest.Write(t, ts), "m")
	if err != nil {
		t.Fatal(err)
	}
	want := []float32{1, 1, 2, 2, 3, 1, 1, 2, 2, 3, 4, 4, 5, 5, 6}
	got := m.Dequantize()
	ref := reference(t, floatQuantized, f.(*Format).scheme("m").raw, ts, "m")
	for i := range want {
		if got[i] != want[i] || float64(want[i]) != ref[i] {
			t.Errorf("W[%d] = %v, reference %v, want %v", i, got[i], ref[i], want[i])
		}
	}
}

// BenchmarkMatrix transcodes a 4096 x 4096 matrix written by each CLI
// writer.
func BenchmarkMatrix(b *testing.B) {
	const n = 4096
	w := make([]float32, n*n)
	for i := range w {
		w[i] = float32(i%97)/97 - 0.5
	}
	for _, name := range []string{"ct-w4a16", "ct-w8a8", "ct-fp8", "ct-nvfp4"} {
		f, err := ByName(name)
		if err != nil {
			b.Fatal(err)
		}
		ts, err := f.Quantize("m", w, n, n)
		if err != nil {
			b.Fatal(err)
		}
		m := lookuptest.Map{}
		for _, x := range ts {
			m[x.Name] = x
		}
		b.Run(name, func(b *testing.B) {
			b.SetBytes(n * n) // per weight
			for b.Loop() {
				if _, err := f.Matrix(m, "m"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
