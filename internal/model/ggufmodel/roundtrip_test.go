package ggufmodel_test

import (
	"math"
	"testing"

	"logitscope/internal/format/ggml"
	"logitscope/internal/model"
	"logitscope/internal/model/ggufmodel"
)

// Exporting and reading back gives every tensor's values bit for bit:
// the checkpoint's own (F32) and each scheme's (Q8_0, Q4_0 hold their
// codes and scales exactly), through Llama's interleaved q/k rows and the
// stacked experts of both mixtures.
func TestExportRoundTrip(t *testing.T) {
	for _, preset := range []string{"tiny", "tiny-qwen3", "tiny-llama3", "tiny-qwen3-moe", "tiny-qwen2-moe"} {
		ck := checkpointOf(t, preset)
		g, err := model.GeometryOf(ck.Config)
		if err != nil {
			t.Fatal(err)
		}
		for _, scheme := range []string{"f32", "q8", "q6", "q4"} {
			t.Run(preset+"/"+scheme, func(t *testing.T) {
				path, v, e := export(t, ck, scheme)
				want := map[string]ggml.Type{"f32": ggml.F32, "q8": ggml.Q8_0, "q6": ggml.Q8_0, "q4": ggml.Q4_0}[scheme]
				if e.Types[want] == 0 {
					t.Fatalf("types %v: no %v tensor", e.Types, want)
				}
				w, err := ggufmodel.Open(path, g)
				if err != nil {
					t.Fatal(err)
				}
				var src model.Weights = model.CheckpointWeights(ck)
				if v != nil {
					src = v
				}
				for _, s := range g.Specs() {
					a, _, err := src.Float32(s.Name)
					if err != nil {
						t.Fatal(err)
					}
					b, shape, err := w.Float32(s.Name)
					if err != nil {
						t.Fatal(err)
					}
					if len(a) != len(b) || len(shape) != len(s.Shape) {
						t.Fatalf("%s: %d values %v, want %d %v", s.Name, len(b), shape, len(a), s.Shape)
					}
					for i := range a {
						if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
							t.Fatalf("%s[%d] = %g, want %g", s.Name, i, b[i], a[i])
						}
					}
				}
			})
		}
	}
}
