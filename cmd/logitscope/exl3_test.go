package main

import (
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"logitscope/internal/format/dump"
	"logitscope/internal/format/receipt"
)

// An EXL3 variant of one routed expert and one dense matrix, the attention
// output added onto the residual stream (K4, MCG: the seed's), captures on
// the CPU, natively and in engine.wasm to the same bytes, routes
// included; its receipt names the variant and its policy; its logits
// differ from f32's, by little; the GPU engine, natively and in
// engine.wasm, gives the CPU's routes (but at near ties) and its logits
// to rounding.
func TestCaptureEXL3(t *testing.T) {
	wasm := engineWasm(t)
	dir := moeModel(t)
	got, err := run(t, quantizeCmd, "--model", dir, "--scheme", "exl3-k4", "--only", `layers\.1\.mlp\.experts\.0\.|layers\.0\.self_attn\.o_proj`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "wrote exl3-k4-mcg variant: 4 tensors in exl3-k4-mcg, 56 matrices kept in f32") {
		t.Fatalf("quantize said:\n%s", got)
	}
	out := t.TempDir()
	panel := panelFile(t)
	var sums [2]string
	for i, rt := range []string{"native", "wasm"} {
		path := filepath.Join(out, rt+".safetensors")
		if _, err := run(t, captureCmd, "--model", dir, "--variant", "exl3-k4", "--device", "cpu", "--runtime", rt, "--engine", wasmOnly(rt, wasm),
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
	if r.Variant != "exl3-k4-mcg" || !strings.Contains(r.VariantPolicy, `--only "layers\\.1\\.mlp\\.experts\\.0\\.|layers\\.0\\.self_attn\\.o_proj"`) {
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
	if diff == 0 || diff > 0.1*norm {
		t.Fatalf("EXL3 logits off f32's by %.3g of their energy: want some, and little", diff/norm)
	}
	t.Logf("one expert and an o_proj in EXL3 K4: logits off f32's by %.2g of their energy", diff/norm)
	// The GPU, natively and in engine.wasm, to the same bytes, routes the
	// CPU's and logits within the GPU's rounding of them.
	var gpu [2]string
	for i, rt := range []string{"native", "wasm"} {
		gpu[i] = filepath.Join(out, "gpu-"+rt+".safetensors")
		if _, err := run(t, captureCmd, "--model", dir, "--variant", "exl3-k4", "--device", "gpu", "--runtime", rt, "--engine", wasmOnly(rt, wasm),
			"--panel", panel, "--window", "48", "--dump-logits", gpu[i]); err != nil {
			t.Fatalf("gpu %s: %v", rt, err)
		}
	}
	if fileSHA(t, gpu[0]) != fileSHA(t, gpu[1]) {
		t.Fatal("the wasm GPU dump of the EXL3 variant differs from the native one")
	}
	g, _, err := dump.ReadAny(gpu[0])
	if err != nil {
		t.Fatal(err)
	}
	// A row whose routing was a near tie may go to another expert on the
	// GPU, whose sums round differently (here: K4 o_proj, one row in
	// about a thousand): the logits are compared where the routes agree.
	var worst float64
	other := 0
	for i := range g.Rows {
		if !reflect.DeepEqual(g.Routes.Row(i), b.Routes.Row(i)) {
			other++
			continue
		}
		for j, x := range g.Row(i) {
			worst = max(worst, math.Abs(float64(x-b.Row(i)[j])))
		}
	}
	t.Logf("EXL3 on the GPU: %d of %d rows routed otherwise; elsewhere max |gpu − cpu| %.2e", other, g.Rows, worst)
	if worst > 1e-3 || other > g.Rows/200 {
		t.Fatalf("the GPU's EXL3 logits differ from the CPU's by %g where routed alike, and %d rows are routed otherwise", worst, other)
	}
}
