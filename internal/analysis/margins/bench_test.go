package margins

import "testing"

// BenchmarkCompareQwenVocab compares 64 positions over Qwen2.5's vocabulary
// of 151,936 tokens, the size of a short real capture.
func BenchmarkCompareQwenVocab(b *testing.B) {
	const rows = 64
	ref, test := randomPair(9, rows, 151936, 0.05)
	targets := make([]int, rows)
	for i := range targets {
		targets[i] = i * 1000
	}
	b.SetBytes(int64(2 * 4 * len(ref.Data)))
	for b.Loop() {
		if _, err := Compare(ref, test, targets, Options{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkCompareQwenVocabOneWorker is the same on one goroutine, as in a
// wasm engine without threads.
func BenchmarkCompareQwenVocabOneWorker(b *testing.B) {
	const rows = 64
	ref, test := randomPair(9, rows, 151936, 0.05)
	for b.Loop() {
		if _, err := Compare(ref, test, nil, Options{Workers: 1}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
}
