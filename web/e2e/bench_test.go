package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"logitscope/internal/analysis/snapshot"
)

// BenchmarkPage opens the demo's autorun link (f32 against q4, 8 new
// tokens) in a fresh Chromium per iteration, with WebGPU (SwiftShader) and
// without it (engine.wasm's CPU path), and reports the page's own timings
// (snapshot.Timing), averaged: page load, each side's open and run, and
// the first token. Open includes fetching the model files and compiling
// engine.wasm, since every iteration starts with an empty profile.
//
// With LOGITSCOPE_BENCH_GPU=real (bench/gpu.sh) the WebGPU rows must run
// on a real GPU, not SwiftShader, or the benchmark fails.
func BenchmarkPage(b *testing.B) {
	RequireUI(b)
	site := StartSite(b)
	spec := snapshot.NewSpec()
	spec.Prompt, spec.MaxNew = "What is the capital of France?", 8
	for _, device := range []string{"gpu", "cpu"} {
		b.Run(device, func(b *testing.B) {
			opts := webgpuOptions()
			if device == "cpu" {
				opts = []chromedp.ExecAllocatorOption{chromedp.Flag("enable-unsafe-webgpu", false)}
			}
			s := spec
			s.Device = map[string]string{"gpu": "gpu", "cpu": "auto"}[device]
			q := s.Query()
			q.Set("autorun", "1")
			var sum snapshot.Timing
			for range b.N {
				br := NewBrowser(b, opts...)
				if state := br.Open(site.URL+"/?"+q.Encode(), 5*time.Minute); state != "done" {
					b.Fatalf("the run ended in %q: %s", state, Eval[string](br, `String(window.logitscope.error)`))
				}
				doc, _ := pageDoc(b, br)
				if device == "gpu" {
					checkWebGPU(b, doc.Ref.Device+" "+doc.Ref.Adapter)
				}
				t := doc.Timing
				sum.PageLoad += t.PageLoad
				sum.OpenRef += t.OpenRef
				sum.FirstToken += t.FirstToken
				sum.RefRun += t.RefRun
				sum.OpenTest += t.OpenTest
				sum.TestRun += t.TestRun
			}
			// "-ms" units become one row each in make bench's table.
			n := float64(b.N)
			b.ReportMetric(sum.PageLoad/n, "page-load-ms")
			b.ReportMetric(sum.OpenRef/n, "open-f32-ms")
			b.ReportMetric(sum.FirstToken/n, "first-token-ms")
			b.ReportMetric(sum.RefRun/n, "f32-run-ms")
			b.ReportMetric(sum.OpenTest/n, "open-q4-ms")
			b.ReportMetric(sum.TestRun/n, "q4-run-ms")
		})
	}
}

// realGPU is bench/gpu.sh's LOGITSCOPE_BENCH_GPU=real: WebGPU must be a
// real GPU's.
var realGPU = os.Getenv("LOGITSCOPE_BENCH_GPU") == "real"

// webgpuOptions are the Chromium options of a benchmark on WebGPU: none
// (SwiftShader), or under realGPU what Chromium on Linux needs to give
// WebGPU a real GPU, headless: Vulkan. SwiftShader needs none of them,
// which is why NewBrowser leaves enable-features alone.
func webgpuOptions() []chromedp.ExecAllocatorOption {
	if !realGPU {
		return nil
	}
	return []chromedp.ExecAllocatorOption{chromedp.Flag("enable-features", "Vulkan"),
		chromedp.Flag("use-angle", "vulkan"), chromedp.Flag("ignore-gpu-blocklist", true)}
}

// checkWebGPU fails a realGPU benchmark whose WebGPU (adapter, as the page
// or navigator.gpu describes it) is SwiftShader or missing.
func checkWebGPU(b *testing.B, adapter string) {
	if realGPU && (!strings.Contains(adapter, "webgpu") || strings.Contains(strings.ToLower(adapter), "swiftshader")) {
		b.Fatalf("LOGITSCOPE_BENCH_GPU=real, but WebGPU ran on %q, not a GPU", adapter)
	}
}

// BenchmarkFirstScreen opens what `make run` prints, the bare link (the
// demo's ready panel, f32 against q4, run on open), in a fresh Chromium
// per iteration, and reports the time from navigation to the finished
// comparison and the page's own timings; as "auto" (WebGPU: SwiftShader
// here) and with device=cpu (engine.wasm's CPU path), the two ways the
// first screen could run.
func BenchmarkFirstScreen(b *testing.B) {
	RequireUI(b)
	site := StartSite(b)
	for _, link := range []string{"/", "/?autorun=1&device=cpu"} {
		b.Run(map[string]string{"/": "auto", "/?autorun=1&device=cpu": "cpu"}[link], func(b *testing.B) {
			var sum snapshot.Timing
			var wall time.Duration
			for range b.N {
				br := NewBrowser(b)
				start := time.Now()
				if state := br.Open(site.URL+link, 5*time.Minute); state != "done" {
					b.Fatalf("the first screen ended in %q: %s", state, Eval[string](br, `String(window.logitscope.error)`))
				}
				wall += time.Since(start)
				doc, _ := pageDoc(b, br)
				t := doc.Timing
				sum.PageLoad += t.PageLoad
				sum.OpenRef += t.OpenRef
				sum.RefRun += t.RefRun
				sum.OpenTest += t.OpenTest
				sum.TestRun += t.TestRun
			}
			n := float64(b.N)
			b.ReportMetric(float64(wall.Milliseconds())/n, "done-ms")
			b.ReportMetric(sum.PageLoad/n, "page-load-ms")
			b.ReportMetric(sum.OpenRef/n, "open-f32-ms")
			b.ReportMetric(sum.RefRun/n, "f32-run-ms")
			b.ReportMetric(sum.OpenTest/n, "open-q4-ms")
			b.ReportMetric(sum.TestRun/n, "q4-run-ms")
		})
	}
}
