// Package synth writes deterministic synthetic checkpoints in Hugging Face
// layout (config.json, bf16 model.safetensors, tokenizer files,
// generation_config.json): no model can be downloaded here, and tests,
// the demo and the benchmarks need real files in real formats.
package synth

import (
	"cmp"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"logitscope/internal/format/safetensors"
	"logitscope/internal/format/sidecar"
	"logitscope/internal/text/chat"
	"logitscope/internal/text/tokenizer"
)

// Preset is a model geometry.
type Preset struct {
	Name                   string
	Arch                   string // one of model.Architectures
	Hidden, Intermediate   int
	Layers, Heads, KVHeads int
	HeadDim                int // 0: Hidden/Heads; Qwen3 and Gemma 3 write it to config.json
	Vocab                  int // embedding rows; 0: the tokenizer's size rounded up to 64
	MaxPos                 int
	RopeTheta              float64
	Tied                   bool
	Merges                 int            // merges to learn for the built-in tokenizer
	SpecialBase            int            // id of <|endoftext|>; 0: right after the learned vocabulary
	RopeScaling            map[string]any // config.json's rope_scaling; nil: none
	SlidingWindow          int            // Mistral's and Gemma 3's sliding_window; 0: none (null)
	RMSNormEps             float64        // 0: 1e-6
	Bias                   bool           // Llama's attention_bias and mlp_bias

	// Gemma 3: every SlidingWindowPattern-th layer is global (the others
	// slide), sliding layers rotate with base LocalRopeTheta, and attention
	// scales by QueryPreAttnScalar^-½.
	SlidingWindowPattern int
	LocalRopeTheta       float64
	QueryPreAttnScalar   float64

	// Qwen2-MoE and Qwen3-MoE: Experts routed experts of width
	// MoEIntermediate, TopK per token, on every layer but MLPOnly;
	// SharedIntermediate is Qwen2-MoE's shared expert.
	Experts, TopK      int
	MoEIntermediate    int
	SharedIntermediate int
	NormTopK           bool
	MLPOnly            []int

	// GLM-4.5 (Glm4MoeForCausalLM): the Experts are sigmoid-routed in
	// Groups groups of which TopKGroup are kept, weights times
	// RoutedScale; SharedExperts ungated shared experts of MoEIntermediate;
	// the layers before FirstDense dense; MTP multi-token prediction
	// layers stored after the causal ones; RoPE on PartialRotary of each
	// head; QKNorm is use_qk_norm. Its q/k/v have biases.
	Groups, TopKGroup int
	RoutedScale       float64
	SharedExperts     int
	FirstDense        int
	MTP               int
	PartialRotary     float64
	QKNorm            bool
}

// sparse tells whether layer i has routed experts.
func (p Preset) sparse(i int) bool {
	return p.Experts > 0 && !slices.Contains(p.MLPOnly, i) && i >= p.FirstDense
}

const glm4Moe = "Glm4MoeForCausalLM"

