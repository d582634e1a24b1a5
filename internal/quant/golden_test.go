package quant

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

var update = flag.Bool("update", false, "rewrite quant/testdata golden files")

// goldenInput is a 3×70 matrix (G = 3: padding and an odd scale count) from
// a fixed integer generator, so it is the same on every platform and Go
// version. Row 1 has an all-zero middle group and row 2 a large outlier.
func goldenInput() []float32 {
	const rows, cols = 3, 70
	w := make([]float32, rows*cols)
	state := uint32(12345)
	for i := range w {
		state = state*1664525 + 1013904223
		w[i] = (float32(state>>8)/(1<<24) - 0.5) * 0.1
	}
	for c := 32; c < 64; c++ {
		w[1*cols+c] = 0
	}
	w[2*cols+40] = 3.5
	return w
}

// TestGoldenFiles pins the complete encoding of a small tensor for each
// scheme; the files are what a WGSL decoder test can be checked against.
// Regenerate with: go test ./internal/quant/ -run GoldenFiles -update
func TestGoldenFiles(t *testing.T) {
	w := goldenInput()
	for _, s := range Schemes {
		blob, err := Quantize(s, w, 3, 70)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", "golden_3x70_"+string(s)+".bin")
		if *update {
			if err := os.WriteFile(path, blob, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to create it)", err)
		}
		if !bytes.Equal(blob, want) {
			t.Errorf("%s: encoding of the golden input differs from %s", s, path)
		}
		// The file itself must agree with the naive encoder, so that -update
		// cannot bless a broken encoder.
		if ref := refEncode(t, s, w, 3, 70); !slices.Equal(toWords(want), ref) {
			t.Errorf("%s: %s differs from the naive reference encoding", s, path)
		}
	}
}
