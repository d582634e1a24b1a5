package mlx

import (
	"encoding/json"
	"testing"

	"logitscope/internal/format/lookup/lookuptest"
)

// TestGolden reads testdata/golden.safetensors, written by golden.py from
// MLX's documented packing (2- to 8-bit, a BF16 embedding, per-layer bits,
// stacked experts), and compares every matrix with golden.json's values.
func TestGolden(t *testing.T) {
	var golden struct {
		Quantization json.RawMessage
		Matrices     map[string]struct {
			Rows, Cols int
			W          []float32
		}
	}
	file := lookuptest.Golden(t, &golden)
	format, err := Parse(golden.Quantization)
	if err != nil {
		t.Fatal(err)
	}
	if len(golden.Matrices) != 13 {
		t.Fatalf("%d golden matrices, want 13", len(golden.Matrices))
	}
	for module, want := range golden.Matrices {
		lookuptest.Matrix(t, format, file, module, want.Rows, want.Cols, want.W)
	}
	if format.Quantized("lm_head") {
		t.Error("lm_head is false in the config, yet Quantized")
	}
}
