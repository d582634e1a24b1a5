// Package cpu is the reference forward pass: weights as stored (float32,
// the checkpoint's bf16 or f16, quant's q8/q6/q4, ggml's blocks) decoded
// exactly to float32 inside the matrix products (matmul.go, kernel.go),
// float32 activations, one plain loop per other operation, matching
// Hugging Face transformers' Qwen2/Qwen3/Llama/Mistral/Gemma 3 modeling
// code. Every GPU kernel is checked against it.
package cpu

import (
	"fmt"
	"math"
	"slices"

	"logitscope/internal/model"
	"logitscope/internal/sys/exp64"
)

// State is one sequence being decoded: the model and its KV cache.
type State struct {
	m       *model.Model
	invFreq [][]float32 // per layer: (HeadDim/2,) RoPE inverse frequencies
	k, v    [][]float32 // per layer: (capacity, KVHeads*HeadDim)
	pos     int         // tokens already in the cache
	cap     int
	tap     func(layer int, h []float32) // tests: sees each layer's MLP input (T, d)

	gate, up []float32 // mlp's scratch: (T, ff) and (T, 2ff), grown to the largest seen
	// rows is Rows' value, (n, Vocab+Routes), grown to the most rows a
	// call has kept and overwritten by the next: a chunk's logits are 19 MB
	// at a 151,936-token vocab, which engine.wasm's memory would keep as
	// garbage until a collection, once per chunk.
	rows []float32

	stacks map[*model.Matrix]stacked // stack's results by their first part, made once

	acts8 bool // weight products round the activations to 8 bits (a8.go)
}

// Acts8 makes the products with quantized weights round their
// activations to 8-bit blocks first, as llama.cpp's CPU backend does
// (a8.go); float32 and 16-bit weights keep float32 activations.
func (s *State) Acts8() { s.acts8 = true }

// matmul is the package's matmul, or matmulA8 where the state rounds
// activations and every piece of W takes them.
func (s *State) matmul(out, x []float32, W *model.Matrix, b []float32, T int) {
	if s.acts8 && takesA8(W) {
		matmulA8(out, x, W, b, T)
		return
	}
	matmul(out, x, W, b, T)
}

// New makes an empty KV cache for up to capacity tokens.
func New(m *model.Model, capacity int) (*State, error) {
	if err := m.CheckCapacity(capacity); err != nil {
		return nil, err
	}
	kvDim := m.KVHeads * m.HeadDim
	s := &State{m: m, cap: capacity, k: make([][]float32, m.NumLayers), v: make([][]float32, m.NumLayers), stacks: map[*model.Matrix]stacked{}}
	for l := range s.k {
		s.k[l] = make([]float32, capacity*kvDim)
		s.v[l] = make([]float32, capacity*kvDim)
	}
	global := m.InvFreq()
	s.invFreq = make([][]float32, m.NumLayers)
	for l := range s.invFreq {
		s.invFreq[l] = global
		if m.LocalRope(l) {
			s.invFreq[l] = m.LayerInvFreq(l)
		}
	}
	return s, nil
}

// Pos is the number of tokens in the cache.
func (s *State) Pos() int { return s.pos }

// Forward appends tokens to the sequence and returns rows (Vocab+Routes,)
// of their own: one per token when all is set (teacher forcing), else
// only the last.
func (s *State) Forward(tokens []int, all bool) ([][]float32, error) {
	first := len(tokens) - 1
	if all {
		first = 0
	}
	rows, err := s.forward(tokens, first)
	if err != nil {
		return nil, err
	}
	return Split(rows, s.m.Vocab+s.m.Routes()), nil
}

// Split cuts rows (n, w) into n rows of their own.
func Split(rows []float32, w int) [][]float32 {
	out := make([][]float32, len(rows)/w)
	for i := range out {
		out[i] = slices.Clone(rows[i*w : (i+1)*w])
	}
	return out
}

