package cpu

import (
	"cmp"
	"math"
	"slices"
	"testing"

	"logitscope/internal/model"
	"logitscope/internal/model/synth"
)

// naiveMoE transcribes, in float64, a sparse layer's MLP as transformers
// computes it (models/qwen2_moe/modular_qwen2_moe.py and
// models/qwen3_moe/modular_qwen3_moe.py, main, v5): Qwen2MoeTopKRouter
// (softmax over the router's logits, torch.topk, division by the top-k
// sum when norm_topk_prob), MixtralExperts (each chosen expert's SwiGLU
// output times its weight, summed per token) and, for Qwen2-MoE, the
// shared expert times sigmoid(shared_expert_gate); GLM-4.5's router is
// naiveGroupedRoute, its shared experts added ungated
// (models/glm4_moe/modeling_glm4_moe.py, Glm4MoeMoE.forward). It returns
// the output (T, d) and each token's experts, most probable first.
func naiveMoE(m *model.Model, L *model.Layer, h [][]float64) ([][]float64, [][]int) {
	logits := linear64(h, L.Router, nil)
	out := make([][]float64, len(h))
	routes := make([][]int, len(h))
	for t := range h {
		top, weights := naiveSoftmaxRoute(m, logits[t])
		if m.Sigmoid {
			top, weights = naiveGroupedRoute(m, L, logits[t])
		}
		out[t] = make([]float64, m.Dim)
		for k, e := range top {
			y := swiglu64([][]float64{h[t]}, L.Experts[e], nil, nil, nil)[0]
			for i := range y {
				out[t][i] += weights[k] * y[i]
			}
		}
		routes[t] = top
	}
	if L.Shared != nil {
		shared := swiglu64(h, *L.Shared, nil, nil, nil)
		for t := range out {
			g := 1.0 // GLM-4.5's shared experts have no gate
			if L.SharedGate != nil {
				g = 1 / (1 + math.Exp(-linear64(h[t:t+1], L.SharedGate, nil)[0][0]))
			}
			for i := range out[t] {
				out[t][i] += g * shared[t][i]
			}
		}
	}
	return out, routes
}

// naiveSoftmaxRoute: softmax over the router's logits, torch.topk (stable
// sort: the lower id first among equals), division by the top-k sum when
// norm_topk_prob.
func naiveSoftmaxRoute(m *model.Model, logits []float64) ([]int, []float64) {
	p := slices.Clone(logits)
	mx := slices.Max(p)
	var z float64
	for i := range p {
		p[i] = math.Exp(p[i] - mx)
		z += p[i]
	}
	for i := range p {
		p[i] /= z
	}
	top := descending(p)[:m.TopK]
	w := make([]float64, len(top))
	var sum float64
	for _, e := range top {
		sum += p[e]
	}
	for k, e := range top {
		w[k] = p[e]
		if m.NormTopK {
			w[k] /= sum
		}
	}
	return top, w
}

// naiveGroupedRoute transcribes Glm4MoeMoE.route_tokens_to_experts:
// sigmoid scores, the score bias added for the choice only, groups
// scored by the sum of their top 2 choice scores, the topk_group best
// kept and the rest masked to 0.0, top-k of the masked choice scores,
// the unbiased scores gathered there, over their sum + 1e-20 when
// norm_topk_prob, times routed_scaling_factor.
func naiveGroupedRoute(m *model.Model, L *model.Layer, logits []float64) ([]int, []float64) {
	E, G := len(logits), m.Groups
	scores, choice := make([]float64, E), make([]float64, E)
	for e, x := range logits {
		scores[e] = 1 / (1 + math.Exp(-x))
		choice[e] = scores[e] + float64(L.ScoreBias[e])
	}
	size := E / G
	group := make([]float64, G)
	for j := range group {
		part := choice[j*size : (j+1)*size]
		best := descending(part)
		group[j] = part[best[0]] + part[best[1]]
	}
	masked := make([]float64, E)
	for _, j := range descending(group)[:m.TopKGroup] {
		copy(masked[j*size:(j+1)*size], choice[j*size:(j+1)*size])
	}
	top := descending(masked)[:m.TopK]
	w := make([]float64, len(top))
	var sum float64
	for k, e := range top {
		w[k] = scores[e]
		sum += scores[e]
	}
	for k := range w {
		if m.NormTopK {
			w[k] /= sum + 1e-20
		}
		w[k] *= float64(m.RoutedScale)
	}
	return top, w
}

// descending is the indices of v, largest value first, the lower index
// first among equals (a stable sort).
func descending(v []float64) []int {
	order := make([]int, len(v))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(v[b], v[a]) })
	return order
}

// Every engine reports, after a row's logits, the experts each sparse
// layer routed its token to; the CPU engine's are the transcription's.
// The transcription's routes come from the float64 router run on the
// CPU engine's own float32 residual stream: routing decided on a slightly
// different stream could legitimately differ at a near tie, so the layer
// input is shared and only the router itself is compared.
func TestRoutesMatchTranscription(t *testing.T) {
	for _, name := range []string{"tiny-qwen3-moe", "tiny-qwen2-moe", "tiny-glm4-moe"} {
		t.Run(name, func(t *testing.T) {
			m := load(t, synth.Presets[name])
			if m.Routes() == 0 {
				t.Fatalf("%s has no routed layers: %+v", name, m.Geometry)
			}
			ids := sequence(16, m.Vocab)
			s, _ := New(m, len(ids))
			rows, err := s.Forward(ids, true)
			if err != nil {
				t.Fatal(err)
			}
			var stream [][]float64 // the sparse layers' MLP inputs, per token
			s.tap = func(l int, h []float32) {
				if m.Layers[l].Router == nil {
					return
				}
				for t := 0; t < len(h)/m.Dim; t++ {
					stream = append(stream, f64(h[t*m.Dim:(t+1)*m.Dim]))
				}
			}
			s.Reset()
			if _, err := s.Forward(ids, true); err != nil {
				t.Fatal(err)
			}
			seen := map[int]bool{}
			si := 0
			for l := range m.Layers {
				L := &m.Layers[l]
				if L.Router == nil {
					continue
				}
				_, want := naiveMoE(m, L, stream[si*len(ids):(si+1)*len(ids)])
				for tok, row := range rows {
					got := row[m.Vocab+si*m.TopK : m.Vocab+(si+1)*m.TopK]
					for j, e := range want[tok] {
						seen[e] = true
						if got[j] != float32(e) {
							t.Fatalf("layer %d token %d: routes %v, transcription %v", l, tok, got, want[tok])
						}
					}
				}
				si++
			}
			if len(seen) < m.Experts/2 {
				t.Errorf("only experts %v were ever chosen of %d: the router does not spread", seen, m.Experts)
			}
		})
	}
}
