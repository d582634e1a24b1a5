package cpu

import (
	"math"
	"testing"

	"logitscope/internal/model"
	"logitscope/internal/model/synth"
)

// gemmaMutation leaves out one piece of Gemma 3's semantics, to show that
// the reference check would catch an engine that did.
type gemmaMutation int

const (
	gemmaExact        gemmaMutation = iota
	gemmaNoUnitOffset               // norms scale by w instead of (1 + w)
	gemmaNoEmbedScale               // embeddings not multiplied by sqrt(hidden)
	gemmaExactScale                 // sqrt(hidden) not rounded to bf16
	gemmaHeadDimScale               // attention scaled by head_dim^-½
	gemmaGlobalRope                 // sliding layers rotate with rope_theta
	gemmaSiLU                       // SiLU instead of gelu_pytorch_tanh
	gemmaNoPostNorms                // no post_attention / post_feedforward norm
)

// naiveGemma3 is a float64 transcription of transformers'
// models/gemma3/modeling_gemma3.py (main, v5: Gemma3TextModel.forward,
// Gemma3DecoderLayer, Gemma3Attention, Gemma3RMSNorm, Gemma3MLP,
// Gemma3TextScaledWordEmbedding, Gemma3RotaryEmbedding) over a whole
// sequence, written from that file and not from forward.go. Config values
// come from the geometry; weights are the checkpoint's (norms as stored,
// w not 1 + w). mut leaves one piece out.
func naiveGemma3(m *model.Model, ids []int, mut gemmaMutation) [][]float64 {
	T, hd, eps := len(ids), m.HeadDim, float64(m.NormEps)
	// Gemma3RMSNorm: x·rsqrt(mean(x²)+eps)·(1.0 + weight).
	norm := func(x [][]float64, w []float32) [][]float64 {
		out := make([][]float64, len(x))
		for t, row := range x {
			var ss float64
			for _, v := range row {
				ss += v * v
			}
			r := 1 / math.Sqrt(ss/float64(len(row))+eps)
			out[t] = make([]float64, len(row))
			for i, v := range row {
				scale := 1 + float64(w[i])
				if mut == gemmaNoUnitOffset {
					scale = float64(w[i])
				}
				out[t][i] = v * r * scale
			}
		}
		return out
	}
	headNorm := func(x [][]float64, w []float32) [][]float64 {
		out := make([][]float64, len(x))
		for t, row := range x {
			for h := 0; h < len(row); h += hd {
				out[t] = append(out[t], norm([][]float64{row[h : h+hd]}, w)[0]...)
			}
		}
		return out
	}
	add := func(x, y [][]float64) {
		for t := range x {
			for i := range x[t] {
				x[t][i] += y[t][i]
			}
		}
	}

	// embed_scale = hidden_size**0.5, a float32 tensor cast to the
	// weights' dtype (bf16: 8 significant bits, rounded to nearest even).
	scale := math.Sqrt(float64(m.Dim))
	if mut != gemmaExactScale {
		step := math.Pow(2, math.Floor(math.Log2(scale))-7)
		scale = math.RoundToEven(scale/step) * step
	}
	if mut == gemmaNoEmbedScale {
		scale = 1
	}
	x := make([][]float64, T)
	for t, id := range ids {
		x[t] = f64(m.Embed.Row(id))
		for i := range x[t] {
			x[t][i] *= scale
		}
	}
	// Gemma3RotaryEmbedding: the full_attention type uses rope_theta,
	// sliding_attention rope_local_base_freq (both "default" here).
	invFreq := func(base float64) []float64 {
		inv := make([]float64, hd/2)
		for i := range inv {
			inv[i] = 1 / math.Pow(base, float64(2*i)/float64(hd))
		}
		return inv
	}
	global, local := invFreq(m.RopeTheta), invFreq(m.LocalRopeTheta)
	scaling := math.Pow(m.QueryPreAttnScalar, -0.5) // Gemma3Attention.scaling
	if mut == gemmaHeadDimScale {
		scaling = math.Pow(float64(hd), -0.5)
	}
	for l, L := range m.Layers {
		sliding := m.Window[l] > 0 // layer_types[l] == "sliding_attention"
		inv := global
		if sliding && mut != gemmaGlobalRope {
			inv = local
		}
		residual := x
		h := norm(x, L.AttnNorm) // input_layernorm
		q, k, v := linear64(h, L.Wq, L.Bq), linear64(h, L.Wk, L.Bk), linear64(h, L.Wv, L.Bv)
		q, k = headNorm(q, L.QNorm), headNorm(k, L.KNorm)
		for t := 0; t < T; t++ {
			q[t], k[t] = rope64(q[t], t, hd, inv), rope64(k[t], t, hd, inv)
		}
		attn := make([][]float64, T)
		for t := range attn {
			attn[t] = make([]float64, m.Heads*hd)
		}
		for head := 0; head < m.Heads; head++ {
			kvh := head / (m.Heads / m.KVHeads) // repeat_kv
			for i := 0; i < T; i++ {
				// create_sliding_window_causal_mask: i−window < j ≤ i.
				var w []float64
				var js []int
				for j := 0; j <= i; j++ {
					if sliding && j <= i-m.Window[l] {
						continue
					}
					var s float64
					for e := 0; e < hd; e++ {
						s += q[i][head*hd+e] * k[j][kvh*hd+e]
					}
					w, js = append(w, s*scaling), append(js, j)
				}
				mx := math.Inf(-1)
				for _, s := range w {
					mx = math.Max(mx, s)
				}
				var z float64
				for n := range w {
					w[n] = math.Exp(w[n] - mx)
					z += w[n]
				}
				for n, j := range js {
					for e := 0; e < hd; e++ {
						attn[i][head*hd+e] += w[n] / z * v[j][kvh*hd+e]
					}
				}
			}
		}
		h = linear64(attn, L.Wo, L.Bo)
		if mut != gemmaNoPostNorms {
			h = norm(h, L.PostAttnNorm)
		}
		x = make([][]float64, T)
		for t := range x {
			x[t] = append([]float64(nil), residual[t]...)
		}
		add(x, h)

		h = norm(x, L.MLPNorm) // pre_feedforward_layernorm
		g, u := linear64(h, L.Wgate, nil), linear64(h, L.Wup, nil)
		for t := range g {
			for i, a := range g[t] {
				if mut == gemmaSiLU {
					g[t][i] = a / (1 + math.Exp(-a)) * u[t][i]
					continue
				}
				// gelu_pytorch_tanh
				g[t][i] = 0.5 * a * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(a+0.044715*math.Pow(a, 3)))) * u[t][i]
			}
		}
		h = linear64(g, L.Wdown, nil)
		if mut != gemmaNoPostNorms {
			h = norm(h, L.PostMLPNorm)
		}
		add(x, h)
	}
	// final_logit_softcapping is null in Gemma 3's configs (GeometryOf
	// refuses a value): the logits are lm_head's, the tied embedding.
	return linear64(norm(x, m.Norm), m.Head, nil)
}

