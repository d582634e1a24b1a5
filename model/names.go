package model

import "fmt"

// Tensor names of the Hugging Face Qwen2 / Qwen3 / Llama layout.
const (
	EmbedName = "model.embed_tokens.weight"
	NormName  = "model.norm.weight"
	HeadName  = "lm_head.weight"

	layerPrefix = "model.layers."
)

// LayerNames are the tensor names of one transformer block.
type LayerNames struct {
	AttnNorm, Wq, Wk, Wv, Wo, Bq, Bk, Bv, Bo, QNorm, KNorm, MLPNorm, Wgate, Wup, Wdown, Bgate, Bup, Bdown string
}

// NamesOf gives layer i's tensor names.
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
	}
}
