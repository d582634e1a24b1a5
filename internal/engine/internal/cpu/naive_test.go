package cpu

import (
	"math"
	"slices"

	"logitscope/internal/model"
)

// naiveForward is a literal float64 transcription of transformers'
// Qwen2/Llama forward pass over a whole sequence: full attention matrix
// with a causal mask, rotate_half as cat(-x2, x1), no KV cache. It shares
// no code with forward.go. Qwen3's q_norm and k_norm follow
// models/qwen3/modeling_qwen3.py (Qwen3Attention.forward): the projections
// viewed as (heads, hd), each head RMS-normalized, then RoPE. Gemma 3 has
// its own transcription (naive_gemma3_test.go); a sparse layer's MLP is
// naiveMoE (naive_moe_test.go).
func naiveForward(m *model.Model, ids []int) [][]float64 {
	if m.Arch == "Gemma3ForCausalLM" {
		return naiveGemma3(m, ids, gemmaExact)
	}
	T, hd := len(ids), m.HeadDim
	inv := invFreq64(m.Geometry)
	x := make([][]float64, T)
	for t, id := range ids {
		x[t] = f64(m.Embed.Row(id))
	}
	for l, L := range m.Layers {
		h := norm64(x, L.AttnNorm, float64(m.NormEps))
		q, k, v := linear64(h, L.Wq, L.Bq), linear64(h, L.Wk, L.Bk), linear64(h, L.Wv, L.Bv)
		if m.QKNorm {
			q, k = headNorm64(q, L.QNorm, hd, float64(m.NormEps)), headNorm64(k, L.KNorm, hd, float64(m.NormEps))
		}
		for t := 0; t < T; t++ {
			q[t], k[t] = rope64(q[t], t, hd, inv), rope64(k[t], t, hd, inv)
		}
		attn := make([][]float64, T)
		for t := range attn {
			attn[t] = make([]float64, m.Heads*hd)
		}
		window := T // no sliding window: every earlier position
		if m.Window != nil && m.Window[l] > 0 {
			window = m.Window[l]
		}
		for head := 0; head < m.Heads; head++ {
			kvh := head / (m.Heads / m.KVHeads)
			for i := 0; i < T; i++ {
				w := make([]float64, T)
				mx := math.Inf(-1)
				for j := 0; j < T; j++ {
					w[j] = math.Inf(-1) // causal, sliding-window mask
					if j <= i && j > i-window {
						var s float64
						for e := 0; e < hd; e++ {
							s += q[i][head*hd+e] * k[j][kvh*hd+e]
						}
						w[j] = s / math.Sqrt(float64(hd))
					}
					mx = math.Max(mx, w[j])
				}
				var z float64
				for j := range w {
					w[j] = math.Exp(w[j] - mx)
					z += w[j]
				}
				for j := range w {
					for e := 0; e < hd; e++ {
						attn[i][head*hd+e] += w[j] / z * v[j][kvh*hd+e]
					}
				}
			}
		}
		o := linear64(attn, L.Wo, L.Bo)
		for t := range x {
			for i := range x[t] {
				x[t][i] += o[t][i]
			}
		}
		h = norm64(x, L.MLPNorm, float64(m.NormEps))
		var dn [][]float64
		if L.Router != nil {
			dn, _ = naiveMoE(m, &L, h)
		} else {
			dn = swiglu64(h, model.Expert{Wgate: L.Wgate, Wup: L.Wup, Wdown: L.Wdown}, L.Bgate, L.Bup, L.Bdown)
		}
		for t := range x {
			for i := range x[t] {
				x[t][i] += dn[t][i]
			}
		}
	}
	return linear64(norm64(x, m.Norm, float64(m.NormEps)), m.Head, nil)
}

func f64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

func norm64(x [][]float64, w []float32, eps float64) [][]float64 {
	out := make([][]float64, len(x))
	for t, row := range x {
		var ss float64
		for _, v := range row {
			ss += v * v
		}
		r := 1 / math.Sqrt(ss/float64(len(row))+eps)
		out[t] = make([]float64, len(row))
		for i, v := range row {
			out[t][i] = float64(w[i]) * v * r
		}
	}
	return out
}

// headNorm64 is q_norm(q.view(T, heads, hd)): norm64 over each head's hd
// values, the rows put back together as (T, heads*hd).
func headNorm64(x [][]float64, w []float32, hd int, eps float64) [][]float64 {
	out := make([][]float64, len(x))
	for t, row := range x {
		var heads [][]float64 // (heads, hd)
		for h := 0; h < len(row); h += hd {
			heads = append(heads, row[h:h+hd])
		}
		for _, nh := range norm64(heads, w, eps) {
			out[t] = append(out[t], nh...)
		}
	}
	return out
}

// linear64: x (T, in) @ Wᵀ (in, out) + b -> (T, out)
func linear64(x [][]float64, W *model.Matrix, b []float32) [][]float64 {
	out := make([][]float64, len(x))
	for t, row := range x {
		out[t] = make([]float64, W.Rows)
		for r := 0; r < W.Rows; r++ {
			var s float64
			for c, v := range W.Row(r) {
				s += float64(v) * row[c]
			}
			if b != nil {
				s += float64(b[r])
			}
			out[t][r] = s
		}
	}
	return out
}

// rope64: x*cos + rotate_half(x)*sin per head, with emb = cat(freqs, freqs).
// invFreq64 is RoPE's inverse frequencies, scaled as transformers'
// modeling_rope_utils.py does for rope_type linear and llama3.
func invFreq64(g model.Geometry) []float64 {
	r := g.Rope
	dim := g.RopeDim() // head_dim · partial_rotary_factor
	out := make([]float64, dim/2)
	for i := range out {
		f := 1 / math.Pow(g.RopeTheta, float64(2*i)/float64(dim))
		switch r.Type {
		case "linear":
			f /= r.Factor
		case "llama3":
			old := float64(r.OriginalMaxPos)
			wavelen := 2 * math.Pi / f
			if wavelen > old/r.LowFreqFactor {
				f /= r.Factor
			} else if wavelen >= old/r.HighFreqFactor {
				s := (old/wavelen - r.LowFreqFactor) / (r.HighFreqFactor - r.LowFreqFactor)
				f = (1-s)*f/r.Factor + s*f
			}
		}
		out[i] = f
	}
	return out
}

// With fewer frequencies than hd/2 (partial_rotary_factor), the head's
// first 2·len(inv) values rotate among themselves (apply_rotary_pos_emb's
// q_rot) and the rest pass (q_pass).
func rope64(x []float64, pos, hd int, inv []float64) []float64 {
	out := slices.Clone(x)
	half := len(inv)
	for h := 0; h < len(x); h += hd {
		for i := 0; i < 2*half; i++ {
			a := float64(pos) * inv[i%half]
			var rot float64 // rotate_half(x) = cat(-x2, x1)
			if i < half {
				rot = -x[h+i+half]
			} else {
				rot = x[h+i-half]
			}
			out[h+i] = x[h+i]*math.Cos(a) + rot*math.Sin(a)
		}
	}
	return out
}

// swiglu64: down(silu(gate x + bg) · (up x + bu)) + bd, for x (T, d).
func swiglu64(x [][]float64, e model.Expert, bg, bu, bd []float32) [][]float64 {
	g, u := linear64(x, e.Wgate, bg), linear64(x, e.Wup, bu)
	for t := range g {
		for i := range g[t] {
			g[t][i] = g[t][i] / (1 + math.Exp(-g[t][i])) * u[t][i]
		}
	}
	return linear64(g, e.Wdown, bd)
}
