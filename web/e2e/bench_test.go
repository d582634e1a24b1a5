package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"logitscope/snapshot"
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
	realGPU := os.Getenv("LOGITSCOPE_BENCH_GPU") == "real"
	RequireUI(b)
	site := StartSite(b)
	spec := snapshot.NewSpec()
	spec.Prompt, spec.MaxNew = "What is the capital of France?", 8
	for _, device := range []string{"gpu", "cpu"} {
		b.Run(device, func(b *testing.B) {
			var opts []chromedp.ExecAllocatorOption
			switch {
			case device == "cpu":
				opts = append(opts, chromedp.Flag("enable-unsafe-webgpu", false))
			case realGPU:
				// Chromium on Linux gives WebGPU a real GPU only through
				// Vulkan, and headless only when asked; SwiftShader needs
				// neither, which is why NewBrowser leaves them alone.
				opts = append(opts, chromedp.Flag("enable-features", "Vulkan"), chromedp.Flag("use-angle", "vulkan"),
					chromedp.Flag("ignore-gpu-blocklist", true))
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
				if device == "gpu" && realGPU && (doc.Ref.Device != "webgpu" || strings.Contains(doc.Ref.Adapter, "SwiftShader")) {
					b.Fatalf("LOGITSCOPE_BENCH_GPU=real, but the page ran on %s %q, not a GPU", doc.Ref.Device, doc.Ref.Adapter)
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
