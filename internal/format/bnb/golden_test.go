package bnb

import (
	"testing"

	"logitscope/internal/format/lookup/lookuptest"
)

// TestGolden reads testdata/golden.safetensors, written by golden.py as
// transformers saves bitsandbytes 4-bit weights (NF4 and FP4, blocks
// straddling rows, an odd count, double quantization with one and several
// nested blocks), and compares every matrix with golden.json's values and
// the quant state's JSON with the bytes Python's json.dumps wrote.
func TestGolden(t *testing.T) {
	var golden map[string]struct {
		Rows, Cols int
		State      string
		W          []float32
	}
	file := lookuptest.Golden(t, &golden)
	if len(golden) != 5 {
		t.Fatalf("%d golden matrices, want 5", len(golden))
	}
	for module, want := range golden {
		lookuptest.Matrix(t, NF4(false), file, module, want.Rows, want.Cols, want.W)
		st, err := ParseState([]byte(want.State), module)
		if err != nil {
			t.Errorf("%s: %v", module, err)
		} else if got := string(st.Encode()); got != want.State {
			t.Errorf("%s: Encode gives\n%s\nPython's json.dumps\n%s", module, got, want.State)
		}
	}
}
