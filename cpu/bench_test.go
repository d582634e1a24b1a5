package cpu

import (
	"testing"

	"logitscope/checkpoint"
	"logitscope/model"
	"logitscope/synth"
)

// BenchmarkDecode measures one KV-cache decode step (one token in, one
// logit row out) after a 32-token prefill, on each preset. The
// qwen2.5-0.5b checkpoint (1 GB) is generated once into the cache.
func BenchmarkDecode(b *testing.B) {
	for _, preset := range []string{"tiny", "qwen2.5-0.5b"} {
		b.Run(preset, func(b *testing.B) {
			dir, err := synth.Cached(preset, 0)
			if err != nil {
				b.Fatal(err)
			}
			ck, err := checkpoint.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			m, err := model.Load(ck, nil)
			ck.Close()
			if err != nil {
				b.Fatal(err)
			}
			// Decode positions 32..288, then start over with a fresh cache.
			prompt := sequence(32, 512)
			var s *State
			fresh := func() {
				b.StopTimer()
				if s, err = New(m, len(prompt)+256); err == nil {
					_, err = s.Forward(prompt, false)
				}
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			fresh()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if s.Pos() == len(prompt)+256 {
					fresh()
				}
				if _, err := s.Forward([]int{prompt[i%len(prompt)]}, false); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
			b.ReportMetric(float64(weightBytes(m))*float64(b.N)/b.Elapsed().Seconds()/1e9, "weightGB/s")
		})
	}
}

// weightBytes is the float32 bytes one decode step reads.
func weightBytes(m *model.Model) int {
	n := len(m.Head.Data) + len(m.Norm)
	for _, L := range m.Layers {
		for _, w := range []*model.Matrix{L.Wq, L.Wk, L.Wv, L.Wo, L.Wgate, L.Wup, L.Wdown} {
			n += len(w.Data)
		}
	}
	return 4 * n
}
