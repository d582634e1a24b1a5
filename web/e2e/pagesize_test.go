package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/gpu"
	"logitscope/internal/quant/variant"
	"logitscope/wasm/abi"
)

// modelRequests lists the paths of model m's files the site served since
// request number from, in order.
func modelRequests(site *Site, from int, m string) []string {
	var out []string
	for _, r := range site.Requests()[from:] {
		if name, ok := strings.CutPrefix(r.Path, "/models/"+m+"/"); ok {
			out = append(out, name)
		}
	}
	return out
}

// progressEvent is a bridge progress report as the page saw it.
type progressEvent struct {
	Phase  string  `json:"phase"`
	Loaded float64 `json:"loaded"`
	Total  float64 `json:"total"`
}

// A q4 variant opens in the page with only the files engine.wasm reads:
// config, generation config, tokenizer files, the manifest and the q4
// shards, never the bf16 safetensors; the budget counts just those. A
// prompt longer than a chunk reports its prefill (input tokens done of
// all) before the first row, on WebGPU (SwiftShader) and on the CPU path,
// and the rows are engine.wasm's under wazero with the same files
// (within relTol on lavapipe, bit for bit on the CPU path). Then the page
// itself, f32 against q4: tokenizer.json crosses the network once, though
// the page and the worker both read it.
func TestUIVariantFetchesItsFiles(t *testing.T) {
	RequireUI(t)
	// A mid-size model (hidden 256, MLP 512) and its q4 variant: every
	// piece of the page's path at a test's cost (the CPU paths run it in
	// wasm, in Chromium and under wazero, on a loaded 2-core machine).
	dir := familyModel(t, "small-llama3")
	site := StartSite(t, SiteModel{"mid", dir})
	mod := Wazero(t, site)
	b := NewBrowser(t)
	ctx, cancel := context.WithTimeout(b.Ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#run-form"))); err != nil {
		t.Fatal(err)
	}
	prompt := make([]int, 40) // a chunk of 32 that keeps no row, then 8
	for i := range prompt {
		prompt[i] = 10 + 7*i
	}
	req := abi.Request{Mode: "greedy", PromptIDs: prompt, MaxNew: 3, Stops: &[]int{}}
	reqJSON, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	var shards []string
	for _, s := range variantManifest(t, dir).Shards {
		shards = append(shards, "variants/q4/"+s.Name)
	}
	wantFiles := append([]string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "variants/q4/manifest.json"}, shards...)
	slices.Sort(wantFiles)
	var wantBytes int64
	for _, f := range wantFiles {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		wantBytes += st.Size()
	}

	for i, device := range []string{"gpu", "cpu"} {
		t.Run(device, func(t *testing.T) {
			before := len(site.Requests())
			type opened struct {
				Bytes       int64           `json:"bytes"`
				CachedBytes int64           `json:"cachedBytes"`
				Device      string          `json:"device"`
				Progress    []progressEvent `json:"progress"`
				Run         browserRun      `json:"run"`
			}
			got := Eval[opened](b, fmt.Sprintf(`(async () => {
  const br = new LogitscopeBridge();
  const progress = [];
  const o = await br.open({model: "mid", variant: "q4", capacity: 64, device: %q});
  br.onprogress = (p) => progress.push({phase: p.phase, loaded: p.loaded, total: p.total});
  const r = await br.run(%s);
  br.terminate();
  return {bytes: o.bytes, cachedBytes: o.cachedBytes, device: o.device, progress,
    run: {output: r.result.output, targets: r.result.targets, stopped: r.result.stopped, vocab: r.vocab, width: r.width, rows: Array.from(r.rows)}};
})()`, device, reqJSON))
			fetched := modelRequests(site, before, "mid")
			slices.Sort(fetched)
			if i == 0 && !slices.Equal(fetched, wantFiles) {
				t.Errorf("opening q4 fetched %v, want %v", fetched, wantFiles)
			}
			if i > 0 && len(fetched) > 0 {
				t.Errorf("opening q4 again fetched %v, want every file from Cache Storage", fetched)
			}
			if got.Bytes != wantBytes || (i > 0 && got.CachedBytes != wantBytes) {
				t.Errorf("open counted %d bytes (%d cached), want %d: the files above", got.Bytes, got.CachedBytes, wantBytes)
			}
			if want := map[string]string{"gpu": "webgpu", "cpu": "cpu"}[device]; got.Device != want {
				t.Fatalf("opened on %q, want %q", got.Device, want)
			}
			// Prefill first: 0 and 32 of 40 tokens, then the rows.
			var prefill []progressEvent
			firstRow := slices.IndexFunc(got.Progress, func(p progressEvent) bool { return p.Phase == "rows" })
			for _, p := range got.Progress[:max(firstRow, 0)] {
				if p.Phase == "prefill" {
					prefill = append(prefill, p)
				}
			}
			wantPrefill := []progressEvent{{"prefill", 0, 40}, {"prefill", 32, 40}}
			if firstRow < 0 || !slices.Equal(prefill, wantPrefill) {
				t.Errorf("progress %+v: want %+v before the first rows report", got.Progress, wantPrefill)
			}
			var dev gpu.Device
			tol := 0.0
			if device == "gpu" {
				dev, tol = nativeDevice(t), relTol
			}
			rows, res := wazeroRun(t, mod, dev, dir, "q4", req)
			compareRows(t, got.Run, rows, res, tol)
		})
	}

	t.Run("page", func(t *testing.T) {
		// An empty Cache Storage: what crosses the network now is what
		// the page and the worker fetch for this run.
		Eval[bool](b, `caches.delete("logitscope-models-v1")`)
		before := len(site.Requests())
		spec := snapshot.NewSpec()
		spec.Model, spec.Ref, spec.Test, spec.Prompt, spec.MaxNew, spec.Device = "mid", "f32", "q4", "Which files?", 4, "cpu"
		q := spec.Query()
		q.Set("autorun", "1")
		if state := b.Open(site.URL+"/?"+q.Encode(), 3*time.Minute); state != "done" {
			b.Screenshot("error")
			t.Fatalf("the run ended in %q: %s", state, Eval[string](b, `String(window.logitscope.error)`))
		}
		count := map[string]int{}
		for _, p := range modelRequests(site, before, "mid") {
			count[p]++
		}
		// The page reads tokenizer.json before the worker opens either
		// side; both sides' opens then find it in Cache Storage. Only the
		// f32 side fetches the safetensors.
		if count["tokenizer.json"] != 1 || count["tokenizer_config.json"] != 1 || count["model.safetensors"] != 1 {
			t.Errorf("the page fetched %v: want tokenizer.json, tokenizer_config.json and model.safetensors once each", count)
		}
	})
}

// variantManifest reads dir's q4 manifest.
func variantManifest(t *testing.T, dir string) *variant.Manifest {
	t.Helper()
	v, err := variant.Open(variant.DefaultDir(dir, "q4"))
	if err != nil {
		t.Fatal(err)
	}
	return v.Manifest
}
