// Package ggufmodeltest writes GGUF files of a checkpoint for tests:
// logitscope's own export, and llama.cpp's quantizations of it through the
// llamacpp harness. Tests of every runtime (native, engine.wasm under
// wazero, the page) put them beside a model as a user would.
package ggufmodeltest

import (
	"os"
	"path/filepath"
	"testing"

	"logitscope/checkpoint"
	"logitscope/engine"
	"logitscope/ggufmodel"
	"logitscope/llamacpp"
	"logitscope/quant"
	"logitscope/variant"
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

func export(t testing.TB, dir, scheme, path string) string {
	t.Helper()
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	var v *variant.Variant
	if scheme != "f32" {
		s, err := quant.ParseScheme(scheme)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := variant.Ensure(ck, s, nil); err != nil {
			t.Fatal(err)
		}
		if v, err = engine.OpenVariant(ck, scheme); err != nil {
			t.Fatal(err)
		}
	}
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
