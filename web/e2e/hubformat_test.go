package e2e

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/format/receipt"
	"logitscope/internal/model/hubquant"
	"logitscope/internal/model/hubquant/hubquanttest"
)

// TestUIHubCheckpoint serves tiny-qwen3 with checkpoints of it under hub/
// in each hub tool's layout and opens an autorun link q4 against each,
// greedy, on the CPU path, and for two of them (GPTQ with desc_act, MLX)
// on WebGPU (SwiftShader) too: lookup.wgsl is one kernel whatever the
// format, whose reader runs in engine.wasm alike on both paths. The form offers each with its format; the document names the
// checkpoint (format and fingerprint, as a capture's receipt does) and the
// header shows it; both sides' tokens and logits match engine.wasm's under
// wazero on the same requests (within relTol on WebGPU, where lookup.wgsl
// decodes, bit for bit on the CPU path); and the page fetched the hub
// checkpoint's files and the model's small ones, never the model's
// safetensors.
func TestUIHubCheckpoint(t *testing.T) {
	RequireUI(t)
	// tiny-qwen3: engine.wasm reads lookup matrices of whole groups of 32
	// columns.
	dir := familyModel(t, "tiny-qwen3")
	var hubs []string
	want := map[string]receipt.Hub{}
	devices := map[string][]string{}
	for _, c := range []struct {
		writer  string
		opt     hubquant.Options
		devices []string
	}{
		{"gptq", hubquant.Options{Bits: 4, GroupSize: 32, DescAct: true}, []string{"gpu", "cpu"}},
		{"mlx", hubquant.Options{Bits: 4, GroupSize: 32}, []string{"gpu", "cpu"}},
		{"awq", hubquant.Options{Bits: 4, GroupSize: 32}, []string{"cpu"}},
		{"ct-nvfp4", hubquant.Options{}, []string{"cpu"}},
		{"bnb-nf4", hubquant.Options{}, []string{"cpu"}},
	} {
		name := snapshot.HubPrefix + c.writer
		f := hubquanttest.Write(t, dir, c.writer, c.opt, filepath.Join(dir, filepath.FromSlash(name)))
		w, err := hubquant.Open(filepath.Join(dir, filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		fp, err := w.Checkpoint.Fingerprint()
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		hubs = append(hubs, name)
		want[name] = receipt.Hub{Format: f.Name(), SHA256: fp}
		devices[name] = c.devices
	}
	site := StartSite(t, SiteModel{"m", dir})
	mod := Wazero(t, site)
	b := NewBrowser(t)
	for _, hub := range hubs {
		t.Run(hub, func(t *testing.T) {
			for i, device := range devices[hub] {
				t.Run(device, func(t *testing.T) {
					spec := snapshot.NewSpec()
					spec.Model, spec.Ref, spec.Test, spec.Prompt, spec.MaxNew, spec.Device = "m", "q4", hub, "Which checkpoint is this?", 8, device
					q := spec.Query()
					q.Set("autorun", "1")
					before := len(site.Requests())
					if state := b.Open(site.URL+"/?"+q.Encode(), 3*time.Minute); state != "done" {
						b.Screenshot("error")
						t.Fatalf("the run ended in %q: %s", state, Eval[string](b, `String(window.logitscope.error)`))
					}
					doc, _ := pageDoc(t, b)
					if h := doc.Test.Hub; h == nil || *h != want[hub] || doc.Test.Label != hub || doc.Ref.Hub != nil {
						t.Errorf("the document's test side %q hub %+v (ref %+v), want %+v", doc.Test.Label, h, doc.Ref.Hub, want[hub])
					}
					header := Eval[string](b, `(document.querySelector("#test-hub") || {innerText: ""}).innerText`)
					choice := Eval[string](b, `document.querySelector("select[name=test]").selectedOptions[0].innerText`)
					for _, s := range []string{header, choice} {
						if !strings.Contains(s, want[hub].Format) {
							t.Errorf("the page says %q, want the format %q", s, want[hub].Format)
						}
					}
					if !strings.Contains(header, want[hub].SHA256[:8]) {
						t.Errorf("the header says %q, want the fingerprint %s", header, want[hub].SHA256)
					}
					lg := Eval[pageLogits](b, `window.logitscope.logits`)
					if device == "gpu" {
						compareWithWazero(t, mod, nativeDevice(t), dir, doc, lg, relTol)
					} else {
						compareWithWazero(t, mod, nil, dir, doc, lg, 0)
					}
					var fetched []string
					for _, r := range site.Requests()[before:] {
						if name, ok := strings.CutPrefix(r.Path, "/models/m/"); ok {
							fetched = append(fetched, name)
						}
					}
					if slices.Contains(fetched, "model.safetensors") || !slices.Contains(fetched, hub+"/model.safetensors") && i == 0 {
						t.Errorf("the runs fetched %v: want %s's weights, not the model's", fetched, hub)
					}
				})
			}
		})
	}
}
