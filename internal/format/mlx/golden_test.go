package mlx

import (
	"encoding/json"
	"os"
	"testing"

	"logitscope/internal/format/safetensors"
)

// TestGolden reads testdata/golden.safetensors, written by golden.py from
// MLX's documented packing (2- to 8-bit, a BF16 embedding, per-layer bits,
// stacked experts), and compares every matrix with golden.json's values.
func TestGolden(t *testing.T) {
	raw, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden struct {
		Quantization json.RawMessage
		Matrices     map[string]struct {
			Rows, Cols int
			W          []float32
		}
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open("testdata/golden.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	format, err := Parse(golden.Quantization)
	if err != nil {
		t.Fatal(err)
	}
	if len(golden.Matrices) != 13 {
		t.Fatalf("%d golden matrices, want 13", len(golden.Matrices))
	}
	for module, want := range golden.Matrices {
		m, err := format.Matrix(file{f}, module)
		if err != nil {
			t.Errorf("%s: %v", module, err)
			continue
		}
		if m.Rows != want.Rows || m.Cols != want.Cols {
			t.Errorf("%s: (%d, %d), want (%d, %d)", module, m.Rows, m.Cols, want.Rows, want.Cols)
			continue
		}
		for i, v := range m.Dequantize() {
			if v != want.W[i] {
				t.Errorf("%s: w[%d, %d] = %v, want %v", module, i/m.Cols, i%m.Cols, v, want.W[i])
				break
			}
		}
	}
	if format.Quantized("lm_head") {
		t.Error("lm_head is false in the config, yet Quantized")
	}
}
