// Package model holds a decoder-only transformer's geometry and float32
// weights, loaded from a checkpoint and checked against its config. It knows
// the tensor names and semantics of Qwen2ForCausalLM, Qwen3ForCausalLM,
// LlamaForCausalLM, MistralForCausalLM, Gemma3ForCausalLM, the Qwen2 and
// Qwen3 mixtures of experts and, in glm4moe.go, Glm4MoeForCausalLM.
package model

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/routing"
)

// Geometry is what the forward pass needs to know of the config.
type Geometry struct {
	Arch         string
	Dim          int     // hidden size d
	Intermediate int     // MLP intermediate size (intermediate_size)
	NumLayers    int     //
	Heads        int     // query heads
	KVHeads      int     // key/value heads (GQA: Heads is a multiple)
	HeadDim      int     //
	RotaryDim    int     // RoPE rotates each head's first RotaryDim values, the rest pass (partial_rotary_factor); 0: all HeadDim
	Vocab        int     // rows of the embedding and of the LM head
	MaxPos       int     // context length
	NormEps      float32 // RMSNorm epsilon
	RopeTheta    float64 //
	Rope         RopeScaling
	// Window is each layer's attention window: 0 attends to every earlier
	// position, W > 0 to the last W (keys j with i−W < j ≤ i).
	Window   []int
	QKVBias  bool // q/k/v projections have biases
	OBias    bool // o_proj has a bias (Llama and Qwen3 attention_bias)
	MLPBias  bool // gate, up and down have biases (Llama mlp_bias)
	QKNorm   bool // q and k are RMS-normalized per head before RoPE (Qwen3, Gemma 3)
	TiedHead bool // LM head is the embedding

	// Gemma 3. NormUnitOffset: every RMSNorm scales by (1 + w), not w.
	// EmbedScale: embeddings are multiplied by it (0: not at all).
	// GeluTanh: the MLP gates with gelu_pytorch_tanh instead of SiLU.
	// SandwichNorm: the attention and MLP outputs are RMS-normalized
	// (post_attention_layernorm, post_feedforward_layernorm) before the
	// residual add. QueryPreAttnScalar: attention scales by its −½ power
	// instead of head_dim's (0: head_dim). LocalRopeTheta: the RoPE base of
	// sliding-window layers, which use no rope_scaling (0: one base for all).
	NormUnitOffset     bool
	EmbedScale         float32
	GeluTanh           bool
	SandwichNorm       bool
	QueryPreAttnScalar float64
	LocalRopeTheta     float64

	// Mixture of experts (Qwen2-MoE, Qwen3-MoE): on the layers Sparse
	// marks, the MLP is a router (Experts, d) that picks TopK of Experts
	// SwiGLU experts of width ExpertIntermediate per token, weighted by
	// their softmax probabilities (renormalized over the TopK when
	// NormTopK); SharedIntermediate > 0 adds Qwen2-MoE's shared expert
	// behind a sigmoid gate. Other layers keep the dense MLP of
	// Intermediate. Sparse is nil for dense models.
	Experts, TopK      int
	ExpertIntermediate int
	SharedIntermediate int
	NormTopK           bool
	Sparse             []bool

	// GLM-4.5's routing (Glm4MoeForCausalLM, glm4moe.go) where Sigmoid:
	// sigmoid scores; each token's experts chosen by score plus the
	// layer's ScoreBias among the TopKGroup best of Groups equal groups;
	// weights the unbiased scores (over their sum when NormTopK) times
	// RoutedScale. SharedUngated: the shared experts are added without a
	// gate. MTPLayers: multi-token prediction layers stored after the
	// causal ones, checked but never run.
	Sigmoid           bool
	Groups, TopKGroup int
	RoutedScale       float32
	SharedUngated     bool
	MTPLayers         int
}

// SparseLayers counts the layers whose MLP is routed.
func (g Geometry) SparseLayers() int {
	n := 0
	for _, s := range g.Sparse {
		if s {
			n++
		}
	}
	return n
}

// Routes is how many expert ids a forward pass reports per position after
// the logits: TopK for each sparse layer, in layer order (0 for a dense
// model). Every engine writes them into its logit rows, so that routing
// crosses every host exactly as the logits do.
func (g Geometry) Routes() int { return g.SparseLayers() * g.TopK }

// RouteLayout labels those routes for readers of a row: the sparse
// layers' numbers, TopK and the number of experts. A dense model's is the
// zero Layout.
func (g Geometry) RouteLayout() routing.Layout {
	if g.SparseLayers() == 0 {
		return routing.Layout{}
	}
	l := routing.Layout{TopK: g.TopK, Experts: g.Experts}
	for i, s := range g.Sparse {
		if s {
			l.Layers = append(l.Layers, i)
		}
	}
	return l
}

// CheckCapacity refuses a KV cache longer than the model's context.
func (g Geometry) CheckCapacity(capacity int) error {
	if capacity > g.MaxPos {
		return fmt.Errorf("%d tokens exceed the model's context of %d (max_position_embeddings)", capacity, g.MaxPos)
	}
	return nil
}

// CheckTokens refuses tokens that would not fit a KV cache of capacity
// holding pos tokens, or that lie outside the vocabulary: every engine
// checks a submission here before touching its cache.
func (g Geometry) CheckTokens(pos, capacity int, tokens []int) error {
	if pos+len(tokens) > capacity {
		return fmt.Errorf("%d tokens exceed the KV cache of %d (context %d)", pos+len(tokens), capacity, g.MaxPos)
	}
	for i, id := range tokens {
		if id < 0 || id >= g.Vocab {
			return fmt.Errorf("token id %d at position %d is outside the vocabulary of %d", id, pos+i, g.Vocab)
		}
	}
	return nil
}