// Append appends tokens to the sequence and computes no logits: a
// prefill's chunks before the last skip the LM head.
func (s *State) Append(tokens []int) error {
	_, err := s.forward(tokens, len(tokens))
	return err
}

// Rows appends tokens to the sequence and returns the rows of tokens
// first..len(tokens)−1, (n, Vocab+Routes): each the token's logits, then
// its routes (model.Geometry.Routes). They lie in the state's own buffer,
// which the next call overwrites.
func (s *State) Rows(tokens []int, first int) ([]float32, error) {
	return s.forward(tokens, first)
}

// Check refuses tokens that would not fit the cache after pending more
// tokens, or that lie outside the vocabulary, before any is run.
func (s *State) Check(tokens []int, pending int) error {
	return s.m.CheckTokens(s.pos+pending, s.cap, tokens)
}

// forward appends tokens and returns the rows of tokens first..T-1 (Rows).
func (s *State) forward(tokens []int, first int) ([]float32, error) {
	return s.layers(tokens, first, 0, nil, nil)
}

// Trace runs tokens as a sequence of their own, teacher forced, from layer
// from: x (T,d) is the residual stream entering it (nil: the tokens'
// embeddings, from 0), as an earlier trace's seen showed it. seen, if set,
// is told the residual stream (T,d) leaving each layer l ≥ from; it must
// not keep it. The rows (T, Vocab+Routes) lie in the state's buffer, as
// Rows's; a sparse layer before from routed nothing here, so its routes
// are 0. The cache is emptied before and after: layers before from have
// no keys for these tokens, so the sequence cannot go on. Started from a
// boundary that a full trace showed, it gives that trace's bits: the
// sweeps of package sensitivity recompute only what follows a change.
func (s *State) Trace(tokens []int, from int, x []float32, seen func(l int, x []float32)) ([]float32, error) {
	if from < 0 || from > s.m.NumLayers || x == nil && from != 0 {
		return nil, fmt.Errorf("trace from layer %d of %d without its residual stream", from, s.m.NumLayers)
	}
	if x != nil && len(x) != len(tokens)*s.m.Dim {
		return nil, fmt.Errorf("trace: a residual stream of %d values for %d tokens of %d", len(x), len(tokens), s.m.Dim)
	}
	s.pos = 0
	defer s.Reset()
	return s.layers(tokens, 0, from, x, seen)
}

// Use makes the state run m, a model of the same geometry (another mix
// of the same weights); the cache is kept.
func (s *State) Use(m *model.Model) error {
	g, h := s.m.Geometry, m.Geometry
	if g.Dim != h.Dim || g.NumLayers != h.NumLayers || g.Vocab != h.Vocab || g.KVHeads != h.KVHeads || g.HeadDim != h.HeadDim || g.Routes() != h.Routes() {
		return fmt.Errorf("cpu: a model of another geometry")
	}
	s.m = m
	clear(s.stacks) // keyed by a first part that m may stack with others
	return nil
}

// Cap is the most tokens the cache holds.
func (s *State) Cap() int { return s.cap }

