package e2e

import (
	"testing"
	"time"

	"logitscope/checkpoint"
	"logitscope/quant"
	"logitscope/snapshot"
	"logitscope/synth"
	"logitscope/variant"
)

// families are the synthetic presets whose architecture makes the page's
// WebGPU run dispatch what the demo's does not: Qwen3's q/k norms and
// Mistral's sliding window. tiny-llama3 is left out: its rope_scaling only
// changes the frequency table engine.wasm computes and uploads, which
// wazero computes in the same wasm, and a case costs about 6 s.
var families = []string{"tiny-qwen3", "tiny-mistral"}

// familyModel writes preset (seed 0) into a temporary dir with its q4
// variant, as a user would serve it.
func familyModel(t *testing.T, preset string) string {
	t.Helper()
	dir := t.TempDir()
	if err := synth.Write(synth.Presets[preset], dir, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if _, err := variant.Ensure(ck, quant.Q4, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestUIFamilies opens an autorun link per model family, served next to
// the demo: f32 against q4, greedy, on WebGPU (SwiftShader) and then on
// engine.wasm's CPU path in the same browser. Each run's tokens and logits
// must match the same requests through engine.wasm under wazero: within
// relTol on gogpu/wgpu + lavapipe, bit for bit on its CPU path.
func TestUIFamilies(t *testing.T) {
	RequireUI(t)
	var models []SiteModel
	for _, name := range families {
		models = append(models, SiteModel{name, familyModel(t, name)})
	}
	site := StartSite(t, models...)
	mod := Wazero(t, site)

	for _, m := range models {
		t.Run(m.Name, func(t *testing.T) {
			spec := snapshot.NewSpec()
			spec.Model, spec.Prompt, spec.MaxNew = m.Name, "Where does the window end?", 8
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
					if doc.Spec == nil || doc.Spec.Model != m.Name {
						t.Fatalf("the document's spec %+v, want model %s", doc.Spec, m.Name)
					}
					// A run no longer than the window never leaves a key
					// out of it, and would pass without windowing.
					if w := synth.Presets[m.Name].SlidingWindow; w > 0 && len(doc.PromptIDs) <= w {
						t.Fatalf("%d prompt tokens do not exceed the sliding window of %d", len(doc.PromptIDs), w)
					}
					want := map[string]string{"gpu": "webgpu", "cpu": "cpu"}[device]
					if doc.Ref.Device != want || doc.Test.Device != want {
						t.Errorf("sides ran on %q/%q, want %s", doc.Ref.Device, doc.Test.Device, want)
					}
					if device == "gpu" {
						compareWithWazero(t, mod, nativeDevice(t), m.Dir, doc, lg, relTol)
					} else {
						compareWithWazero(t, mod, nil, m.Dir, doc, lg, 0)
					}
				})
			}
		})
	}
}