// Matrix is a (Rows, Cols) Linear weight W (out, in) in Hugging Face's
// layout and row order, held either as row-major float32 (Data) or, when
// Data is nil, as its source stores it (Pieces, in row order, covering
// every row once): the CPU engine computes with the stored rows directly,
// so that a quantized model takes its stored size in memory, not float32's.
type Matrix struct {
	Rows, Cols int
	Data       []float32
	Pieces     []Piece
}

// Row returns row r (Cols,) of a float32 matrix without copying.
func (m *Matrix) Row(r int) []float32 { return m.Data[r*m.Cols : (r+1)*m.Cols] }

// Layer is one transformer block.
type Layer struct {
	AttnNorm       []float32 // (d,)
	Wq, Wk, Wv, Wo *Matrix   // (Heads*hd, d), (KVHeads*hd, d) ×2, (d, Heads*hd)
	Bq, Bk, Bv, Bo []float32 // nil when the architecture has none
	QNorm, KNorm   []float32 // (hd,) per-head RMSNorm weights of q and k; nil without QKNorm
	PostAttnNorm   []float32 // (d,) on the attention output; nil without SandwichNorm
	MLPNorm        []float32 // (d,)
	PostMLPNorm    []float32 // (d,) on the MLP output; nil without SandwichNorm
	Wgate, Wup     *Matrix   // (Intermediate, d)
	Wdown          *Matrix   // (d, Intermediate)
	Bgate, Bup     []float32 // (Intermediate,); nil without mlp_bias
	Bdown          []float32 // (d,)

	// A sparse layer's MLP instead: Router (Experts, d), each expert's
	// Wgate, Wup (ExpertIntermediate, d) and Wdown (d,
	// ExpertIntermediate); Qwen2-MoE's Shared expert of SharedIntermediate
	// and SharedGate (1, d); GLM-4.5's Shared experts (as one SwiGLU of
	// SharedIntermediate) without a gate, and its router's ScoreBias.
	Router     *Matrix
	ScoreBias  []float32 // (Experts,) GLM's e_score_correction_bias; nil with a softmax router
	Experts    []Expert
	Shared     *Expert
	SharedGate *Matrix
}

// Expert is one SwiGLU MLP of a mixture of experts.
type Expert struct {
	Wgate, Wup, Wdown *Matrix
}

// Model is a loaded checkpoint.
type Model struct {
	Geometry
	Embed  *Matrix // (Vocab, d)
	Layers []Layer
	Norm   []float32 // (d,)
	Head   *Matrix   // (Vocab, d); the same *Matrix as Embed when tied
}

// Architectures are the config.json architectures this package reads.
var Architectures = []string{"Qwen2ForCausalLM", "Qwen3ForCausalLM", "LlamaForCausalLM", "MistralForCausalLM",
	"Gemma3ForCausalLM", "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM", glm4Moe}

// MaxExperts bounds num_experts: DeepSeek-V3 has 256 routed experts,
// Qwen3-235B-A22B 128.
const MaxExperts = 1 << 12

// moe reads the mixture of experts of Qwen2MoeConfig and Qwen3MoeConfig
// (transformers main, v5: configuration_qwen2_moe.py,
// configuration_qwen3_moe.py), with their defaults where a config omits a
// field: layer i is sparse unless mlp_only_layers lists it, when
// (i+1) % decoder_sparse_step == 0 and num_experts > 0.
func moe(c checkpoint.Config, g *Geometry) error {
	qwen2 := g.Arch == "Qwen2MoeForCausalLM"
	g.Experts, g.TopK, g.ExpertIntermediate = 128, 8, 768 // Qwen3MoeConfig
	if qwen2 {
		g.Experts, g.TopK, g.ExpertIntermediate, g.SharedIntermediate = 60, 4, 1408, 5632
	}
	if c.NumExperts == nil && c.NumLocalExperts != nil {
		c.NumExperts = c.NumLocalExperts
	}
	for _, f := range []struct {
		field string
		v     *int
		to    *int
		limit int
	}{
		{"num_experts", c.NumExperts, &g.Experts, MaxExperts},
		{"num_experts_per_tok", c.NumExpertsPerTok, &g.TopK, MaxExperts},
		{"moe_intermediate_size", nilIfZero(c.MoEIntermediateSize), &g.ExpertIntermediate, checkpoint.MaxIntermediateSize},
		{"shared_expert_intermediate_size", nilIfZero(c.SharedExpertIntermediateSize), &g.SharedIntermediate, checkpoint.MaxIntermediateSize},
	} {
		if f.v == nil {
			continue
		}
		if *f.v < 0 || *f.v > f.limit {
			return fmt.Errorf("config.json: %s %d is outside [0, %d]", f.field, *f.v, f.limit)
		}
		*f.to = *f.v
	}
	if !qwen2 && c.SharedExpertIntermediateSize != 0 {
		return fmt.Errorf("config.json: shared_expert_intermediate_size %d: %s has no shared expert", c.SharedExpertIntermediateSize, g.Arch)
	}
	step := 1
	if c.DecoderSparseStep != nil {
		step = *c.DecoderSparseStep
	}
	if step < 1 {
		return fmt.Errorf("config.json: decoder_sparse_step %d must be at least 1", step)
	}
	only := map[int]bool{}
	for _, l := range c.MLPOnlyLayers {
		if l < 0 || l >= c.NumHiddenLayers {
			return fmt.Errorf("config.json: mlp_only_layers lists layer %d of %d", l, c.NumHiddenLayers)
		}
		only[l] = true
	}
	g.NormTopK = c.NormTopKProb != nil && *c.NormTopKProb
	g.Sparse = make([]bool, c.NumHiddenLayers)
	for i := range g.Sparse {
		g.Sparse[i] = g.Experts > 0 && !only[i] && (i+1)%step == 0
	}
	if g.SparseLayers() > 0 && (g.TopK < 1 || g.TopK > g.Experts) {
		return fmt.Errorf("config.json: num_experts_per_tok %d must be between 1 and num_experts %d", g.TopK, g.Experts)
	}
	if g.SparseLayers() > 0 && g.ExpertIntermediate < 1 {
		return fmt.Errorf("config.json: moe_intermediate_size %d must be positive", g.ExpertIntermediate)
	}
	return nil
}

