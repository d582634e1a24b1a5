package cpu

import (
	"math"
	"slices"
	"testing"

	"logitscope/internal/model"
)

// GLM-4.5's grouped sigmoid routing on hand-made scores where the rules
// decide: groups scored by their top two, the score bias choosing but not
// weighing, norm_topk_prob, routed_scaling_factor, the 0.0 mask, ties.
func TestRouteGrouped(t *testing.T) {
	// logits whose sigmoids are the given scores.
	logits := func(scores ...float64) []float32 {
		out := make([]float32, len(scores))
		for i, s := range scores {
			out[i] = float32(math.Log(s / (1 - s)))
		}
		return out
	}
	geom := func(groups, keep, k int, norm bool, scale float32) model.Geometry {
		return model.Geometry{Sigmoid: true, Groups: groups, TopKGroup: keep, TopK: k, NormTopK: norm, RoutedScale: scale}
	}
	for _, c := range []struct {
		name    string
		g       model.Geometry
		logits  []float32
		bias    []float32
		ids     []int
		weights []float64
	}{
		{
			// Group 0 holds the best expert (0.95) but its top two sum to
			// 1.05; group 1's two medium ones (0.6, 0.6) sum to 1.2 and win.
			name: "two medium experts outweigh one big one", g: geom(2, 1, 2, false, 1),
			logits: logits(0.95, 0.1, 0.1, 0.1, 0.6, 0.6, 0.1, 0.1), bias: make([]float32, 8),
			ids: []int{4, 5}, weights: []float64{0.6, 0.6},
		},
		{
			// Both groups kept: the best expert comes back, then the lower
			// id of the tied pair.
			name: "every group kept", g: geom(2, 2, 2, false, 1),
			logits: logits(0.95, 0.1, 0.1, 0.1, 0.6, 0.6, 0.1, 0.1), bias: make([]float32, 8),
			ids: []int{0, 4}, weights: []float64{0.95, 0.6},
		},
		{
			// The bias lifts expert 0 (0.5 + 0.2) above experts 1 and 2;
			// its weight stays its unbiased score.
			name: "the bias chooses, the score weighs", g: geom(1, 1, 2, false, 1),
			logits: logits(0.5, 0.6, 0.55, 0.1), bias: []float32{0.2, 0, 0, 0},
			ids: []int{0, 1}, weights: []float64{0.5, 0.6},
		},
		{
			name: "without the bias", g: geom(1, 1, 2, false, 1),
			logits: logits(0.5, 0.6, 0.55, 0.1), bias: make([]float32, 4),
			ids: []int{1, 2}, weights: []float64{0.6, 0.55},
		},
		{
			name: "norm_topk_prob", g: geom(1, 1, 2, true, 1),
			logits: logits(0.5, 0.6, 0.55, 0.1), bias: []float32{0.2, 0, 0, 0},
			ids: []int{0, 1}, weights: []float64{0.5 / 1.1, 0.6 / 1.1},
		},
		{
			name: "norm_topk_prob and routed_scaling_factor", g: geom(1, 1, 2, true, 2.5),
			logits: logits(0.5, 0.6, 0.55, 0.1), bias: []float32{0.2, 0, 0, 0},
			ids: []int{0, 1}, weights: []float64{2.5 * 0.5 / 1.1, 2.5 * 0.6 / 1.1},
		},
		{
			// The scaling factor applies without normalization too.
			name: "routed_scaling_factor alone", g: geom(1, 1, 2, false, 2.5),
			logits: logits(0.5, 0.6, 0.55, 0.1), bias: []float32{0.2, 0, 0, 0},
			ids: []int{0, 1}, weights: []float64{2.5 * 0.5, 2.5 * 0.6},
		},
		{
			// transformers masks dropped groups with 0.0: where every kept
			// choice score is negative, an expert of a dropped group (the
			// lower id of two at 0.0) wins. DeepSeek's −inf would pick 0.
			name: "the 0.0 mask beats negative choice scores", g: geom(2, 1, 1, false, 1),
			logits: logits(0.9, 0.8, 0.1, 0.2), bias: []float32{-1, -1, -1.5, -1.5},
			ids: []int{2}, weights: []float64{0.1},
		},
		{
			// Groups 0 and 1 score alike (0.9 + 0.5): group 0, the lower,
			// is kept, so expert 1 is picked before group 1's 0.9.
			name: "tied groups: the lower group kept", g: geom(2, 1, 2, false, 1),
			logits: logits(0.9, 0.5, 0.9, 0.5), bias: make([]float32, 4),
			ids: []int{0, 1}, weights: []float64{0.9, 0.5},
		},
		{
			name: "ties: the lower id first", g: geom(2, 2, 3, false, 1),
			logits: logits(0.3, 0.7, 0.7, 0.3, 0.7, 0.3), bias: make([]float32, 6),
			ids: []int{1, 2, 4}, weights: []float64{0.7, 0.7, 0.7},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			ids, w := RouteGrouped(slices.Clone(c.logits), c.bias, c.g)
			if !slices.Equal(ids, c.ids) {
				t.Fatalf("experts %v, want %v", ids, c.ids)
			}
			for i := range w {
				if math.Abs(float64(w[i])-c.weights[i]) > 1e-6 {
					t.Fatalf("weights %v, want %v", w, c.weights)
				}
			}
		})
	}
}