// layers appends tokens and returns the rows of tokens first..T-1 (Rows),
// running layers from.. on x0 (T,d), or on the embeddings when nil; seen
// (Trace) may be nil.
func (s *State) layers(tokens []int, first, from int, x0 []float32, seen func(l int, x []float32)) ([]float32, error) {
	m := s.m
	T := len(tokens)
	if T == 0 {
		return nil, nil
	}
	if err := m.CheckTokens(s.pos, s.cap, tokens); err != nil {
		return nil, err
	}
	d, qDim, kvDim := m.Dim, m.Heads*m.HeadDim, m.KVHeads*m.HeadDim

	// x (T,d): the residual stream.
	x := make([]float32, T*d)
	if x0 != nil {
		copy(x, x0)
	} else {
		for t, id := range tokens {
			row(m.Embed, id, x[t*d:(t+1)*d])
		}
		if m.EmbedScale != 0 {
			for i := range x {
				x[i] *= m.EmbedScale
			}
		}
	}
	unit, eps := m.NormUnitOffset, m.NormEps
	h := make([]float32, T*d)
	q := make([]float32, T*qDim)
	att := make([]float32, T*qDim)
	o := make([]float32, T*d)
	// rots: the rotations of positions pos..pos+T−1 by RoPE frequency
	// table (rotations), made once for all the layers that share one.
	rots := map[*float32][]float32{}
	// routes (T, Routes): the experts each sparse layer picked per token.
	routes := make([]float32, T*m.Routes())
	sparse := 0 // the sparse layers before l
	for l := range from {
		if m.Layers[l].Router != nil {
			sparse++
		}
	}

	for l := from; l < len(m.Layers); l++ {
		L := &m.Layers[l]
		rmsnorm(h, x, L.AttnNorm, d, eps, unit)
		// Keys and values go straight into the cache at positions pos..pos+T.
		kNew := s.k[l][s.pos*kvDim : (s.pos+T)*kvDim]
		vNew := s.v[l][s.pos*kvDim : (s.pos+T)*kvDim]
		if W, b, ok := s.stack([]*model.Matrix{L.Wq, L.Wk, L.Wv}, [][]float32{L.Bq, L.Bk, L.Bv}); ok {
			qkv := make([]float32, T*W.Rows)
			s.matmul(qkv, h, W, b, T)
			unstack(qkv, T, q, kNew, vNew)
		} else {
			s.matmul(q, h, L.Wq, L.Bq, T)
			s.matmul(kNew, h, L.Wk, L.Bk, T)
			s.matmul(vNew, h, L.Wv, L.Bv, T)
		}
		if m.QKNorm {
			// Qwen3, Gemma 3: every head of q (T*Heads rows of hd) and of
			// the new keys (T*KVHeads rows) is RMS-normalized before RoPE.
			rmsnorm(q, q, L.QNorm, m.HeadDim, eps, unit)
			rmsnorm(kNew, kNew, L.KNorm, m.HeadDim, eps, unit)
		}
		if f := s.invFreq[l]; len(f) > 0 {
			rot := rots[&f[0]]
			if rot == nil {
				rot = s.rotations(f, T)
				rots[&f[0]] = rot
			}
			for t := 0; t < T; t++ {
				r := rot[2*t*len(f) : 2*(t+1)*len(f)]
				rope(q[t*qDim:(t+1)*qDim], r, m.HeadDim)
				rope(kNew[t*kvDim:(t+1)*kvDim], r, m.HeadDim)
			}
		}
		s.attention(att, q, l, T)
		s.matmul(o, att, L.Wo, L.Bo, T)
		if L.PostAttnNorm != nil {
			rmsnorm(o, o, L.PostAttnNorm, d, eps, unit)
		}
		add(x, o)

		rmsnorm(h, x, L.MLPNorm, d, eps, unit)
		if s.tap != nil {
			s.tap(l, h)
		}
		if L.Router != nil {
			s.moe(o, h, L, T, routes, sparse)
			sparse++
		} else {
			s.mlp(o, h, model.Expert{Wgate: L.Wgate, Wup: L.Wup, Wdown: L.Wdown}, L.Bgate, L.Bup, L.Bdown, T)
		}
		if L.PostMLPNorm != nil {
			rmsnorm(o, o, L.PostMLPNorm, d, eps, unit)
		}
		add(x, o)
		if seen != nil {
			seen(l, x)
		}
	}
	s.pos += T

	n := T - first
	if n == 0 {
		return nil, nil
	}
	rmsnorm(h[:n*d], x[first*d:], m.Norm, d, eps, unit)
	R := m.Routes()
	w := m.Vocab + R
	if cap(s.rows) < n*w {
		s.rows = make([]float32, n*w)
	}
	rows := s.rows[:n*w]
	// logits (n, Vocab) at the start, then each row moved to its place,
	// last first (row i only moves up), and its routes after it.
	s.matmul(rows[:n*m.Vocab], h[:n*d], m.Head, nil, n)
	if R > 0 {
		for i := n - 1; i >= 0; i-- {
			copy(rows[i*w:i*w+m.Vocab], rows[i*m.Vocab:(i+1)*m.Vocab])
			copy(rows[i*w+m.Vocab:(i+1)*w], routes[(first+i)*R:(first+i+1)*R])
		}
	}
	return rows, nil
}