func nilIfZero(v int) *int {
	if v == 0 {
		return nil
	}
	return &v
}

// GeometryOf maps a config to the forward pass's geometry, refusing
// architectures whose semantics this package does not implement.
func GeometryOf(c checkpoint.Config) (Geometry, error) {
	g := Geometry{
		Arch: c.Arch(), Dim: c.HiddenSize, Intermediate: c.IntermediateSize, NumLayers: c.NumHiddenLayers,
		Heads: c.NumAttentionHeads, KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim,
		Vocab: c.VocabSize, MaxPos: c.MaxPositionEmbeddings, NormEps: float32(c.RMSNormEps),
		RopeTheta: c.RopeTheta, TiedHead: c.TieWordEmbeddings,
	}
	// Gemma3MLP reads hidden_activation and ignores hidden_act.
	if c.HiddenAct != "" && c.HiddenAct != "silu" && g.Arch != "Gemma3ForCausalLM" {
		return g, fmt.Errorf("config.json: hidden_act %q is not supported (only silu)", c.HiddenAct)
	}
	if err := unsupported(c); err != nil {
		return g, err
	}
	if c.RopeScaling != nil {
		var err error
		if g.Rope, err = parseRopeScaling(c.RopeScaling); err != nil {
			return g, err
		}
	}
	switch g.Arch {
	case "Qwen2ForCausalLM":
		// Qwen2 always has q/k/v biases and never an o_proj bias.
		g.QKVBias = true
	case "LlamaForCausalLM":
		if c.AttentionBias != nil && *c.AttentionBias {
			g.QKVBias, g.OBias = true, true
		}
		// Only Llama's modeling reads mlp_bias; the others ignore the field
		// as transformers does (and Check refuses bias tensors they have).
		g.MLPBias = c.MLPBias != nil && *c.MLPBias
	case "Qwen3ForCausalLM":
		// As transformers' models/qwen3/modeling_qwen3.py: q_norm and k_norm
		// on every layer, attention_bias on q, k, v and o alike.
		g.QKNorm = true
		if c.AttentionBias != nil && *c.AttentionBias {
			g.QKVBias, g.OBias = true, true
		}
	case "MistralForCausalLM":
		// Llama's layers with a sliding window (modeling_mistral.py).
	case "Qwen3MoeForCausalLM":
		// Qwen3's attention with routed experts (modular_qwen3_moe.py).
		g.QKNorm = true
		if c.AttentionBias != nil && *c.AttentionBias {
			g.QKVBias, g.OBias = true, true
		}
		if err := moe(c, &g); err != nil {
			return g, err
		}
	case "Qwen2MoeForCausalLM":
		// Qwen2's attention, its q/k/v biases as qkv_bias says (default
		// true), with routed experts and a shared one (modular_qwen2_moe.py).
		g.QKVBias = c.QKVBias == nil || *c.QKVBias
		if err := moe(c, &g); err != nil {
			return g, err
		}
	case "Gemma3ForCausalLM":
		if err := gemma3(c, &g); err != nil {
			return g, err
		}
	case glm4Moe:
		if err := glm4moe(c, &g); err != nil {
			return g, err
		}
	default:
		return g, fmt.Errorf("config.json: architecture %q is not supported (supported: %s)", g.Arch, strings.Join(Architectures, ", "))
	}
	var err error
	g.Window, err = windows(c)
	return g, err
}

