// Package ggufmodeltest writes GGUF files of a checkpoint for tests:
// logitscope's own export, and llama.cpp's quantizations of it through the
// llamacpp harness. Tests of every runtime (native, engine.wasm under
// wazero, the page) put them beside a model as a user would.
package ggufmodeltest

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/model/ggufmodel"
	"logitscope/internal/peer/llamacpp"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/internal/sys/tempfile"
)

// Export writes the model in dir as GGUF at dir/name: its own weights
// (scheme "f32", as F32) or its variant of scheme (quantized first when
// missing; q4 as Q4_0, q8 and q6 as Q8_0, bit for bit). It returns the path.
func Export(t testing.TB, dir, scheme, name string) string {
	t.Helper()
	return export(t, dir, scheme, filepath.Join(dir, name))
}

// LlamaCpp writes llama.cpp's quantization ftype (Q4_K_M, Q6_K, …) of
// the model in dir at dir/name: llama.cpp's own quantizer on the f32
// export, as a llama.cpp user would make it. It skips the test when the
// harness is not installed (llamacpp.Harness).
func LlamaCpp(t testing.TB, dir, ftype, name string) string {
	t.Helper()
	h := llamacpp.Harness(t)
	f32 := export(t, dir, "f32", filepath.Join(t.TempDir(), "f32.gguf"))
	out := filepath.Join(dir, name)
	h.QuantizeModel(t, f32, out, ftype)
	return out
}

// Cached is Export kept at dir/gguf/SCHEME.gguf, out of the way of the
// files a server lists beside config.json: written once, whole or not at
// all, and reused, as benchmarks of several packages share it.
func Cached(t testing.TB, dir, scheme string) string {
	t.Helper()
	path := filepath.Join(dir, "gguf", scheme+".gguf")
	if _, err := os.Stat(path); err == nil {
		return path
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	ck, v := open(t, dir, scheme)
	defer ck.Close()
	tmp, err := tempfile.Write(path, func(w io.Writer) error {
		_, err := ggufmodel.Export(w, ck, v)
		return err
	})
	if err == nil {
		err = tempfile.Rename(tempfile.Move{Temp: tmp, Path: path})
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func export(t testing.TB, dir, scheme, path string) string {
	t.Helper()
	ck, v := open(t, dir, scheme)
	defer ck.Close()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ggufmodel.Export(f, ck, v); err != nil {
		f.Close()
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// open opens the checkpoint in dir and its variant of scheme (nil for
// f32), quantized first when missing; the caller closes the checkpoint.
func open(t testing.TB, dir, scheme string) (*checkpoint.Checkpoint, *variant.Variant) {
	t.Helper()
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if scheme == "f32" {
		return ck, nil
	}
	s, err := quant.ParseScheme(scheme)
	if err == nil {
		_, err = variant.Ensure(ck, s, nil)
	}
	var v *variant.Variant
	if err == nil {
		v, err = engine.OpenVariant(ck, scheme)
	}
	if err != nil {
		ck.Close()
		t.Fatal(err)
	}
	return ck, v
}
