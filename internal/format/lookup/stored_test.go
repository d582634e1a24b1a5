package lookup

import (
	"strings"
	"testing"

	"logitscope/internal/format/safetensors"
)

// TestRead: a tensor whose bytes do not match its shape, or whose shape
// overflows, is refused naming it; Want names dtype and shape.
func TestRead(t *testing.T) {
	m := Memory{}.Put(
		safetensors.Tensor{Name: "ok", DType: safetensors.F16, Shape: []int{2, 3}, Data: make([]byte, 12)},
		safetensors.Tensor{Name: "short", DType: safetensors.F32, Shape: []int{2, 3}, Data: make([]byte, 20)},
		safetensors.Tensor{Name: "huge", DType: safetensors.U32, Shape: []int{1 << 40, 1 << 40}},
		safetensors.Tensor{Name: "neg", DType: safetensors.U8, Shape: []int{-1}},
		safetensors.Tensor{Name: "odd", DType: "Q4", Shape: []int{1}, Data: []byte{0}},
	)
	for name, want := range map[string]string{
		"short":   "short: 20 bytes for shape [2 3] of F32, want 24",
		"huge":    "huge: shape [1099511627776 1099511627776] is too large",
		"neg":     "neg: shape [-1]",
		"odd":     `odd: unknown dtype "Q4"`,
		"missing": `no tensor "missing"`,
	} {
		if _, err := Read(m, name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", name, err, want)
		}
	}
	s, err := Read(m, "ok")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		shape  []int
		dtypes []safetensors.DType
		want   string
	}{
		{[]int{2, 3}, []safetensors.DType{safetensors.F16}, ""},
		{[]int{-1, 3}, []safetensors.DType{safetensors.BF16, safetensors.F16}, ""},
		{[]int{2, 3}, []safetensors.DType{safetensors.F32}, "ok: dtype F16, want [F32]"},
		{[]int{3, 2}, []safetensors.DType{safetensors.F16}, "ok: shape [2 3], want [3 2]"},
		{[]int{6}, []safetensors.DType{safetensors.F16}, "ok: shape [2 3], want [6]"},
	} {
		err := s.Want(tc.shape, tc.dtypes...)
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Want(%v, %v): %v, want %q", tc.shape, tc.dtypes, err, tc.want)
		}
	}
	if f, err := s.Floats(); err != nil || len(f) != 6 {
		t.Errorf("Floats: %v, %v", f, err)
	}
}