// gemma3 sets the Gemma 3 text model's semantics, as transformers'
// models/gemma3/modeling_gemma3.py and configuration_gemma3.py (main,
// v5; Gemma3TextConfig, model_type gemma3_text) define them: (1 + w)
// RMSNorms in float32, four per layer, q_norm and k_norm per head before
// RoPE, gelu_pytorch_tanh, embeddings times sqrt(hidden_size) cast to the
// weights' dtype, attention scaled by query_pre_attn_scalar^-½, and
// sliding layers with their own RoPE base (rope_local_base_freq, unscaled).
func gemma3(c checkpoint.Config, g *Geometry) error {
	if a := c.HiddenActivation; a != "" && a != "gelu_pytorch_tanh" {
		return fmt.Errorf("config.json: hidden_activation %q is not supported (only gelu_pytorch_tanh)", a)
	}
	// Softcapping is tanh(x/c)·c on the logits or the attention scores;
	// Gemma 3's configs set both to null, and no engine here implements it.
	if c.FinalLogitSoftcapping != nil {
		return fmt.Errorf("config.json: final_logit_softcapping %g is not supported (only null)", *c.FinalLogitSoftcapping)
	}
	if c.AttnLogitSoftcapping != nil {
		return fmt.Errorf("config.json: attn_logit_softcapping %g is not supported (only null)", *c.AttnLogitSoftcapping)
	}
	if c.UseBidirectionalAttention != nil && *c.UseBidirectionalAttention {
		return fmt.Errorf("config.json: use_bidirectional_attention true is not supported (causal attention only)")
	}
	g.QKNorm, g.NormUnitOffset, g.GeluTanh, g.SandwichNorm = true, true, true, true
	if c.AttentionBias != nil && *c.AttentionBias {
		g.QKVBias, g.OBias = true, true
	}
	g.QueryPreAttnScalar = 256 // Gemma3TextConfig's defaults
	if c.QueryPreAttnScalar != nil {
		if !(*c.QueryPreAttnScalar > 0) {
			return fmt.Errorf("config.json: query_pre_attn_scalar %g must be positive", *c.QueryPreAttnScalar)
		}
		g.QueryPreAttnScalar = *c.QueryPreAttnScalar
	}
	g.LocalRopeTheta = 10000
	if c.RopeLocalBaseFreq != nil {
		if !(*c.RopeLocalBaseFreq > 0) {
			return fmt.Errorf("config.json: rope_local_base_freq %g must be positive", *c.RopeLocalBaseFreq)
		}
		g.LocalRopeTheta = *c.RopeLocalBaseFreq
	}
	if err := gemma3RopeParameters(c, g); err != nil {
		return err
	}
	// Gemma3TextScaledWordEmbedding: embed_scale is a float32 tensor cast
	// to the embedding's dtype before the product, so a bf16 checkpoint
	// scales by sqrt(hidden_size) rounded to bf16 (sqrt(1152) ≈ 33.94 → 34).
	scale := float32(math.Sqrt(float64(c.HiddenSize)))
	switch c.TorchDtype {
	case "bfloat16":
		scale = roundMantissa(scale, 16)
	case "float16":
		scale = roundMantissa(scale, 13)
	}
	g.EmbedScale = scale
	return nil
}

// gemma3RopeParameters reads the RoPE of each layer type where
// transformers v5 writes it, rope_parameters keyed by layer type
// (Gemma3TextConfig.convert_rope_params_to_dict): full_attention's
// rope_theta and scaling for the global layers, sliding_attention's
// rope_theta, unscaled, for the sliding ones. Each replaces the flat
// field it stands for; a flat rope_scaling beside it is refused, as
// transformers merges the two.
func gemma3RopeParameters(c checkpoint.Config, g *Geometry) error {
	var byType map[string]json.RawMessage
	if json.Unmarshal(c.RopeParameters, &byType) != nil || (byType["full_attention"] == nil && byType["sliding_attention"] == nil) {
		return nil // absent, or one set of parameters (ParseConfig read it)
	}
	if c.RopeScaling != nil {
		return fmt.Errorf("config.json: rope_scaling beside rope_parameters per layer type: write the scaling in rope_parameters.full_attention")
	}
	read := func(layerType string, theta *float64) (RopeScaling, error) {
		raw := byType[layerType]
		if raw == nil {
			return RopeScaling{}, nil
		}
		var j struct {
			RopeTheta *float64 `json:"rope_theta"`
			RopeType  string   `json:"rope_type"`
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			return RopeScaling{}, fmt.Errorf("config.json: rope_parameters.%s %s: %v", layerType, raw, err)
		}
		if j.RopeTheta != nil {
			if !(*j.RopeTheta > 0) {
				return RopeScaling{}, fmt.Errorf("config.json: rope_parameters.%s: rope_theta %g must be positive", layerType, *j.RopeTheta)
			}
			*theta = *j.RopeTheta
		}
		if j.RopeType == "" {
			return RopeScaling{}, nil
		}
		return parseRopeScaling(raw)
	}
	var err error
	if g.Rope, err = read("full_attention", &g.RopeTheta); err != nil {
		return err
	}
	local, err := read("sliding_attention", &g.LocalRopeTheta)
	if err == nil && local.Type != "" {
		err = fmt.Errorf("config.json: rope_parameters.sliding_attention rope_type %q is not supported (only default)", local.Type)
	}
	return err
}

// roundMantissa rounds f to nearest even with its last drop mantissa bits
// cleared: 16 gives bfloat16's value, 13 float16's (for normal values in
// float16's range).
func roundMantissa(f float32, drop uint) float32 {
	b := math.Float32bits(f)
	half := uint32(1)<<(drop-1) - 1 + (b>>drop)&1
	return math.Float32frombits((b + half) &^ (1<<drop - 1))
}

// windows is each layer's attention window, as transformers derives it
// (configuration_qwen2.py, configuration_qwen3.py, configuration_mistral.py
// and configuration_gemma3.py, v5): Qwen2 and Qwen3 slide only with
// use_sliding_window, and then on the layers from max_window_layers
// (default 28) on; Mistral slides on every layer when sliding_window is
// set; Gemma 3 slides on every layer but each sliding_window_pattern-th
// (default 6, window 4096); layer_types, when a config gives it, says per
// layer. Llama never slides.
func windows(c checkpoint.Config) ([]int, error) {
	slides, first := false, 0 // whether the config slides, and from which layer
	switch c.Arch() {
	case "Qwen2ForCausalLM", "Qwen3ForCausalLM":
		slides, first = c.UseSlidingWindow != nil && *c.UseSlidingWindow, 28
		if c.MaxWindowLayers != nil {
			first = *c.MaxWindowLayers
		}
	case "MistralForCausalLM":
		slides = c.SlidingWindow != nil
	case "Gemma3ForCausalLM":
		return gemma3Windows(c)
	case "Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM":
		return moeWindows(c)
	}
	w := 0
	if slides {
		if c.SlidingWindow == nil || *c.SlidingWindow < 1 {
			return nil, fmt.Errorf("config.json: sliding_window %s: a sliding window needs a size of at least 1", intOrNull(c.SlidingWindow))
		}
		w = *c.SlidingWindow
	}
	out := make([]int, c.NumHiddenLayers)
	if c.LayerTypes == nil {
		for i := first; i < len(out) && w > 0; i++ {
			out[i] = w
		}
		return out, nil
	}
	return layerWindows(c.LayerTypes, w, out)
}

