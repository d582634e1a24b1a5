package synth

import (
	"encoding/json"
	"reflect"
	"testing"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/model"
)

// qwen3_0_6b is Qwen/Qwen3-0.6B's config.json.
const qwen3_0_6b = `{
  "architectures": ["Qwen3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "initializer_range": 0.02,
  "intermediate_size": 3072,
  "max_position_embeddings": 40960,
  "max_window_layers": 28,
  "model_type": "qwen3",
  "num_attention_heads": 16,
  "num_hidden_layers": 28,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": null,
  "tie_word_embeddings": true,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
}`

// gemma3_1b is google/gemma-3-1b-it's config.json as TensorRT-LLM's
// tests (tests/unittest/_torch/modeling/test_modeling_gemma3.py) copy it,
// with the two values those tests shrink put back as two other copies of
// the config give them: num_hidden_layers 26, sliding_window 512.
const gemma3_1b = `{
  "architectures": ["Gemma3ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "attn_logit_softcapping": null,
  "bos_token_id": 2,
  "cache_implementation": "hybrid",
  "eos_token_id": [1, 106],
  "final_logit_softcapping": null,
  "head_dim": 256,
  "hidden_activation": "gelu_pytorch_tanh",
  "hidden_size": 1152,
  "initializer_range": 0.02,
  "intermediate_size": 6912,
  "max_position_embeddings": 32768,
  "model_type": "gemma3_text",
  "num_attention_heads": 4,
  "num_hidden_layers": 26,
  "num_key_value_heads": 1,
  "pad_token_id": 0,
  "query_pre_attn_scalar": 256,
  "rms_norm_eps": 1e-06,
  "rope_local_base_freq": 10000,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "sliding_window": 512,
  "sliding_window_pattern": 6,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.50.0.dev0",
  "use_cache": true,
  "vocab_size": 262144
}`

// qwen3_30b_a3b is Qwen/Qwen3-30B-A3B's config.json.
const qwen3_30b_a3b = `{
  "architectures": ["Qwen3MoeForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "bos_token_id": 151643,
  "decoder_sparse_step": 1,
  "eos_token_id": 151645,
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "intermediate_size": 6144,
  "max_position_embeddings": 40960,
  "max_window_layers": 48,
  "mlp_only_layers": [],
  "model_type": "qwen3_moe",
  "moe_intermediate_size": 768,
  "norm_topk_prob": true,
  "num_attention_heads": 32,
  "num_experts": 128,
  "num_experts_per_tok": 8,
  "num_hidden_layers": 48,
  "num_key_value_heads": 4,
  "output_router_logits": false,
  "rms_norm_eps": 1e-06,
  "rope_scaling": null,
  "rope_theta": 1000000.0,
  "router_aux_loss_coef": 0.001,
  "sliding_window": null,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.51.0",
  "use_cache": true,
  "use_sliding_window": false,
  "vocab_size": 151936
}`

// glm_4_5_air is GLM-4.5-Air's config.json as PrimeIntellect's
// INTELLECT-3-Base, trained from it, publishes it (auto_map left out).
const glm_4_5_air = `{
  "architectures": ["Glm4MoeForCausalLM"],
  "attention_bias": true,
  "attention_dropout": 0.0,
  "pad_token_id": 151329,
  "eos_token_id": [151334, 151329],
  "head_dim": 128,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "partial_rotary_factor": 0.5,
  "initializer_range": 0.02,
  "intermediate_size": 10944,
  "max_position_embeddings": 131072,
  "model_type": "glm4_moe",
  "moe_intermediate_size": 1408,
  "norm_topk_prob": true,
  "num_attention_heads": 96,
  "n_group": 1,
  "topk_group": 1,
  "n_routed_experts": 128,
  "n_shared_experts": 1,
  "routed_scaling_factor": 1.0,
  "num_experts_per_tok": 8,
  "first_k_dense_replace": 1,
  "num_hidden_layers": 46,
  "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05,
  "rope_scaling": null,
  "rope_theta": 1000000,
  "num_nextn_predict_layers": 1,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.54.0",
  "use_cache": true,
  "use_qk_norm": false,
  "vocab_size": 151552
}`

// A preset named after a real model gives the geometry of that model's own
// config.json, so benchmarks on it measure the real shapes. The preset's
// config is checked without writing its 1.2 GB of weights.
func TestPresetsMatchRealConfigs(t *testing.T) {
	for _, c := range []struct{ preset, config string }{{"qwen3-0.6b", qwen3_0_6b}, {"gemma-3-1b", gemma3_1b}, {"qwen3-30b-a3b", qwen3_30b_a3b}, {"glm-4.5-air", glm_4_5_air}} {
		t.Run(c.preset, func(t *testing.T) {
			p := Presets[c.preset]
			b, err := json.Marshal(config(p, p.Vocab, p.SpecialBase, p.SpecialBase+2))
			if err != nil {
				t.Fatal(err)
			}
			var g [2]model.Geometry
			for i, data := range [][]byte{b, []byte(c.config)} {
				cfg, err := checkpoint.ParseConfig(data, c.preset)
				if err != nil {
					t.Fatal(err)
				}
				if g[i], err = model.GeometryOf(cfg); err != nil {
					t.Fatal(err)
				}
			}
			if !reflect.DeepEqual(g[0], g[1]) {
				t.Fatalf("preset geometry\n %+v\nreal config.json\n %+v", g[0], g[1])
			}
		})
	}
}
