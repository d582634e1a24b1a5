// Package lookuptest serves tensors to the hub-format readers' tests: a
// real safetensors file written and reopened (File), and a map of raw
// tensors whose bytes need not match their shape (Map), for fuzzing.
package lookuptest

import (
	"fmt"
	"path/filepath"
	"testing"

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