// gemma3Windows: sliding_window is always set (default 4096, null
// refused); layer i slides unless (i+1) is a multiple of
// sliding_window_pattern, where the config gives no layer_types.
func gemma3Windows(c checkpoint.Config) ([]int, error) {
	w := 4096
	if c.SlidingWindow != nil {
		w = *c.SlidingWindow
	}
	if w < 1 {
		return nil, fmt.Errorf("config.json: sliding_window %d: a sliding window needs a size of at least 1", w)
	}
	out := make([]int, c.NumHiddenLayers)
	if c.LayerTypes != nil {
		return layerWindows(c.LayerTypes, w, out)
	}
	pattern := 6
	if c.SlidingWindowPattern != nil {
		pattern = *c.SlidingWindowPattern
	}
	if pattern < 1 {
		return nil, fmt.Errorf("config.json: sliding_window_pattern %d must be at least 1", pattern)
	}
	for i := range out {
		if (i+1)%pattern != 0 {
			out[i] = w
		}
	}
	return out, nil
}

// moeWindows: both MoE configs default sliding_window to 4096 and slide
// only with use_sliding_window. Qwen3-MoE's attention then slides on every
// layer (modular_qwen3_moe.py reads config.sliding_window, not a layer
// type); Qwen2-MoE derives layer_types, where a config has none, as
// sliding on the layers i < max_window_layers (default 28) with i+1 odd.
func moeWindows(c checkpoint.Config) ([]int, error) {
	out := make([]int, c.NumHiddenLayers)
	if c.UseSlidingWindow == nil || !*c.UseSlidingWindow {
		if c.LayerTypes != nil {
			return layerWindows(c.LayerTypes, 0, out)
		}
		return out, nil
	}
	w := 4096
	if c.SlidingWindow != nil {
		w = *c.SlidingWindow
	}
	if w < 1 {
		return nil, fmt.Errorf("config.json: sliding_window %d: a sliding window needs a size of at least 1", w)
	}
	if c.LayerTypes != nil && c.Arch() == "Qwen2MoeForCausalLM" {
		return layerWindows(c.LayerTypes, w, out)
	}
	first := 28
	if c.MaxWindowLayers != nil {
		first = *c.MaxWindowLayers
	}
	for i := range out {
		if c.Arch() == "Qwen3MoeForCausalLM" || ((i+1)%2 != 0 && i < first) {
			out[i] = w
		}
	}
	return out, nil
}

// layerWindows fills out from layer_types: w on sliding layers, 0 on full.
func layerWindows(types []string, w int, out []int) ([]int, error) {
	if len(types) != len(out) {
		return nil, fmt.Errorf("config.json: layer_types has %d entries for %d layers", len(types), len(out))
	}
	for i, t := range types {
		switch {
		case t == "full_attention":
		case t == "sliding_attention" && w > 0:
			out[i] = w
		case t == "sliding_attention":
			return nil, fmt.Errorf("config.json: layer_types[%d] is sliding_attention but the config sets no sliding window (sliding_window, use_sliding_window)", i)
		default:
			return nil, fmt.Errorf("config.json: layer_types[%d] %q is not supported (full_attention, sliding_attention)", i, t)
		}
	}
	return out, nil
}

// unsupported refuses what a config asks for that no engine here
// implements, naming the field: running such a model with other semantics
// would give wrong logits that look right.
func unsupported(c checkpoint.Config) error {
	if len(c.QuantizationConfig) > 0 {
		var q struct {
			Method string `json:"quant_method"`
		}
		json.Unmarshal(c.QuantizationConfig, &q)
		return fmt.Errorf("config.json: quantization_config (quant_method %q): a checkpoint quantized by another tool is not supported; open the float checkpoint it was made from", q.Method)
	}
	if f := c.PartialRotaryFactor; f != nil && *f != 1 && c.Arch() != glm4Moe {
		return fmt.Errorf("config.json: partial_rotary_factor %g: only full rotary embeddings (1) are supported", *f)
	}
	return nil
}

func intOrNull(p *int) string {
	if p == nil {
		return "null"
	}
	return fmt.Sprint(*p)
}

// RopeScaling is how rope_scaling changes RoPE's inverse frequencies, as
// transformers' modeling_rope_utils.py computes them (v4.56): Type ""
// leaves them; "linear" divides each by Factor; "llama3" (Llama 3.1 and
// later) divides those whose wavelength exceeds OriginalMaxPos /
// LowFreqFactor by Factor, keeps those shorter than OriginalMaxPos /
// HighFreqFactor, and interpolates smoothly between.
type RopeScaling struct {
	Type                          string
	Factor                        float64
	LowFreqFactor, HighFreqFactor float64
	OriginalMaxPos                int
}

