package lookuptest

import (
	"fmt"
	"path/filepath"
	"testing"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/safetensors"
)

// Write writes tensors to a safetensors file in t's temporary directory
// and opens it: the readers see the bytes a hub checkpoint holds.
func Write(t testing.TB, tensors []safetensors.Tensor) File {
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
	return File{f}
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

// Cases is cases written as {quantization_config, the Name it parses to,
// ""} or {quantization_config, "", a part of the error it must be refused
// with}.
func Cases(cs [][3]string) []Case {
	out := make([]Case, len(cs))
	for i, c := range cs {
		out[i] = Case{Config: c[0], Name: c[1], Err: c[2]}
	}
	return out
}
