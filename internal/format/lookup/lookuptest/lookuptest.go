// Package lookuptest holds what the tests of every lookup.Format share:
// a table of config cases, the config fuzz body, golden checkpoints read
// from testdata, and random matrices for the engine's tests.
package lookuptest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/safetensors"
)

// Parser is a format package's Parse.
type Parser func(json.RawMessage) (lookup.Format, error)

// Case is one config: the error it must give (a substring), or its Name
// and modules it must leave float or quantize.
type Case struct {
	Config, Name, Err string
	Floats, Quantized []string
}

// Parse runs the cases; each config that parses must also write a Config
// that parses back to the same Name and Config.
func Parse(t *testing.T, parse Parser, cases []Case) {
	t.Helper()
	for _, tc := range cases {
		f, err := parse(json.RawMessage(tc.Config))
		if tc.Err != "" || err != nil {
			if err == nil || tc.Err == "" || !strings.Contains(err.Error(), tc.Err) {
				t.Errorf("%s: error %v, want %q", tc.Config, err, tc.Err)
			}
			continue
		}
		if f.Name() != tc.Name {
			t.Errorf("%s: name %q, want %q", tc.Config, f.Name(), tc.Name)
		}
		for _, m := range tc.Floats {
			if f.Quantized(m) {
				t.Errorf("%s: %s quantized, want float", tc.Config, m)
			}
		}
		for _, m := range tc.Quantized {
			if !f.Quantized(m) {
				t.Errorf("%s: %s float, want quantized", tc.Config, m)
			}
		}
		if g, err := parse(f.Config()); err != nil || g.Name() != f.Name() || string(g.Config()) != string(f.Config()) {
			t.Errorf("%s: Config %s reads back as %v, %v", tc.Config, f.Config(), g, err)
		}
	}
}

// FuzzConfig is a fuzz body for Parse: any bytes are refused, or parse to
// a format whose Config parses again and which answers Quantized.
func FuzzConfig(t *testing.T, parse Parser, data []byte) {
	q, err := parse(json.RawMessage(data))
	if err != nil {
		return
	}
	if _, err := parse(q.Config()); err != nil {
		t.Fatalf("Config %s of %s does not parse: %v", q.Config(), data, err)
	}
	q.Quantized("model.layers.0.mlp.experts.3.up_proj")
}

// File serves an opened safetensors file as lookup.Tensors.
type File struct{ *safetensors.File }

// Raw is a tensor's bytes and description.
func (f File) Raw(name string) ([]byte, safetensors.TensorInfo, error) {
	info, ok := f.Info(name)
	if !ok {
		return nil, info, fmt.Errorf("no tensor %q", name)
	}
	b, err := f.ReadRaw(name)
	return b, info, err
}

// Golden reads testdata/golden.json into v and opens
// testdata/golden.safetensors for the test's duration.
func Golden(t *testing.T, v any) File {
	t.Helper()
	raw, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open("testdata/golden.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return File{f}
}

// Matrix reads module and compares its shape and every weight with
// want's, reporting the first that differs.
func Matrix(t *testing.T, f lookup.Format, ts lookup.Tensors, module string, rows, cols int, want []float32) {
	t.Helper()
	m, err := f.Matrix(ts, module)
	if err != nil {
		t.Errorf("%s: %v", module, err)
		return
	}
	if m.Rows != rows || m.Cols != cols {
		t.Errorf("%s: (%d, %d), want (%d, %d)", module, m.Rows, m.Cols, rows, cols)
		return
	}
	for i, v := range m.Dequantize() {
		if v != want[i] {
			t.Errorf("%s: w[%d, %d] = %v, want %v", module, i/cols, i%cols, v, want[i])
			return
		}
	}
}

// Weights is a (rows, cols) matrix of normal weights of deviation 0.05,
// the same for the same seed.
func Weights(rows, cols int, seed uint64) []float32 {
	rng := rand.New(rand.NewPCG(seed, 7))
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.05)
	}
	return w
}

// Bench quantizes a (rows, cols) matrix with f, then times Matrix reading
// it back, reporting the stored bits per weight (every tensor Quantize
// writes, over rows·cols).
func Bench(b *testing.B, f lookup.Format, rows, cols int) {
	ts, err := f.Quantize("model.layers.0.mlp.up_proj", Weights(rows, cols, 1), rows, cols)
	if err != nil {
		b.Fatal(err)
	}
	var n int
	for _, t := range ts {
		n += len(t.Data)
	}
	m := lookup.Memory{}.Put(ts...)
	b.SetBytes(int64(n))
	for b.Loop() {
		if _, err := f.Matrix(m, "model.layers.0.mlp.up_proj"); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(8*n)/float64(rows*cols), "bits/weight")
}
