package model

import "fmt"

// Tensor names of the Hugging Face Qwen2 / Qwen3 / Llama / Gemma 3 layout.
const (
	EmbedName = "model.embed_tokens.weight"
	NormName  = "model.norm.weight"
	HeadName  = "lm_head.weight"

	layerPrefix = "model.layers."
)

// LayerNames are the tensor names of one transformer block.
type LayerNames struct {
	AttnNorm, Wq, Wk, Wv, Wo, Bq, Bk, Bv, Bo, QNorm, KNorm, MLPNorm, Wgate, Wup, Wdown, Bgate, Bup, Bdown string
	PostAttnNorm, PostMLPNorm                                                                             string // "" without SandwichNorm

	// A sparse layer's router, shared expert and its gate (Qwen2-MoE,
	// Qwen3-MoE), GLM's router score bias; Expert names the routed experts.
	Router, SharedGate, ScoreBias string
	Shared                        ExpertNames
	prefix                        string
}

// ExpertNames are the tensor names of one expert's SwiGLU MLP.
type ExpertNames struct{ Wgate, Wup, Wdown string }

func expertNames(p string) ExpertNames {
	return ExpertNames{p + "gate_proj.weight", p + "up_proj.weight", p + "down_proj.weight"}
}

// Expert names routed expert e's tensors, as the Hugging Face checkpoints
// of Qwen2-MoE and Qwen3-MoE store them: one tensor per expert (the fused
// mlp.experts.gate_up_proj of transformers v5's in-memory layout is not
// read).
func (n LayerNames) Expert(e int) ExpertNames {
	return expertNames(fmt.Sprintf("%smlp.experts.%d.", n.prefix, e))
}

// NamesOf gives layer i's tensor names in the Qwen2 / Llama layout; see
// Geometry.Names for the architecture's own.
func NamesOf(i int) LayerNames {
	p := fmt.Sprintf(layerPrefix+"%d.", i)
	return LayerNames{
		AttnNorm: p + "input_layernorm.weight",
		Wq:       p + "self_attn.q_proj.weight", Bq: p + "self_attn.q_proj.bias",
		Wk: p + "self_attn.k_proj.weight", Bk: p + "self_attn.k_proj.bias",
		Wv: p + "self_attn.v_proj.weight", Bv: p + "self_attn.v_proj.bias",
		Wo: p + "self_attn.o_proj.weight", Bo: p + "self_attn.o_proj.bias",
		QNorm: p + "self_attn.q_norm.weight", KNorm: p + "self_attn.k_norm.weight",
		MLPNorm: p + "post_attention_layernorm.weight",
		Wgate:   p + "mlp.gate_proj.weight", Wup: p + "mlp.up_proj.weight", Wdown: p + "mlp.down_proj.weight",
		Bgate: p + "mlp.gate_proj.bias", Bup: p + "mlp.up_proj.bias", Bdown: p + "mlp.down_proj.bias",
		Router: p + "mlp.gate.weight", SharedGate: p + "mlp.shared_expert_gate.weight", ScoreBias: p + "mlp.gate.e_score_correction_bias",
		Shared: expertNames(p + "mlp.shared_expert."), prefix: p,
	}
}

// Names gives layer i's tensor names for g's architecture. Gemma 3 has four
// norms: its post_attention_layernorm normalizes the attention output (in
// Llama it is the MLP's input norm) and pre_feedforward_layernorm is the
// MLP's input norm. GLM-4.5's shared experts are mlp.shared_experts
// (plural, as DeepSeek-V3's).
func (g Geometry) Names(i int) LayerNames {
	n := NamesOf(i)
	if g.SandwichNorm {
		p := fmt.Sprintf(layerPrefix+"%d.", i)
		n.PostAttnNorm = p + "post_attention_layernorm.weight"
		n.MLPNorm = p + "pre_feedforward_layernorm.weight"
		n.PostMLPNorm = p + "post_feedforward_layernorm.weight"
	}
	if g.Arch == glm4Moe {
		n.Shared = expertNames(n.prefix + "mlp.shared_experts.")
	}
	return n
}
