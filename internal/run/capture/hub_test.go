package capture

import (
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/model"
	"logitscope/internal/model/hubquant"
	"logitscope/internal/model/synth"
	"logitscope/internal/model/synth/synthtest"
)

// gptqDir writes ck's GPTQ checkpoint as quantize --format gptq does.
func gptqDir(t *testing.T, ck *checkpoint.Checkpoint) string {
	t.Helper()
	f, err := hubquant.Writers["gptq"](hubquant.Options{Bits: 4, GroupSize: 32, Sym: true})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "tiny-gptq")
	if err := hubquant.Write(ck, f, dir, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestHubVariant: a hub-quantized directory given as the variant opens
// as the quantized weights of the model, runs natively, and its format
// and fingerprint go into the receipt and the chain's contract; another
// model's is refused.
func TestHubVariant(t *testing.T) {
	ck := synthtest.Checkpoint(t, synth.Presets["tiny"], 0)
	dir := gptqDir(t, ck)
	g, err := model.GeometryOf(ck.Config)
	if err != nil {
		t.Fatal(err)
	}
	var eo engine.Options
	c := &Capture{Variant: VariantLabel(dir)}
	if err := openWeights(ck, dir, g, &eo, c); err != nil {
		t.Fatal(err)
	}
	defer eo.Quantized.(*hubquant.Weights).Close()
	if eo.Variant != nil || eo.GGUF != nil || eo.Quantized == nil {
		t.Fatalf("options %+v: want the quantized weights only", eo)
	}
	hub, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer hub.Close()
	sum, _ := hub.Fingerprint()
	if c.Hub == nil || c.Hub.Format != "gptq 4-bit g32 sym" || c.Hub.SHA256 != sum || c.Variant != "tiny-gptq" {
		t.Errorf("capture records %+v as %q, want gptq 4-bit g32 sym, %s", c.Hub, c.Variant, sum)
	}
	inv, err := inventory(ck, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ch, err := links(ck, inv, c, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ct := ch.Contract; ct.Scheme != c.Hub.Format || ct.Hub != sum || ct.GGUF != "" || ct.Manifest != "" {
		t.Errorf("contract %+v", ct)
	}
	// engine.wasm runs it too (as the page does), with float32
	// activations; rounded ones run natively.
	if rt, _, err := runtimeFor(ck, dir, Options{Runtime: "wasm"}); rt != "wasm" || err != nil {
		t.Errorf("wasm runtime: %s, %v", rt, err)
	}
	if rt, note, err := runtimeFor(ck, dir, Options{Runtime: "auto", Activations: "format"}); rt != "native" || !strings.Contains(note, "rounded activations") || err != nil {
		t.Errorf("auto runtime with activations format: %s (%s), %v", rt, note, err)
	}
	if _, _, err := runtimeFor(ck, dir, Options{Runtime: "wasm", Activations: "int8"}); err == nil || !strings.Contains(err.Error(), "native engine only") {
		t.Errorf("wasm runtime with int8 activations: %v", err)
	}

	// Commands that read logitscope variants only (export, sensitivity)
	// say what the directory is.
	if _, err := engine.OpenVariant(ck, dir); err == nil || !strings.Contains(err.Error(), "not a logitscope variant") {
		t.Errorf("OpenVariant: %v", err)
	}

	other := synthtest.Checkpoint(t, synth.Presets["tiny-llama"], 0)
	if err := openWeights(other, dir, g, &engine.Options{}, &Capture{}); err == nil || !strings.Contains(err.Error(), "another model") {
		t.Errorf("another model's variant: %v", err)
	}
}