// mlp: out (T,d) = Wdown (act(Wgate x + bg) ⊙ (Wup x + bu)) + bd for x
// (T,d), act SiLU or Gemma's GELU-tanh.
func (s *State) mlp(out, x []float32, e model.Expert, bg, bu, bd []float32, T int) {
	ff := e.Wgate.Rows
	n := T * ff
	if cap(s.gate) < n {
		s.gate, s.up = make([]float32, n), make([]float32, 2*n)
	}
	// gate (T,ff) and up (T,ff) from one product where they stack: row t
	// of gu is (gate_t, up_t), so g and u stride 2ff.
	gate, g, u, stride := s.gate[:n], s.gate[:n], s.up[:n], ff
	if W, b, ok := s.stack([]*model.Matrix{e.Wgate, e.Wup}, [][]float32{bg, bu}); ok {
		gu := s.up[:2*n]
		s.matmul(gu, x, W, b, T)
		g, u, stride = gu, gu[ff:], 2*ff
	} else {
		s.matmul(g, x, e.Wgate, bg, T)
		s.matmul(u, x, e.Wup, bu, T)
	}
	// The activation costs a float64 exponential or tanh per value: the
	// cores share them.
	parallel(n, 2048, func(lo, hi int) {
		for i := lo; i < hi; {
			// Token t's columns c.. of this share.
			t, c := i/ff, i%ff
			end := min(hi, (t+1)*ff)
			out, gt, ut := gate[i:end], g[t*stride+c:], u[t*stride+c:]
			if !s.m.GeluTanh {
				siluMul(out, gt[:len(out)], ut[:len(out)])
			} else {
				for j := range out {
					out[j] = geluTanh(gt[j]) * ut[j]
				}
			}
			i = end
		}
	})
	s.matmul(out, gate, e.Wdown, bd, T)
}

// moe is a sparse layer's MLP, as transformers' Qwen2MoeTopKRouter,
// MixtralExperts and Qwen2MoeSparseMoeBlock compute it (main, v5): the
// router's logits (T, Experts) softmaxed in float32, the TopK most
// probable experts per token (renormalized to sum 1 with NormTopK), and
// out (T,d) = Σ p_e · expert_e(h) summed in increasing expert order into
// zeros, as index_add_ does, plus sigmoid(SharedGate h) · shared(h) for
// Qwen2-MoE. GLM-4.5 (Sigmoid) routes with RouteGrouped instead and adds
// its shared experts ungated. Each expert runs once over the tokens
// routed to it. The chosen ids, in the router's order, go to routes (T,
// Routes) at sparse layer si's columns.
func (s *State) moe(out, h []float32, L *model.Layer, T int, routes []float32, si int) {
	m := s.m
	d, E, K := m.Dim, m.Experts, m.TopK
	probs := make([]float32, T*E)
	s.matmul(probs, h, L.Router, nil, T)
	type pick struct {
		t int
		p float32
	}
	byExpert := make([][]pick, E)
	for t := 0; t < T; t++ {
		ids, ps := s.route(probs[t*E:(t+1)*E], L)
		for j, e := range ids {
			byExpert[e] = append(byExpert[e], pick{t, ps[j]})
			routes[t*m.Routes()+si*K+j] = float32(e)
		}
	}
	clear(out[:T*d])
	for e, picks := range byExpert {
		if len(picks) == 0 {
			continue
		}
		n := len(picks)
		xe := make([]float32, n*d)
		for i, pk := range picks {
			copy(xe[i*d:(i+1)*d], h[pk.t*d:(pk.t+1)*d])
		}
		ye := make([]float32, n*d)
		s.mlp(ye, xe, L.Experts[e], nil, nil, nil, n)
		for i, pk := range picks {
			ot, yt := out[pk.t*d:(pk.t+1)*d], ye[i*d:(i+1)*d]
			for c := range ot {
				ot[c] += float32(yt[c] * pk.p)
			}
		}
	}
	if L.Shared == nil {
		return
	}
	shared := make([]float32, T*d)
	s.mlp(shared, h, *L.Shared, nil, nil, nil, T)
	gate := make([]float32, T)
	if L.SharedGate != nil {
		s.matmul(gate, h, L.SharedGate, nil, T)
	}
	for t := 0; t < T; t++ {
		g := float32(1) // GLM's shared experts: no gate
		if L.SharedGate != nil {
			g = sigmoid(gate[t])
		}
		ot, st := out[t*d:(t+1)*d], shared[t*d:(t+1)*d]
		for c := range ot {
			ot[c] += float32(g * st[c])
		}
	}
}