// Each piece of Gemma 3's semantics moves tiny-gemma3's logits by more than
// the reference check's tolerance, so the check would catch an engine that
// left it out. The exact transcription is within it.
func TestGemma3SemanticsMatter(t *testing.T) {
	m := load(t, synth.Presets["tiny-gemma3"])
	ids := sequence(12, m.Vocab) // longer than the window of 8
	s, _ := New(m, len(ids))
	got, err := s.Forward(ids, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		mut  gemmaMutation
	}{
		{"exact", gemmaExact},
		{"w instead of 1+w", gemmaNoUnitOffset},
		{"no embedding scale", gemmaNoEmbedScale},
		{"embedding scale not rounded to bf16", gemmaExactScale},
		{"head_dim^-1/2 attention scale", gemmaHeadDimScale},
		{"rope_theta on sliding layers", gemmaGlobalRope},
		{"SiLU", gemmaSiLU},
		{"no post norms", gemmaNoPostNorms},
	} {
		t.Run(c.name, func(t *testing.T) {
			worst, scale, within := nearReference(got, naiveGemma3(m, ids, c.mut))
			t.Logf("max abs %.2e (logits up to %.1f)", worst, scale)
			if within != (c.mut == gemmaExact) {
				t.Fatalf("the CPU engine is %g from this reference (logits up to %.1f)", worst, scale)
			}
		})
	}
}
