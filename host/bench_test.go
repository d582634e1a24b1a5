package host

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"logitscope/gpu/native/nativetest"
	"logitscope/session"
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