// parseRopeScaling reads rope_scaling (or rope_parameters), refusing a
// type it does not implement or a field out of range, by name.
func parseRopeScaling(raw []byte) (RopeScaling, error) {
	var j struct {
		RopeType       string   `json:"rope_type"`
		Type           string   `json:"type"` // the older spelling
		Factor         *float64 `json:"factor"`
		LowFreqFactor  *float64 `json:"low_freq_factor"`
		HighFreqFactor *float64 `json:"high_freq_factor"`
		OriginalMaxPos *int     `json:"original_max_position_embeddings"`
	}
	if err := json.Unmarshal(raw, &j); err != nil {
		return RopeScaling{}, fmt.Errorf("config.json: rope_scaling %s: %v", raw, err)
	}
	r := RopeScaling{Type: j.RopeType}
	if r.Type == "" {
		r.Type = j.Type
	}
	need := func(field string, v *float64) (float64, error) {
		if v == nil || !(*v > 0) || math.IsInf(*v, 0) {
			return 0, fmt.Errorf("config.json: rope_scaling %s: %s must be a positive number", raw, field)
		}
		return *v, nil
	}
	var err error
	switch r.Type {
	case "default":
		return RopeScaling{}, nil
	case "linear":
		r.Factor, err = need("factor", j.Factor)
	case "llama3":
		if r.Factor, err = need("factor", j.Factor); err != nil {
			return r, err
		}
		if r.LowFreqFactor, err = need("low_freq_factor", j.LowFreqFactor); err != nil {
			return r, err
		}
		if r.HighFreqFactor, err = need("high_freq_factor", j.HighFreqFactor); err != nil {
			return r, err
		}
		if r.HighFreqFactor <= r.LowFreqFactor {
			return r, fmt.Errorf("config.json: rope_scaling %s: high_freq_factor must exceed low_freq_factor", raw)
		}
		if j.OriginalMaxPos == nil || *j.OriginalMaxPos < 1 {
			return r, fmt.Errorf("config.json: rope_scaling %s: original_max_position_embeddings must be a positive integer", raw)
		}
		r.OriginalMaxPos = *j.OriginalMaxPos
	default:
		return r, fmt.Errorf("config.json: rope_scaling type %q is not supported (supported: linear, llama3)", r.Type)
	}
	return r, err
}

// Weights is where a model's tensors come from: a checkpoint's own bytes or
// a quantized variant. Float32 returns the values the forward pass uses.
type Weights interface {
	Names() []string
	// Shape locates a tensor: its shape, the file holding it (for errors)
	// and its stored size in bytes (for progress).
	Shape(name string) (shape []int, file string, size int64, ok bool)
	Float32(name string) ([]float32, []int, error)
}

// CheckpointWeights serves a checkpoint's own tensors, decoded to float32.
func CheckpointWeights(ck *checkpoint.Checkpoint) Weights { return checkpointWeights{ck} }

type checkpointWeights struct{ *checkpoint.Checkpoint }

func (c checkpointWeights) Shape(name string) ([]int, string, int64, bool) {
	info, file, ok := c.Info(name)
	return info.Shape, file, info.Length, ok
}

// Open loads the checkpoint at dir (see checkpoint.Open and Load).
func Open(dir string) (*Model, error) {
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	return Load(ck, nil)
}

// Load decodes every weight of ck to float32; see LoadWeights.
func Load(ck *checkpoint.Checkpoint, progress func(done, total int64)) (*Model, error) {
	return LoadWeights(ck, checkpointWeights{ck}, progress)
}

// LoadWeights builds the model that ck's config describes from w, after
// Check, every tensor decoded to float32. progress, if not nil, is told the
// stored bytes read so far after each tensor.
func LoadWeights(ck *checkpoint.Checkpoint, w Weights, progress func(done, total int64)) (*Model, error) {
	g, err := GeometryOf(ck.Config)
	if err != nil {
		return nil, fmt.Errorf("%s/%w", ck.Dir, err)
	}
	if err := Check(ck.Dir, g, w); err != nil {
		return nil, err
	}
	var done, total int64
	for _, s := range g.Specs() {
		_, _, size, _ := w.Shape(s.Name)
		total += size
	}
	return Assemble(g, func(s Spec) (*Matrix, error) {
		v, _, err := w.Float32(s.Name)
		if err != nil {
			return nil, err
		}
		m := &Matrix{Rows: s.Shape[0], Cols: 1, Data: v}
		if len(s.Shape) == 2 {
			m.Cols = s.Shape[1]
		}
		_, _, size, _ := w.Shape(s.Name)
		if done += size; progress != nil {
			progress(done, total)
		}
		return m, nil
	})
}

