package main

import (
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/format/dump"
	"logitscope/internal/format/receipt"
)

// An EXL3 variant of one routed expert (K4, MCG: the seed's) captures on
// the CPU, natively and in engine.wasm to the same bytes, routes
// included; its receipt names the variant and its policy; its logits
// differ from f32's, by little; the GPU engine refuses it by name.
func TestCaptureEXL3(t *testing.T) {
	wasm := engineWasm(t)
	dir := moeModel(t)
	got, err := run(t, quantizeCmd, "--model", dir, "--scheme", "exl3-k4", "--only", `layers\.1\.mlp\.experts\.0\.`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "wrote exl3-k4-mcg variant: 3 tensors in exl3-k4-mcg, 57 matrices kept in f32") {
		t.Fatalf("quantize said:\n%s", got)
	}
	out := t.TempDir()
	panel := panelFile(t)
	var sums [2]string
	for i, rt := range []string{"native", "wasm"} {
		path := filepath.Join(out, rt+".safetensors")
		if _, err := run(t, captureCmd, "--model", dir, "--variant", "exl3-k4", "--device", "cpu", "--runtime", rt, "--engine", wasm,
			"--panel", panel, "--window", "48", "--dump-logits", path); err != nil {
			t.Fatalf("%s: %v", rt, err)
		}
		sums[i] = fileSHA(t, path)
	}
	if sums[0] != sums[1] {
		t.Fatal("the wasm CPU dump of the EXL3 variant differs from the native CPU one")
	}
	test := filepath.Join(out, "native.safetensors")
	r, err := receipt.Read(receipt.Path(test))
	if err != nil {
		t.Fatal(err)
	}
	if r.Variant != "exl3-k4-mcg" || !strings.Contains(r.VariantPolicy, `--only "layers\\.1\\.mlp\\.experts\\.0\\."`) {
		t.Fatalf("receipt variant %q, policy %q", r.Variant, r.VariantPolicy)
	}
	ref := filepath.Join(out, "f32.safetensors")
	if _, err := run(t, captureCmd, "--model", dir, "--device", "cpu", "--panel", panel, "--window", "48", "--dump-logits", ref); err != nil {
		t.Fatal(err)
	}
	a, _, _ := dump.ReadAny(ref)
	b, _, _ := dump.ReadAny(test)
	var diff, norm float64
	for i := range a.Data {
		d := float64(a.Data[i] - b.Data[i])
		diff, norm = diff+d*d, norm+float64(a.Data[i])*float64(a.Data[i])
	}
	if diff == 0 || diff > 1e-2*norm {
		t.Fatalf("EXL3 logits off f32's by %.3g of their energy: want some, and little", diff/norm)
	}
	t.Logf("one expert in EXL3 K4: logits off f32's by %.2g of their energy", diff/norm)
	if _, err := run(t, captureCmd, "--model", dir, "--variant", "exl3-k4", "--device", "gpu", "--max-new", "2", "--dump-logits", filepath.Join(out, "gpu.dump"), "Hi"); err == nil ||
		!strings.Contains(err.Error(), "exl3-k4-mcg: the GPU engine does not run EXL3 layers yet: use the CPU engine (--device cpu)") {
		t.Fatalf("the GPU engine on an EXL3 variant: %v", err)
	}
}
