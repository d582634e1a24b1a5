package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"logitscope/internal/format/ggml"
	"logitscope/internal/model"
	"logitscope/internal/quant"
)

// BenchmarkA8Batch times one core's block of a8Rows q4, q8, Q4_0 or Q8_0
// rows
// times n tokens: the one-token kernel once per token (one), the prefill
// kernel once for all of them (batch).
func BenchmarkA8Batch(b *testing.B) {
	if !asmKernels() || packA8 == nil {
		b.Skip("no a8 assembly on this CPU")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, f := range []model.Format{{Scheme: quant.Q4}, {Scheme: quant.Q8}, {Type: ggml.Q4_0}, {Type: ggml.Q8_0}} {
		for _, k := range []int{896, 4864} {
			p := &model.Piece{Rows: a8Rows, Format: f, Data: a8Weights(b, rng, f, a8Rows, k)}
			nb := k / a8Block
			sums, ws := make([]int32, nb), make([]float32, nb)
			for _, n := range []int{1, 2, 4, 8, 16} {
				var acts []*a8Acts
				for range n {
					acts = append(acts, newA8Acts(randomValues(rng, k, 0)))
				}
				y := make([]float32, a8Rows*n)
				batch := newA8Batch(f, acts)
				if batch == nil {
					continue // ggml's need AVX512_VBMI
				}
				for _, path := range []string{"one", "batch"} {
					b.Run(fmt.Sprintf("%v/k=%d/n=%d/%s", f, k, n, path), func(b *testing.B) {
						for b.Loop() {
							if path == "batch" {
								batch.rows(p, k, 0, a8Rows, y, a8Rows, &scratch{})
								continue
							}
							for _, x := range acts {
								rowsA8(p, k, 0, a8Rows, x, y[:a8Rows], sums, ws)
							}
						}
						b.ReportMetric(b.Elapsed().Seconds()*1e9/float64(b.N)/float64(a8Rows*k*n), "ns/weight")
					})
				}
			}
		}
	}
}