// Assemble builds the model of geometry g from its tensors, which load
// returns for each of g.Specs() in order: a vector (norm, bias) as a
// float32 Matrix of one column, a matrix as float32 or as stored.
func Assemble(g Geometry, load func(Spec) (*Matrix, error)) (*Model, error) {
	data := map[string]*Matrix{}
	for _, s := range g.Specs() {
		m, err := load(s)
		if err != nil {
			return nil, err
		}
		data[s.Name] = m
	}
	vec := func(name string) []float32 {
		if m := data[name]; m != nil {
			return m.Data
		}
		return nil // a bias this architecture does not have
	}
	m := &Model{Geometry: g, Embed: data[EmbedName], Norm: vec(NormName), Head: data[HeadName]}
	if g.TiedHead {
		m.Head = m.Embed
	}
	m.Layers = make([]Layer, g.NumLayers)
	for i := range m.Layers {
		n := g.Names(i)
		L := Layer{
			AttnNorm: vec(n.AttnNorm), MLPNorm: vec(n.MLPNorm),
			PostAttnNorm: vec(n.PostAttnNorm), PostMLPNorm: vec(n.PostMLPNorm),
			Wq: data[n.Wq], Wk: data[n.Wk], Wv: data[n.Wv], Wo: data[n.Wo],
			Bq: vec(n.Bq), Bk: vec(n.Bk), Bv: vec(n.Bv), Bo: vec(n.Bo),
			QNorm: vec(n.QNorm), KNorm: vec(n.KNorm),
			Wgate: data[n.Wgate], Wup: data[n.Wup], Wdown: data[n.Wdown],
			Bgate: vec(n.Bgate), Bup: vec(n.Bup), Bdown: vec(n.Bdown),
		}
		if g.Sparse != nil && g.Sparse[i] {
			expert := func(e ExpertNames) Expert { return Expert{data[e.Wgate], data[e.Wup], data[e.Wdown]} }
			L.Router, L.ScoreBias = data[n.Router], vec(n.ScoreBias)
			for e := 0; e < g.Experts; e++ {
				L.Experts = append(L.Experts, expert(n.Expert(e)))
			}
			if g.SharedIntermediate > 0 {
				shared := expert(n.Shared)
				L.Shared, L.SharedGate = &shared, data[n.SharedGate] // nil when SharedUngated
			}
		}
		m.Layers[i] = L
	}
	return m, nil
}

// Spec is a tensor the forward pass reads, with the shape config.json
// implies.
type Spec struct {
	Name  string
	Shape []int
}

// Specs lists the tensors of g in load order.
func (g Geometry) Specs() []Spec {
	s := []Spec{{EmbedName, []int{g.Vocab, g.Dim}}}
	for i := 0; i < g.NumLayers; i++ {
		s = append(s, g.layerSpecs(g.Names(i), g.Sparse != nil && g.Sparse[i])...)
	}
	s = append(s, Spec{NormName, []int{g.Dim}})
	if !g.TiedHead {
		s = append(s, Spec{HeadName, []int{g.Vocab, g.Dim}})
	}
	return s
}

// layerSpecs lists one transformer block's tensors, named n, with a routed
// MLP where sparse.
func (g Geometry) layerSpecs(n LayerNames, sparse bool) []Spec {
	d, q, kv := g.Dim, g.Heads*g.HeadDim, g.KVHeads*g.HeadDim
	s := []Spec{{n.AttnNorm, []int{d}},
		{n.Wq, []int{q, d}}, {n.Wk, []int{kv, d}}, {n.Wv, []int{kv, d}}, {n.Wo, []int{d, q}}}
	if g.QKVBias {
		s = append(s, Spec{n.Bq, []int{q}}, Spec{n.Bk, []int{kv}}, Spec{n.Bv, []int{kv}})
	}
	if g.OBias {
		s = append(s, Spec{n.Bo, []int{d}})
	}
	if g.QKNorm {
		s = append(s, Spec{n.QNorm, []int{g.HeadDim}}, Spec{n.KNorm, []int{g.HeadDim}})
	}
	if g.SandwichNorm {
		s = append(s, Spec{n.PostAttnNorm, []int{d}})
	}
	s = append(s, Spec{n.MLPNorm, []int{d}})
	if sparse {
		s = append(s, g.moeSpecs(n)...)
	} else {
		s = append(s, Spec{n.Wgate, []int{g.Intermediate, d}}, Spec{n.Wup, []int{g.Intermediate, d}}, Spec{n.Wdown, []int{d, g.Intermediate}})
	}
	if g.SandwichNorm {
		s = append(s, Spec{n.PostMLPNorm, []int{d}})
	}
	if g.MLPBias {
		s = append(s, Spec{n.Bgate, []int{g.Intermediate}}, Spec{n.Bup, []int{g.Intermediate}}, Spec{n.Bdown, []int{d}})
	}
	return s
}

// moeSpecs lists a sparse layer's MLP tensors: the router (and GLM's
// score bias), each expert's, and the shared expert (Qwen2-MoE's behind
// its gate).
func (g Geometry) moeSpecs(n LayerNames) []Spec {
	d, ff := g.Dim, g.ExpertIntermediate
	s := []Spec{{n.Router, []int{g.Experts, d}}}
	if g.Sigmoid {
		s = append(s, Spec{n.ScoreBias, []int{g.Experts}})
	}
	mlp := func(e ExpertNames, ff int) {
		s = append(s, Spec{e.Wgate, []int{ff, d}}, Spec{e.Wup, []int{ff, d}}, Spec{e.Wdown, []int{d, ff}})
	}
	for e := 0; e < g.Experts; e++ {
		mlp(n.Expert(e), ff)
	}
	if g.SharedIntermediate > 0 {
		mlp(n.Shared, g.SharedIntermediate)
		if !g.SharedUngated {
			s = append(s, Spec{n.SharedGate, []int{1, d}})
		}
	}
	return s
}

