// Package onnxmodeltest writes ONNX exports of a checkpoint for tests, as
// logitscope export --onnx does: the server's listing, the page's onnx
// side and the in-browser peer put them where a user would.
package onnxmodeltest

import (
	"os"
	"path/filepath"
	"testing"

	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/model/onnxmodel"
)

// Export writes the model in dir (its variant v, or its own weights for
// "f32") as an ONNX export for inputs of up to maxLen tokens at out,
// making out's directory.
func Export(t testing.TB, dir, v, out string, maxLen int) {
	t.Helper()
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	vr, err := engine.OpenVariant(ck, v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	err = onnxmodel.Export(f, ck, vr, maxLen)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("%s: %v", out, err)
	}
}
