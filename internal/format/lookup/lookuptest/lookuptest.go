// Package lookuptest holds what the hub-format readers' tests share: a
// real safetensors file written and reopened (File), a map of raw tensors
// whose bytes need not match their shape (Map), for fuzzing, and checks
// of Parse's answers and of returned matrices.
package lookuptest

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/safetensors"
)

// File writes tensors to a safetensors file in t's temporary directory
// and opens it: the readers see the bytes a hub checkpoint holds.
func File(t testing.TB, tensors []safetensors.Tensor) *Opened {
	t.Helper()
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := safetensors.WriteFile(path, tensors, nil); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &Opened{f}
}

// Opened is an opened safetensors file serving lookup.Tensors.
type Opened struct{ *safetensors.File }

// Raw is the tensor's bytes and header entry.
func (o *Opened) Raw(name string) ([]byte, safetensors.TensorInfo, error) {
	info, ok := o.Info(name)
	if !ok {
		return nil, info, fmt.Errorf("no tensor %q", name)
	}
	raw, err := o.ReadRaw(name)
	return raw, info, err
}

// Map serves tensors as given, checking nothing.
type Map map[string]safetensors.Tensor

// Raw is the tensor's bytes and header entry.
func (m Map) Raw(name string) ([]byte, safetensors.TensorInfo, error) {
	t, ok := m[name]
	if !ok {
		return nil, safetensors.TensorInfo{}, fmt.Errorf("no tensor %q", name)
	}
	return t.Data, safetensors.TensorInfo{Name: name, DType: t.DType, Shape: t.Shape, Length: int64(len(t.Data))}, nil
}

// Sound fails t unless m passes Check and decodes every row: what a
// reader must return for any input it does not refuse.
func Sound(t testing.TB, name string, m *lookup.Matrix) {
	t.Helper()
	if err := m.Check(); err != nil {
		t.Fatalf("%s: Matrix returned a matrix that fails Check: %v", name, err)
	}
	m.Dequantize()
}

// Parse checks a format's Parse against cases, each {quantization_config,
// the Name it parses to, ""} or {quantization_config, "", a part of the
// error it must be refused with}.
func Parse(t *testing.T, parse func(json.RawMessage) (lookup.Format, error), cases [][3]string) {
	t.Helper()
	for _, c := range cases {
		config, name, wantErr := c[0], c[1], c[2]
		f, err := parse(json.RawMessage(config))
		switch {
		case wantErr != "":
			if err == nil || !strings.Contains(err.Error(), wantErr) {
				t.Errorf("Parse(%s)\n = %v\nwant an error containing %q", config, err, wantErr)
			}
		case err != nil:
			t.Errorf("Parse(%s): %v", config, err)
		case f.Name() != name:
			t.Errorf("Parse(%s).Name() = %q, want %q", config, f.Name(), name)
		}
	}
}