// route picks one token's experts and their weights from its router
// logits (Experts,), overwriting them: GLM-4.5's RouteGrouped, or the
// softmax, its TopK most probable (renormalized with NormTopK).
func (s *State) route(logits []float32, L *model.Layer) ([]int, []float32) {
	m := s.m
	if m.Sigmoid {
		return RouteGrouped(logits, L.ScoreBias, m.Geometry)
	}
	softmax(logits, make([]float64, len(logits)))
	ids, ps := topK(logits, m.TopK)
	if m.NormTopK {
		var sum float32
		for _, p := range ps {
			sum += p
		}
		for j := range ps {
			ps[j] /= sum
		}
	}
	return ids, ps
}

// topK returns the indices of the k largest of p, largest first (the
// lower index first among equals), and their values.
func topK(p []float32, k int) ([]int, []float32) {
	ids := make([]int, 0, k)
	vals := make([]float32, 0, k)
	taken := make([]bool, len(p))
	for range k {
		best := -1
		for i, v := range p {
			if !taken[i] && (best < 0 || v > p[best]) {
				best = i
			}
		}
		taken[best] = true
		ids, vals = append(ids, best), append(vals, p[best])
	}
	return ids, vals
}

func sigmoid(x float32) float32 { return float32(1 / (1 + exp64.Exp(-float64(x)))) }

// rope rotates each head of v (heads*hd,) in place by rot (a token's
// pairs of cos and sin, rotations), NeoX style (rotate_half) within the
// head's first rd = len(rot) values (rd < hd: partial_rotary_factor):
// element i < rd/2 pairs with element i+rd/2; elements rd.. pass.
func rope(v, rot []float32, hd int) {
	half := len(rot) / 2
	for i := range len(rot) / 2 {
		c, sn := rot[2*i], rot[2*i+1]
		for h := 0; h < len(v); h += hd {
			x1, x2 := v[h+i], v[h+i+half]
			v[h+i] = x1*c - x2*sn
			v[h+i+half] = x2*c + x1*sn
		}
	}
}

// rotations is (T, len(invFreq)) pairs (cos, sin) of positions
// pos..pos+T−1 (model.Rotation): the same for every layer with these
// frequencies, and for q and k. Made per layer, for q and for k, they
// took a 79-token Qwen2.5-0.5B prefill about 5 ms on the calling core
// (1.2% of its profile's samples, in a prefill of about 160 ms).
func (s *State) rotations(invFreq []float32, T int) []float32 {
	n := len(invFreq)
	rot := make([]float32, 2*T*n)
	for t := range T {
		for i, f := range invFreq {
			rot[2*(t*n+i)], rot[2*(t*n+i)+1] = model.Rotation(s.pos+t, f)
		}
	}
	return rot
}

