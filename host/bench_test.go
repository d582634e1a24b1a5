package host

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"logitscope/internal/gpu/native/nativetest"
	"logitscope/internal/model/synth"
	"logitscope/internal/model/synth/varianttest"
	"logitscope/internal/quant"
	"logitscope/internal/run/session"
)

// Per decoded token on tiny: the wasm engine under wazero against the Go
// engine on the same device. Each iteration decodes 16 tokens after a
// 40-token prompt; the metric is per token.
func BenchmarkGreedy(b *testing.B) {
	setup(b)
	dev := nativetest.Device(b)
	ctx := context.Background()
	const maxNew = 16
	b.Run("native", func(b *testing.B) {
		e := goEngine(b, dev, fixtures.modelDir, "q4", 64)
		for b.Loop() {
			if _, err := session.Drive(e, session.Request{Mode: session.Greedy, PromptIDs: testPrompt(), MaxNew: maxNew, Stops: []int{}}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*maxNew), "µs/token")
	})
	b.Run("wasm", func(b *testing.B) {
		e, err := fixtures.mod.Open(ctx, dev, fixtures.modelDir, "q4", 64)
		if err != nil {
			b.Fatal(err)
		}
		defer e.Close(ctx)
		for b.Loop() {
			if _, _, _, err := e.Greedy(ctx, testPrompt(), maxNew, []int{}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*maxNew), "µs/token")
	})
}

// BenchmarkGreedyCPU: engine.wasm's CPU path (the page without WebGPU),
// q4, under wazero, on tiny and on smollm2-135m's geometry (generated
// once under $LOGITSCOPE_CACHE). A request greedily decodes 1 token, then
// one decodes 1+n: ms/token is the difference over n (decode steps
// alone), prefill-ms the first (short prompts and few tokens on the
// larger model: wasm is single-threaded).
func BenchmarkGreedyCPU(b *testing.B) {
	setup(b)
	ctx := context.Background()
	for _, preset := range []string{"tiny", "smollm2-135m"} {
		b.Run(preset, func(b *testing.B) {
			dir := fixtures.modelDir
			if preset != "tiny" {
				dir = cachedQ4(b, preset)
			}
			e, err := fixtures.mod.Open(ctx, nil, dir, "q4", 64)
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close(ctx)
			prompt, n := testPrompt()[:8], 32
			if preset != "tiny" {
				prompt, n = prompt[:4], 2
			}
			var prefill, decode, prefillCPU, decodeCPU time.Duration
			for b.Loop() {
				t0, c0 := time.Now(), cpuTime()
				if _, _, _, err := e.Greedy(ctx, prompt, 1, []int{}); err != nil {
					b.Fatal(err)
				}
				t1, c1 := time.Now(), cpuTime()
				if _, _, _, err := e.Greedy(ctx, prompt, 1+n, []int{}); err != nil {
					b.Fatal(err)
				}
				t2, c2 := time.Now(), cpuTime()
				prefill += t1.Sub(t0)
				decode += t2.Sub(t1) - t1.Sub(t0)
				prefillCPU += time.Duration(c1 - c0)
				decodeCPU += time.Duration(c2 - c1 - (c1 - c0))
			}
			ms := func(d time.Duration, per int) float64 { return float64(d.Microseconds()) / 1e3 / float64(b.N*per) }
			b.ReportMetric(ms(prefill, 1), "prefill-ms")
			b.ReportMetric(ms(decode, n), "ms/token")
			// The process's CPU time: on a machine others share, it varies
			// less than the wall time.
			b.ReportMetric(ms(prefillCPU, 1), "prefill-cpu-ms")
			b.ReportMetric(ms(decodeCPU, n), "cpu-ms/token")
		})
	}
}

// cachedQ4 is the directory of a synthetic preset with its q4 variant,
// each written once into the cache.
func cachedQ4(b *testing.B, preset string) string {
	dir, _ := varianttest.Cached(b, synth.Presets[preset], quant.Q4)
	return dir
}

// TestCompileTimes logs engine.wasm's compile time cold and from the cache
// (go test -v -run CompileTimes).
func TestCompileTimes(t *testing.T) {
	setup(t)
	ctx := context.Background()
	cache := filepath.Join(t.TempDir(), "cache")
	for _, label := range []string{"cold", "cached"} {
		start := time.Now()
		m, err := Load(ctx, fixtures.wasm, cache)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("compile %s: %v", label, time.Since(start))
		m.Close(ctx)
	}
	if st, err := os.Stat(filepath.Join(fixtures.tmp, "engine.wasm")); err == nil {
		t.Logf("engine.wasm: %d bytes", st.Size())
	}
}