// Presets by name. qwen2.5-0.5b and qwen3-0.6b have those models' exact
// geometries (config.json values) and put the special tokens at Qwen's ids,
// so the default stop ids apply to them. tiny-qwen3's heads are wider than
// hidden/heads, as Qwen3-0.6B's are (16 × 128 > 1024).
var Presets = map[string]Preset{
	"tiny": {Name: "tiny", Arch: "Qwen2ForCausalLM", Hidden: 64, Intermediate: 176, Layers: 2, Heads: 4, KVHeads: 2,
		MaxPos: 4096, RopeTheta: 1e6, Tied: true, Merges: 400},
	"tiny-llama": {Name: "tiny-llama", Arch: "LlamaForCausalLM", Hidden: 64, Intermediate: 160, Layers: 2, Heads: 4, KVHeads: 1,
		MaxPos: 4096, RopeTheta: 5e5, Tied: false, Merges: 400},
	// Llama 3.2's architecture at the tiny size: tied embeddings and
	// rope_scaling "llama3". Its original_max_position_embeddings is 64,
	// not 8192, so that a few positions exercise every regime of the
	// scaling: kept, interpolated and divided frequencies.
	"tiny-llama3": {Name: "tiny-llama3", Arch: "LlamaForCausalLM", Hidden: 64, Intermediate: 160, Layers: 2, Heads: 4, KVHeads: 1,
		MaxPos: 4096, RopeTheta: 5e5, Tied: true, Merges: 400, RopeScaling: map[string]any{
			"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}},
	// Llama 3 with every row a whole number of 256-weight K-quant
	// super-blocks (hidden, intermediate and the vocabulary), so that
	// llama.cpp's Q4_K_M, Q6_K... use K-quants on every matrix instead of
	// falling back to Q5_0 and Q8_0 as on the 64-wide presets.
	"small-llama3": {Name: "small-llama3", Arch: "LlamaForCausalLM", Hidden: 256, Intermediate: 512, Layers: 2, Heads: 4, KVHeads: 2,
		MaxPos: 4096, RopeTheta: 5e5, Tied: false, Merges: 400, Vocab: 512, RopeScaling: map[string]any{
			"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}},
	// Llama with attention_bias and mlp_bias: every linear layer has one.
	"tiny-llama-bias": {Name: "tiny-llama-bias", Arch: "LlamaForCausalLM", Hidden: 64, Intermediate: 160, Layers: 2, Heads: 4, KVHeads: 2,
		MaxPos: 4096, RopeTheta: 5e5, Tied: false, Merges: 400, Bias: true},
	// Mistral's architecture (Llama's layers, a sliding window on every
	// layer) with a window of 8, so that short tests attend past it.
	"tiny-mistral": {Name: "tiny-mistral", Arch: "MistralForCausalLM", Hidden: 64, Intermediate: 160, Layers: 2, Heads: 4, KVHeads: 1,
		MaxPos: 4096, RopeTheta: 1e6, Tied: false, Merges: 400, SlidingWindow: 8},
	// Real geometries (config.json of HuggingFaceTB/SmolLM2-135M and of
	// meta-llama/Llama-3.2-1B) for benchmarks at the sizes people run.
	"smollm2-135m": {Name: "smollm2-135m", Arch: "LlamaForCausalLM", Hidden: 576, Intermediate: 1536, Layers: 30, Heads: 9, KVHeads: 3,
		Vocab: 49152, MaxPos: 8192, RopeTheta: 1e5, Tied: true, Merges: 400, RMSNormEps: 1e-5},
	"llama-3.2-1b": {Name: "llama-3.2-1b", Arch: "LlamaForCausalLM", Hidden: 2048, Intermediate: 8192, Layers: 16, Heads: 32, KVHeads: 8,
		Vocab: 128256, MaxPos: 131072, RopeTheta: 5e5, Tied: true, Merges: 400, RMSNormEps: 1e-5, RopeScaling: map[string]any{
			"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}},
	"qwen2.5-0.5b": {Name: "qwen2.5-0.5b", Arch: "Qwen2ForCausalLM", Hidden: 896, Intermediate: 4864, Layers: 24, Heads: 14, KVHeads: 2,
		Vocab: 151936, MaxPos: 32768, RopeTheta: 1e6, Tied: true, Merges: 400, SpecialBase: 151643},
	"tiny-qwen3": {Name: "tiny-qwen3", Arch: "Qwen3ForCausalLM", Hidden: 64, Intermediate: 192, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32,
		MaxPos: 4096, RopeTheta: 1e6, Tied: true, Merges: 400},
	"qwen3-0.6b": {Name: "qwen3-0.6b", Arch: "Qwen3ForCausalLM", Hidden: 1024, Intermediate: 3072, Layers: 28, Heads: 16, KVHeads: 8, HeadDim: 128,
		Vocab: 151936, MaxPos: 40960, RopeTheta: 1e6, Tied: true, Merges: 400, SpecialBase: 151643},
	// Gemma 3 at the tiny size: layers 0 and 1 slide (window 8, local RoPE
	// base), layer 2 is global; heads wider than hidden/heads; an attention
	// scale that is not head_dim's; hidden 96, whose square root (9.798)
	// bf16 rounds to 9.8125, so that the embedding scale's rounding shows.
	"tiny-gemma3": {Name: "tiny-gemma3", Arch: "Gemma3ForCausalLM", Hidden: 96, Intermediate: 256, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 32,
		MaxPos: 4096, RopeTheta: 1e6, Tied: true, Merges: 400, SlidingWindow: 8, SlidingWindowPattern: 3, LocalRopeTheta: 1e4, QueryPreAttnScalar: 24},
	// Qwen3-MoE at the tiny size: 8 experts of width 48, 2 per token,
	// renormalized, on both layers.
	"tiny-qwen3-moe": {Name: "tiny-qwen3-moe", Arch: "Qwen3MoeForCausalLM", Hidden: 64, Intermediate: 192, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 32,
		MaxPos: 4096, RopeTheta: 1e6, Tied: false, Merges: 400, Experts: 8, TopK: 2, MoEIntermediate: 48, NormTopK: true},
	// Qwen2-MoE at the tiny size: layer 0 dense (mlp_only_layers), layer 1
	// routed to 3 of 6 experts, not renormalized, with a shared expert.
	"tiny-qwen2-moe": {Name: "tiny-qwen2-moe", Arch: "Qwen2MoeForCausalLM", Hidden: 64, Intermediate: 160, Layers: 2, Heads: 4, KVHeads: 2,
		MaxPos: 4096, RopeTheta: 1e6, Tied: false, Merges: 400, Experts: 6, TopK: 3, MoEIntermediate: 48, SharedIntermediate: 96, MLPOnly: []int{0}},
	// Qwen/Qwen3-30B-A3B's geometry (config.json values): 30.5B parameters,
	// too large to generate here; benchmarks run TwoLayer of it, its real
	// layers (604M expert parameters each) cut to two.
	"qwen3-30b-a3b": {Name: "qwen3-30b-a3b", Arch: "Qwen3MoeForCausalLM", Hidden: 2048, Intermediate: 6144, Layers: 48, Heads: 32, KVHeads: 4, HeadDim: 128,
		Vocab: 151936, MaxPos: 40960, RopeTheta: 1e6, Tied: false, Merges: 400, SpecialBase: 151643, Experts: 128, TopK: 8, MoEIntermediate: 768, NormTopK: true},
	// GLM-4.5 at the tiny size: layer 0 dense (first_k_dense_replace),
	// layers 1–2 route each token to 3 of 16 experts (width 32) in 4
	// groups of which 2 are kept, by sigmoid scores plus a score bias,
	// renormalized and scaled by 2.5 (as GLM-4.6's routed_scaling_factor),
	// plus a shared expert; half of each head rotary; q/k norms and biases;
	// a multi-token prediction layer stored as layer 3.
	"tiny-glm4-moe": {Name: "tiny-glm4-moe", Arch: glm4Moe, Hidden: 64, Intermediate: 160, Layers: 3, Heads: 4, KVHeads: 2, HeadDim: 32,
		MaxPos: 4096, RopeTheta: 1e6, Tied: false, Merges: 400, RMSNormEps: 1e-5, Experts: 16, TopK: 3, MoEIntermediate: 32, NormTopK: true,
		Groups: 4, TopKGroup: 2, RoutedScale: 2.5, SharedExperts: 1, FirstDense: 1, MTP: 1, PartialRotary: 0.5, QKNorm: true},
	// zai-org/GLM-4.5-Air's geometry (config.json values): 106B
	// parameters; each sparse layer's experts are 2.2B, so benchmarks run
	// TwoLayer of it (a dense layer, then a sparse one; no MTP layer).
	"glm-4.5-air": {Name: "glm-4.5-air", Arch: glm4Moe, Hidden: 4096, Intermediate: 10944, Layers: 46, Heads: 96, KVHeads: 8, HeadDim: 128,
		Vocab: 151552, MaxPos: 131072, RopeTheta: 1e6, Tied: false, Merges: 400, RMSNormEps: 1e-5, Experts: 128, TopK: 8, MoEIntermediate: 1408,
		NormTopK: true, Groups: 1, TopKGroup: 1, RoutedScale: 1, SharedExperts: 1, FirstDense: 1, MTP: 1, PartialRotary: 0.5},
	// google/gemma-3-1b's text geometry (config.json values).
	"gemma-3-1b": {Name: "gemma-3-1b", Arch: "Gemma3ForCausalLM", Hidden: 1152, Intermediate: 6912, Layers: 26, Heads: 4, KVHeads: 1, HeadDim: 256,
		Vocab: 262144, MaxPos: 32768, RopeTheta: 1e6, Tied: true, Merges: 400, SlidingWindow: 512, SlidingWindowPattern: 6, LocalRopeTheta: 1e4,
		QueryPreAttnScalar: 256},
}

// headDim is the width of one attention head.
func (p Preset) headDim() int {
	if p.HeadDim != 0 {
		return p.HeadDim
	}
	return p.Hidden / p.Heads
}

// Tiny is the tiny preset of every family, for tests that run each family
// on every path.
func Tiny() []Preset {
	var out []Preset
	for _, name := range PresetNames() {
		if strings.HasPrefix(name, "tiny") {
			out = append(out, Presets[name])
		}
	}
	return out
}

// TwoLayer is a real geometry cut to two layers with the tiny tokenizer's
// vocabulary, so that its per-layer shapes run in a test; without
// multi-token prediction layers, which no forward pass runs and which
// would double a sparse model's bytes.
func TwoLayer(name string) Preset {
	p := Presets[name]
	p.Name, p.Layers, p.Vocab, p.SpecialBase, p.MTP = name+"-2layer", 2, 0, 0, 0
	return p
}

// PresetNames lists the presets, sorted.
func PresetNames() []string {
	var names []string
	for n := range Presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Options for Write.
type Options struct {
	Seed uint64
	// Tokenizer is a tokenizer.json to use instead of the built-in one. A
	// tokenizer_config.json beside it (any family's: its chat template,
	// BOS and EOS) is copied too; without one the tokenizer must be
	// Qwen-style and gets Qwen's config.
	Tokenizer string
	// ChatTemplate, if set, is written as tokenizer_config.json's
	// chat_template (without one, readers fall back to ChatML).
	ChatTemplate string
	Progress     func(done, total int) // called after each tensor; may be nil
}

// Write generates the preset's checkpoint into dir, with the sidecar that
// tells the page it is synthetic (Note). The same preset, seed and
// tokenizer give byte-identical files.
func Write(p Preset, dir string, opt Options) error {
	v, err := vocabularyFor(p, opt.Tokenizer)
	if err != nil {
		return err
	}
	vocab := p.Vocab
	if vocab == 0 {
		vocab = (v.size + 63) / 64 * 64
	}
	if v.size > vocab {
		return fmt.Errorf("the tokenizer's %d ids do not fit the preset's vocabulary of %d", v.size, vocab)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if opt.ChatTemplate != "" {
		v.config["chat_template"] = opt.ChatTemplate
	}
	files := map[string]any{
		"config.json":            config(p, vocab, v.bos, v.eos),
		"generation_config.json": map[string]any{"bos_token_id": v.bos, "eos_token_id": v.stops, "do_sample": false},
		"tokenizer_config.json":  v.config,
	}
	for name, v := range files {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		if err := writeFile(filepath.Join(dir, name), append(b, '\n')); err != nil {
			return err
		}
	}
	if err := writeFile(filepath.Join(dir, "tokenizer.json"), v.json); err != nil {
		return err
	}
	if err := sidecar.Write(dir, Note(p, opt.Seed)); err != nil {
		return err
	}
	tensors := weights(p, vocab, opt)
	return safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), tensors, map[string]string{"format": "pt"})
}

// vocabulary is a checkpoint's tokenizer files and the ids its configs
// name.
type vocabulary struct {
	json     []byte         // tokenizer.json
	config   map[string]any // tokenizer_config.json
	size     int            // ids the tokenizer uses
	bos, eos int
	stops    []int // generation_config.json's eos_token_id
}

// vocabularyFor is the built-in tokenizer, or the one at path with the
// tokenizer_config.json beside it, else with Qwen's.
func vocabularyFor(p Preset, path string) (vocabulary, error) {
	if path == "" {
		b, special, err := tokenizerJSON(trainBPE(p.Merges), p.SpecialBase)
		return qwenVocabulary(b, special, p.MaxPos), err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return vocabulary{}, err
	}
	tok, err := tokenizer.Parse(b, path)
	if err != nil {
		return vocabulary{}, err
	}
	cfgPath := filepath.Join(filepath.Dir(path), "tokenizer_config.json")
	raw, err := os.ReadFile(cfgPath)
	if os.IsNotExist(err) {
		special, ok := tok.TokenID(specials[0])
		if !ok {
			return vocabulary{}, fmt.Errorf("%s: no %s added token and no tokenizer_config.json beside it: not a Qwen-style tokenizer", path, specials[0])
		}
		return qwenVocabulary(b, special, p.MaxPos), nil
	}
	if err != nil {
		return vocabulary{}, err
	}
	v := vocabulary{json: b, size: tok.VocabSize()}
	if err := json.Unmarshal(raw, &v.config); err != nil {
		return vocabulary{}, fmt.Errorf("%s: %v", cfgPath, err)
	}
	cfg, err := chat.ParseConfig(raw)
	if err != nil {
		return vocabulary{}, fmt.Errorf("%s: %w", cfgPath, err)
	}
	for _, k := range []struct {
		name string
		id   *int
	}{{"bos_token", &v.bos}, {"eos_token", &v.eos}} {
		name := cfg.Tokens[k.name]
		if _, set := cfg.Tokens[k.name]; !set && k.name == "bos_token" {
			// Qwen's bos_token is null: its config.json's bos_token_id
			// is <|endoftext|>, else the EOS serves.
			name = specials[0]
			if _, ok := tok.TokenID(name); !ok {
				name = cfg.Tokens["eos_token"]
			}
		}
		id, ok := tok.TokenID(name)
		if !ok {
			return vocabulary{}, fmt.Errorf("%s: %s %q is no token of %s", cfgPath, k.name, name, path)
		}
		*k.id = id
	}
	v.stops = []int{v.eos}
	return v, nil
}

// qwenVocabulary gives a Qwen-style tokenizer (<|endoftext|>,
// <|im_start|>, <|im_end|> from id special on) Qwen2.5's config for a
// context of maxPos.
func qwenVocabulary(b []byte, special, maxPos int) vocabulary {
	return vocabulary{json: b, size: special + len(specials), bos: special, eos: special + 2, stops: []int{special + 2, special},
		config: map[string]any{
			"add_bos_token": false, "add_prefix_space": false, "bos_token": nil, "eos_token": "<|im_end|>",
			"pad_token": "<|endoftext|>", "model_max_length": maxPos, "tokenizer_class": "Qwen2Tokenizer",
			"errors": "replace", "split_special_tokens": false, "clean_up_tokenization_spaces": false,
		}}
}

func config(p Preset, vocab, bos, eos int) map[string]any {
	c := map[string]any{
		"architectures": []string{p.Arch}, "hidden_act": "silu", "hidden_size": p.Hidden,
		"intermediate_size": p.Intermediate, "num_hidden_layers": p.Layers,
		"num_attention_heads": p.Heads, "num_key_value_heads": p.KVHeads,
		"max_position_embeddings": p.MaxPos, "rms_norm_eps": cmp.Or(p.RMSNormEps, 1e-6), "rope_theta": p.RopeTheta,
		"tie_word_embeddings": p.Tied, "torch_dtype": "bfloat16", "vocab_size": vocab,
		"bos_token_id": bos, "eos_token_id": eos, "initializer_range": 0.02, "use_cache": true,
	}
	switch p.Arch {
	case "Qwen2ForCausalLM":
		c["model_type"] = "qwen2"
		c["use_sliding_window"] = false
		c["sliding_window"] = p.MaxPos
		c["max_window_layers"] = p.Layers
		c["attention_dropout"] = 0.0
	case "Qwen3ForCausalLM":
		// As Qwen3-0.6B's config.json writes them.
		c["model_type"] = "qwen3"
		c["head_dim"] = p.headDim()
		c["attention_bias"] = false
		c["use_sliding_window"] = false
		c["sliding_window"] = nil
		c["max_window_layers"] = p.Layers
		c["attention_dropout"] = 0.0
	case "Gemma3ForCausalLM":
		// As Gemma 3 1B's config.json writes them.
		c["model_type"] = "gemma3_text"
		delete(c, "hidden_act")
		c["hidden_activation"] = "gelu_pytorch_tanh"
		c["head_dim"] = p.headDim()
		c["attention_bias"] = false
		c["attention_dropout"] = 0.0
		c["query_pre_attn_scalar"] = p.QueryPreAttnScalar
		c["sliding_window"] = p.SlidingWindow
		c["sliding_window_pattern"] = p.SlidingWindowPattern
		c["rope_local_base_freq"] = p.LocalRopeTheta
		c["rope_scaling"] = nil
		c["final_logit_softcapping"] = nil
		c["attn_logit_softcapping"] = nil
		c["cache_implementation"] = "hybrid"
	case "Qwen3MoeForCausalLM", "Qwen2MoeForCausalLM":
		// As Qwen3-30B-A3B's and Qwen1.5-MoE-A2.7B's config.json write them.
		c["num_experts"] = p.Experts
		c["num_experts_per_tok"] = p.TopK
		c["moe_intermediate_size"] = p.MoEIntermediate
		c["norm_topk_prob"] = p.NormTopK
		c["decoder_sparse_step"] = 1
		c["mlp_only_layers"] = append([]int{}, p.MLPOnly...)
		c["use_sliding_window"] = false
		c["sliding_window"] = nil
		c["max_window_layers"] = p.Layers
		c["output_router_logits"] = false
		c["router_aux_loss_coef"] = 0.001
		c["attention_dropout"] = 0.0
		if p.Arch == "Qwen3MoeForCausalLM" {
			c["model_type"] = "qwen3_moe"
			c["head_dim"] = p.headDim()
			c["attention_bias"] = false
		} else {
			c["model_type"] = "qwen2_moe"
			c["shared_expert_intermediate_size"] = p.SharedIntermediate
		}
	case glm4Moe:
		// As GLM-4.5-Air's config.json writes them.
		c["model_type"] = "glm4_moe"
		c["head_dim"] = p.headDim()
		c["attention_bias"] = true
		c["attention_dropout"] = 0.0
		c["partial_rotary_factor"] = p.PartialRotary
		c["rope_scaling"] = nil
		c["n_routed_experts"] = p.Experts
		c["num_experts_per_tok"] = p.TopK
		c["moe_intermediate_size"] = p.MoEIntermediate
		c["n_shared_experts"] = p.SharedExperts
		c["n_group"] = p.Groups
		c["topk_group"] = p.TopKGroup
		c["routed_scaling_factor"] = p.RoutedScale
		c["norm_topk_prob"] = p.NormTopK
		c["first_k_dense_replace"] = p.FirstDense
		c["num_nextn_predict_layers"] = p.MTP
		c["use_qk_norm"] = p.QKNorm
	case "MistralForCausalLM":
		c["model_type"] = "mistral"
		c["sliding_window"] = nil
		if p.SlidingWindow > 0 {
			c["sliding_window"] = p.SlidingWindow
		}
	default:
		c["model_type"] = "llama"
		c["attention_bias"] = p.Bias
		c["mlp_bias"] = p.Bias
	}
	if p.RopeScaling != nil {
		c["rope_scaling"] = p.RopeScaling
	}
	return c
}

// tensorSpec is one weight and the distribution it is drawn from.
type tensorSpec struct {
	name  string
	shape []int
	kind  int     // kindLinear, kindNorm, kindBias, kindEmbed
	scale float32 // standard deviation (linear, bias, embed) or spread around 1 (norm)
}

const (
	kindLinear = iota
	kindNorm
	kindBias
	kindEmbed
	kindUnitNorm // a Gemma norm, applied as (1 + w): spread around 0
)

// The scales were tuned on the tiny preset so that logits are peaked
// (top-1 probability mostly above one half) while the top-1/top-2 margin
// ranges from near ties to several logits (TestTinyMargins), and so that
// q8, q6 and q4 variants show growing KLD with both close and clear flips
// (TestReportSchemes in cmd/logitscope). Larger q/k gains made the network
// chaotic: every scheme's flips drowned in noise.
func specs(p Preset, vocab int) []tensorSpec {
	d, hd := p.Hidden, p.headDim()
	q, kv := p.Heads*hd, p.KVHeads*hd
	lin := func(name string, out, in int, gain float32) tensorSpec {
		return tensorSpec{name, []int{out, in}, kindLinear, gain / float32(math.Sqrt(float64(in)))}
	}
	gemma := p.Arch == "Gemma3ForCausalLM"
	norm := kindNorm
	if gemma {
		norm = kindUnitNorm
	}
	s := []tensorSpec{{"model.embed_tokens.weight", []int{vocab, d}, kindEmbed, 4 / float32(math.Sqrt(float64(d)))}}
	for i := 0; i < p.Layers+p.MTP; i++ {
		pre := fmt.Sprintf("model.layers.%d.", i)
		if i >= p.Layers {
			// A multi-token prediction layer: a decoder layer (below) and
			// what combines its inputs and reads its output, as GLM-4.5's
			// checkpoints store them; nothing here runs it.
			s = append(s, lin(pre+"eh_proj.weight", d, 2*d, 1),
				tensorSpec{pre + "enorm.weight", []int{d}, norm, 0.2},
				tensorSpec{pre + "hnorm.weight", []int{d}, norm, 0.2},
				tensorSpec{pre + "shared_head.norm.weight", []int{d}, norm, 0.2},
				tensorSpec{pre + "shared_head.head.weight", []int{vocab, d}, kindEmbed, 4 / float32(math.Sqrt(float64(d)))})
		}
		s = append(s,
			tensorSpec{pre + "input_layernorm.weight", []int{d}, norm, 0.2},
			lin(pre+"self_attn.q_proj.weight", q, d, 1),
			lin(pre+"self_attn.k_proj.weight", kv, d, 1),
			lin(pre+"self_attn.v_proj.weight", kv, d, 1),
			lin(pre+"self_attn.o_proj.weight", d, q, 2),
			tensorSpec{pre + "post_attention_layernorm.weight", []int{d}, norm, 0.2},
		)
		mlp := func(pre string, ff int, gain float32) {
			s = append(s, lin(pre+"gate_proj.weight", ff, d, gain), lin(pre+"up_proj.weight", ff, d, gain), lin(pre+"down_proj.weight", d, ff, 2*gain))
		}
		if p.sparse(i) {
			// The router's gain spreads its logits enough that a token's
			// top experts are mostly clear winners, yet some are near ties
			// that quantization can swap. Each expert is narrower than the
			// dense MLP it replaces; the gain keeps the sum of TopK of them
			// about as strong.
			s = append(s, lin(pre+"mlp.gate.weight", p.Experts, d, 1.5))
			for e := 0; e < p.Experts; e++ {
				mlp(fmt.Sprintf("%smlp.experts.%d.", pre, e), p.MoEIntermediate, 1)
			}
			if p.Arch == glm4Moe {
				// The score bias moves choices between sigmoid scores
				// about 0.1 apart, as trained ones do near the top.
				s = append(s, tensorSpec{pre + "mlp.gate.e_score_correction_bias", []int{p.Experts}, kindBias, 0.1})
				if p.SharedExperts > 0 {
					mlp(pre+"mlp.shared_experts.", p.SharedExperts*p.MoEIntermediate, 1)
				}
			}
			if p.SharedIntermediate > 0 {
				mlp(pre+"mlp.shared_expert.", p.SharedIntermediate, 1)
				s = append(s, lin(pre+"mlp.shared_expert_gate.weight", 1, d, 1))
			}
		} else {
			mlp(pre+"mlp.", p.Intermediate, 1)
		}
		if p.Arch == "Qwen2ForCausalLM" || p.Arch == "Qwen2MoeForCausalLM" || p.Arch == glm4Moe {
			s = append(s,
				tensorSpec{pre + "self_attn.q_proj.bias", []int{q}, kindBias, 0.5},
				tensorSpec{pre + "self_attn.k_proj.bias", []int{kv}, kindBias, 0.5},
				tensorSpec{pre + "self_attn.v_proj.bias", []int{kv}, kindBias, 0.05},
			)
		}
		if p.Bias {
			s = append(s,
				tensorSpec{pre + "self_attn.q_proj.bias", []int{q}, kindBias, 0.5},
				tensorSpec{pre + "self_attn.k_proj.bias", []int{kv}, kindBias, 0.5},
				tensorSpec{pre + "self_attn.v_proj.bias", []int{kv}, kindBias, 0.05},
				tensorSpec{pre + "self_attn.o_proj.bias", []int{d}, kindBias, 0.05},
				tensorSpec{pre + "mlp.gate_proj.bias", []int{p.Intermediate}, kindBias, 0.5},
				tensorSpec{pre + "mlp.up_proj.bias", []int{p.Intermediate}, kindBias, 0.5},
				tensorSpec{pre + "mlp.down_proj.bias", []int{d}, kindBias, 0.05},
			)
		}
		if p.Arch == "Qwen3ForCausalLM" || p.Arch == "Qwen3MoeForCausalLM" || gemma || p.QKNorm {
			// Spread enough that a forward pass that skipped q/k norm, or
			// applied one head's weight to another, would be seen.
			s = append(s,
				tensorSpec{pre + "self_attn.q_norm.weight", []int{hd}, norm, 0.4},
				tensorSpec{pre + "self_attn.k_norm.weight", []int{hd}, norm, 0.4},
			)
		}
		if gemma {
			s = append(s,
				tensorSpec{pre + "pre_feedforward_layernorm.weight", []int{d}, norm, 0.2},
				tensorSpec{pre + "post_feedforward_layernorm.weight", []int{d}, norm, 0.2},
			)
		}
	}
	s = append(s, tensorSpec{"model.norm.weight", []int{d}, norm, 0.2})
	if !p.Tied {
		s = append(s, tensorSpec{"lm_head.weight", []int{vocab, d}, kindEmbed, 4 / float32(math.Sqrt(float64(d)))})
	}
	return s
}

func weights(p Preset, vocab int, opt Options) []safetensors.Tensor {
	sp := specs(p, vocab)
	out := make([]safetensors.Tensor, len(sp))
	for i, s := range sp {
		out[i] = safetensors.Tensor{Name: s.name, DType: safetensors.BF16, Shape: s.shape,
			Data: safetensors.EncodeBF16(generate(s, opt.Seed))}
		if strings.HasSuffix(s.name, "e_score_correction_bias") {
			// float32, not bf16, as GLM-4.5's checkpoints store it
			// (transformers keeps it in float32: _keep_in_fp32_modules).
			out[i].DType, out[i].Data = safetensors.F32, safetensors.EncodeF32(generate(s, opt.Seed))
		}
		if opt.Progress != nil {
			opt.Progress(i+1, len(sp))
		}
	}
	return out
}

// generate draws a tensor from a stream seeded by the run's seed and the
// tensor's name, so that adding a tensor never changes another.
func generate(s tensorSpec, seed uint64) []float32 {
	n := 1
	for _, v := range s.shape {
		n *= v
	}
	h := fnv.New64a()
	h.Write([]byte(s.name))
	r := rng(seed ^ h.Sum64())
	x := make([]float32, n)
	switch s.kind {
	case kindNorm:
		for i := range x {
			x[i] = 1 + s.scale*r.uniform()
		}
	case kindUnitNorm:
		for i := range x {
			x[i] = s.scale * r.uniform()
		}

	case kindBias:
		for i := range x {
			x[i] = s.scale * r.normal()
		}
	case kindEmbed:
		// One value in 256 is an outlier ×8: a 4-bit group that holds one
		// loses the rest of its row's detail, which moves that token's logit
		// alone, a defect the close/clear criterion must call clear.
		for i := range x {
			x[i] = s.scale * r.normal()
			if r.next()%256 == 0 {
				x[i] *= 8
			}
		}
	case kindLinear:
		// A few input channels carry outliers ×6, as trained models'
		// activations do: they are what makes 4-bit groups lose precision.
		in := s.shape[1]
		boost := make([]float32, in)
		for j := range boost {
			boost[j] = 1
			if r.next()%64 == 0 {
				boost[j] = 3
			}
		}
		for i := range x {
			x[i] = s.scale * boost[i%in] * r.normal()
		}
	}
	return x
}

// rng is splitmix64: tiny, fast, and the same on every platform.
type rng uint64

func (r *rng) next() uint64 {
	*r += 0x9e3779b97f4a7c15
	z := uint64(*r)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// uniform in [-1, 1).
func (r *rng) uniform() float32 { return float32(int64(r.next()>>11))/float32(1<<52) - 1 }

// normal approximates N(0,1) by the Irwin–Hall sum of four uniforms,
// rescaled: smooth enough for weights, with no transcendental calls.
func (r *rng) normal() float32 {
	var s float32
	for i := 0; i < 4; i++ {
		s += r.uniform()
	}
	return s * float32(math.Sqrt(3.0/4.0))
}

func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
