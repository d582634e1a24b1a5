package e2e

import (
	"testing"
	"time"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/model/synth"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
)

// TestUIEXL3 runs f32 against an EXL3 K4 variant (one routed expert of
// tiny-qwen3-moe's second layer, the seed's format) in the page, on
// WebGPU (exl3.wgsl in Chromium's Tint and SwiftShader) and on
// engine.wasm's CPU path: tokens and logits must match engine.wasm's
// under wazero, within relTol on the GPU, bit for bit on the CPU.
func TestUIEXL3(t *testing.T) {
	RequireUI(t)
	const name = "tiny-qwen3-moe"
	dir := t.TempDir()
	if err := synth.Write(synth.Presets[name], dir, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	const scheme = "exl3-k4-mcg"
	err = variant.Write(ck, quant.Scheme(scheme), variant.DefaultDir(dir, scheme), variant.Options{Policy: &variant.Policy{Only: `layers\.1\.mlp\.experts\.0\.`}})
	ck.Close()
	if err != nil {
		t.Fatal(err)
	}
	site := StartSite(t, SiteModel{name, dir})
	mod := Wazero(t, site)
	spec := snapshot.NewSpec()
	spec.Model, spec.Test, spec.Prompt, spec.MaxNew = name, scheme, "Where does the window end?", 8
	b := NewBrowser(t)
	for _, device := range []string{"gpu", "cpu"} {
		t.Run(device, func(t *testing.T) {
			spec.Device = device
			q := spec.Query()
			q.Set("autorun", "1")
			if state := b.Open(site.URL+"/?"+q.Encode(), 3*time.Minute); state != "done" {
				b.Screenshot("error")
				t.Fatalf("the run ended in %q: %s", state, Eval[string](b, `String(window.logitscope.error)`))
			}
			doc, _ := pageDoc(t, b)
			lg := Eval[pageLogits](b, `window.logitscope.logits`)
			if doc.Spec == nil || doc.Spec.Test != scheme {
				t.Fatalf("the document's spec %+v, want test %s", doc.Spec, scheme)
			}
			if device == "gpu" {
				compareWithWazero(t, mod, nativeDevice(t), dir, doc, lg, relTol)
			} else {
				compareWithWazero(t, mod, nil, dir, doc, lg, 0)
			}
		})
	}
}