// attention: out (T, Heads*hd) = softmax(q kᵀ · AttnScale, causal) v, reading
// keys and values 0..pos+t from layer l's cache, or only the last W of them
// when the layer has a sliding window W. Query head h reads KV head
// h / (Heads/KVHeads) (grouped-query attention). q·k is a dot product in
// the order of the weights' (kernel.go), four keys at a time, and each
// output value is a chain of multiply-adds over the keys in order
// (axpy): per query and head, whatever T, so decode equals teacher
// forcing.
func (s *State) attention(out, q []float32, l, T int) {
	m := s.m
	hd, qDim, kvDim := m.HeadDim, m.Heads*m.HeadDim, m.KVHeads*m.HeadDim
	group := m.Heads / m.KVHeads
	scale := m.AttnScale()
	K, V := s.k[l], s.v[l]
	window := 0
	if m.Window != nil {
		window = m.Window[l]
	}
	parallel(T*m.Heads, 1, func(lo, hi int) {
		scores, exps := make([]float32, s.pos+T), make([]float64, s.pos+T)
		pad := make([]float32, 4*hd) // the last keys when fewer than 4 remain
		var t4 [4]float32
		for th := lo; th < hi; th++ {
			t, h := th/m.Heads, th%m.Heads
			n := s.pos + t + 1 // causal: keys first..pos+t
			first := 0
			if window > 0 && n > window {
				first = n - window
			}
			qh := q[t*qDim+h*hd : t*qDim+(h+1)*hd]
			kvOff := (h / group) * hd
			// Whole quads of keys in one call (a host's kernel in
			// engine.wasm takes them at once), then the rest padded.
			full := first + (n-first)/4*4
			dotRows(K[first*kvDim+kvOff:], kvDim, qh, hd, scores[first:full])
			if full < n {
				clear(pad)
				for r := range n - full {
					copy(pad[r*hd:(r+1)*hd], K[(full+r)*kvDim+kvOff:(full+r)*kvDim+kvOff+hd])
				}
				tile4x1(pad, hd, qh, hd, &t4)
				copy(scores[full:n], t4[:])
			}
			for j := first; j < n; j++ {
				scores[j] *= scale
			}
			softmax(scores[first:n], exps[first:n])
			oh := out[t*qDim+h*hd : t*qDim+(h+1)*hd]
			clear(oh)
			axpy(oh, scores[first:n], V[first*kvDim+kvOff:], kvDim)
		}
	})
}

// rmsnorm: out[t] = x[t] · rsqrt(mean(x[t]²) + eps) · w, for each row of
// x (T,d), or · (1 + w) with unit (Gemma3RMSNorm: 1 + w is a float32 sum,
// as torch computes it). The mean is accumulated in float64 so that d does
// not matter. out may be x: each element is read before it is written.
func rmsnorm(out, x, w []float32, d int, eps float32, unit bool) {
	for t := 0; t < len(out)/d; t++ {
		xt, ot := x[t*d:(t+1)*d], out[t*d:(t+1)*d]
		var ss float64
		for _, v := range xt {
			ss += float64(v) * float64(v)
		}
		r := float32(1 / math.Sqrt(float64(float32(ss/float64(d))+eps)))
		if unit {
			for i, v := range xt {
				ot[i] = (1 + w[i]) * (v * r)
			}
			continue
		}
		for i, v := range xt {
			ot[i] = w[i] * (v * r)
		}
	}
}

// softmax: x = e^(x − max x) / Σ e^(x − max x), the exponentials (into
// e, len(x)) and their sum in float64.
func softmax(x []float32, e []float64) {
	mx := x[0]
	for _, v := range x[1:] {
		mx = max(mx, v)
	}
	exp64.Shift(e, x, mx)
	var sum float64
	for i, v := range e {
		x[i] = float32(v)
		sum += v
	}
	inv := 1 / sum
	for i := range x {
		x[i] = float32(float64(x[i]) * inv)
	}
}

// geluTanh is gelu_pytorch_tanh: ½x(1 + tanh(√(2/π)(x + 0.044715x³))).
func geluTanh(x float32) float32 {
	v := float64(x)
	return float32(0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))))
}

func add(x, y []float32) {
	for i := range x {
		x[i] += y[i]
	}
}

// Reset empties the sequence; the cache is reused.
func (s *State) Reset() { s.pos = 0 }
