package bnb

import (
	"encoding/json"
	"os"
	"testing"

	"logitscope/internal/format/safetensors"
)

// TestGolden reads testdata/golden.safetensors, written by golden.py as
// transformers saves bitsandbytes 4-bit weights (NF4 and FP4, blocks
// straddling rows, an odd count, double quantization with one and several
// nested blocks), and compares every matrix with golden.json's values and
// the quant state's JSON with the bytes Python's json.dumps wrote.
func TestGolden(t *testing.T) {
	raw, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var golden map[string]struct {
		Rows, Cols int
		State      string
		W          []float32
	}
	if err := json.Unmarshal(raw, &golden); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open("testdata/golden.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(golden) != 5 {
		t.Fatalf("%d golden matrices, want 5", len(golden))
	}
	for module, want := range golden {
		m, err := NF4(false).Matrix(file{f}, module)
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
		st, err := ParseState([]byte(want.State), module)
		if err != nil {
			t.Errorf("%s: %v", module, err)
		} else if got := string(st.Encode()); got != want.State {
			t.Errorf("%s: Encode gives\n%s\nPython's json.dumps\n%s", module, got, want.State)
		}
	}
}