// Check verifies that w holds every tensor of g with the shape the config
// implies, and nothing the forward pass would ignore: a stored tensor
// without a reader usually means a config field is missing. Errors name
// the directory or the file.
func Check(dir string, g Geometry, w Weights) error {
	// Specs lists every layer's tensors, so the layer count is checked
	// against the stored names first: a corrupt count then fails at once
	// instead of after enumerating (and allocating for) its layers.
	if held := layersHeld(w.Names()); g.NumLayers+g.MTPLayers != held {
		return fmt.Errorf("%s: config.json: num_hidden_layers %d, but the weights hold %d layers%s", dir, g.NumLayers, held, g.layerCountHint(held))
	}
	for _, n := range w.Names() {
		if strings.HasSuffix(n, "mlp.experts.gate_up_proj") || strings.HasSuffix(n, "mlp.experts.down_proj") {
			_, file, _, _ := w.Shape(n)
			return fmt.Errorf("%s: tensor %s: fused expert tensors are not supported (store one gate_proj, up_proj and down_proj per expert, as the published checkpoints do)", file, n)
		}
	}
	used := map[string]bool{}
	specs := g.Specs()
	run := len(specs) // the rest, multi-token prediction layers, are only checked
	specs = append(specs, g.mtpSpecs()...)
	for i, s := range specs {
		used[s.Name] = true
		stored, file, _, ok := w.Shape(s.Name)
		if !ok && i >= run {
			return g.mtpMissing(dir, s.Name, w)
		}
		if !ok {
			return fmt.Errorf("%s: missing tensor %s", dir, s.Name)
		}
		if !slices.Equal(stored, s.Shape) {
			return fmt.Errorf("%s: tensor %s has shape %v, config.json implies %v", file, s.Name, stored, s.Shape)
		}
	}
	var extra []string
	for _, n := range w.Names() {
		// A tied checkpoint may still store a copy of the head, and old
		// exporters stored the rotary frequencies, which are recomputed.
		if !used[n] && !(g.TiedHead && n == HeadName) && !strings.HasSuffix(n, "rotary_emb.inv_freq") && !g.mtpOptional(n) {
			extra = append(extra, n)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return fmt.Errorf("%s: %d tensors the %s forward pass would ignore, e.g. %s (a config field may be missing)",
			dir, len(extra), g.Arch, strings.Join(extra[:min(3, len(extra))], ", "))
	}
	return nil
}

// layersHeld counts the distinct N of the names model.layers.N.*.
func layersHeld(names []string) int {
	layers := map[string]bool{}
	for _, n := range names {
		if rest, ok := strings.CutPrefix(n, layerPrefix); ok {
			i, _, _ := strings.Cut(rest, ".")
			layers[i] = true
		}
	}
	return len(layers)
}

// InvFreq is RoPE's inverse frequencies (RopeDim/2,), computed as
// transformers does: in float32, 1/θ^(2i/hd), then scaled as g.Rope says
// with the same float32 operations as torch (a scalar divides or
// multiplies in float32; x / tensor is reciprocal(tensor) · x).
func (g Geometry) InvFreq() []float32 { return invFreq(g.RopeTheta, g.RopeDim(), g.Rope) }

// RopeDim is how many of each head's values RoPE rotates: RotaryDim
// where a partial_rotary_factor set it, else HeadDim. The frequencies are
// built over it (InvFreq has RopeDim/2 of them), as transformers'
// compute_default_rope_parameters does.
func (g Geometry) RopeDim() int {
	if g.RotaryDim > 0 {
		return g.RotaryDim
	}
	return g.HeadDim
}

// LayerInvFreq is layer l's RoPE inverse frequencies: Gemma 3's sliding
// layers (LocalRopeTheta set, a window on the layer) use the local base
// unscaled; every other layer uses InvFreq.
func (g Geometry) LayerInvFreq(l int) []float32 {
	if g.LocalRope(l) {
		return invFreq(g.LocalRopeTheta, g.RopeDim(), RopeScaling{})
	}
	return g.InvFreq()
}

// LocalRope tells whether layer l uses the local RoPE base.
func (g Geometry) LocalRope(l int) bool {
	return g.LocalRopeTheta > 0 && g.Window != nil && g.Window[l] > 0
}

// AttnScale is the factor of q·k in attention, rounded to float32 as a
// Python float is when it multiplies a float32 tensor:
// query_pre_attn_scalar^-½ where the architecture has one, else hd^-½.
func (g Geometry) AttnScale() float32 {
	if g.QueryPreAttnScalar > 0 {
		return float32(math.Pow(g.QueryPreAttnScalar, -0.5))
	}
	return float32(1 / math.Sqrt(float64(g.HeadDim)))
}

func invFreq(theta float64, hd int, r RopeScaling) []float32 {
	f := make([]float32, hd/2)
	for i := range f {
		f[i] = float32(1 / math.Pow(theta, float64(float32(2*i)/float32(hd))))
	}
	switch r.Type {
	case "linear":
		for i := range f {
			f[i] /= float32(r.Factor)
		}
	case "llama3":
		old := float32(r.OriginalMaxPos)
		lowWavelen := float32(float64(r.OriginalMaxPos) / r.LowFreqFactor)
		highWavelen := float32(float64(r.OriginalMaxPos) / r.HighFreqFactor)
		factor, low, high := float32(r.Factor), float32(r.LowFreqFactor), float32(r.HighFreqFactor)
		for i, v := range f {
			wavelen := 1 / v * float32(2*math.Pi)
			switch {
			case wavelen > lowWavelen: // long wavelengths: interpolated
				f[i] = v / factor
			case wavelen >= highWavelen: // between: a smooth mix of both
				smooth := (1/wavelen*old - low) / float32(high-low)
				f[i] = (1-smooth)*v/factor + smooth*v
			}
		}
	}
	return f
}

// Rotation is the cosine and sine of RoPE's angle pos·invFreq, the angle a
// float32 product as in transformers. Every engine uses it, so rotations
// agree bit for bit.
func Rotation(pos int, invFreq float32) (cos, sin float32) {
	a := float64(float32(pos) * invFreq)
	return float32(math.Cos(a)), float32(math.Sin(a))
}
