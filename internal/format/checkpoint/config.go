package checkpoint

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Config holds the fields of config.json that the forward pass needs.
type Config struct {
	Architectures         []string `json:"architectures"`
	ModelType             string   `json:"model_type"`
	HiddenSize            int      `json:"hidden_size"`
	IntermediateSize      int      `json:"intermediate_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	NumKeyValueHeads      int      `json:"num_key_value_heads"`
	HeadDim               int      `json:"head_dim"`
	VocabSize             int      `json:"vocab_size"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	RMSNormEps            float64  `json:"rms_norm_eps"`
	RopeTheta             float64  `json:"rope_theta"`
	TieWordEmbeddings     bool     `json:"tie_word_embeddings"`
	HiddenAct             string   `json:"hidden_act"`
	AttentionBias         *bool    `json:"attention_bias,omitempty"`
	TorchDtype            string   `json:"torch_dtype"`

	// RopeScaling is config.json's rope_scaling object as written, nil when
	// absent or null; transformers v5 writes it as rope_parameters, which
	// ParseConfig copies here unless its rope_type is "default". It is not
	// interpreted here, but a forward pass must not ignore it: Llama 3's
	// "llama3" scaling changes the RoPE frequencies at every position, not
	// only beyond the trained context.
	RopeScaling json.RawMessage `json:"rope_scaling,omitempty"`

	// Fields that change the forward pass where a config sets them; read so
	// that a model asking for what is not implemented is refused instead
	// of run with other semantics.
	UseSlidingWindow    *bool           `json:"use_sliding_window,omitempty"`
	SlidingWindow       *int            `json:"sliding_window,omitempty"`
	MaxWindowLayers     *int            `json:"max_window_layers,omitempty"`
	LayerTypes          []string        `json:"layer_types,omitempty"`
	MLPBias             *bool           `json:"mlp_bias,omitempty"`
	PartialRotaryFactor *float64        `json:"partial_rotary_factor,omitempty"`
	QuantizationConfig  json.RawMessage `json:"quantization_config,omitempty"`

	// Gemma 3 (Gemma3TextConfig): hidden_activation replaces hidden_act,
	// the attention scale is query_pre_attn_scalar^-½, sliding layers use
	// rope_local_base_freq, and sliding_window_pattern derives layer_types
	// where a config has none. RopeParameters is transformers v5's
	// rope_parameters as written: for Gemma 3 it may be keyed by layer type.
	HiddenActivation          string          `json:"hidden_activation,omitempty"`
	QueryPreAttnScalar        *float64        `json:"query_pre_attn_scalar,omitempty"`
	RopeLocalBaseFreq         *float64        `json:"rope_local_base_freq,omitempty"`
	SlidingWindowPattern      *int            `json:"sliding_window_pattern,omitempty"`
	FinalLogitSoftcapping     *float64        `json:"final_logit_softcapping,omitempty"`
	AttnLogitSoftcapping      *float64        `json:"attn_logit_softcapping,omitempty"`
	UseBidirectionalAttention *bool           `json:"use_bidirectional_attention,omitempty"`
	RopeParameters            json.RawMessage `json:"rope_parameters,omitempty"`

	// Mixture of experts (Qwen2MoeConfig, Qwen3MoeConfig): num_experts
	// routed experts of moe_intermediate_size on the layers that
	// decoder_sparse_step and mlp_only_layers pick, num_experts_per_tok of
	// them per token; Qwen2-MoE adds a shared expert of
	// shared_expert_intermediate_size behind a sigmoid gate, and its
	// attention biases follow qkv_bias.
	NumExperts                   *int  `json:"num_experts,omitempty"`
	NumLocalExperts              *int  `json:"num_local_experts,omitempty"` // Mixtral's name for it
	NumExpertsPerTok             *int  `json:"num_experts_per_tok,omitempty"`
	MoEIntermediateSize          int   `json:"moe_intermediate_size,omitempty"`
	SharedExpertIntermediateSize int   `json:"shared_expert_intermediate_size,omitempty"`
	NormTopKProb                 *bool `json:"norm_topk_prob,omitempty"`
	DecoderSparseStep            *int  `json:"decoder_sparse_step,omitempty"`
	MLPOnlyLayers                []int `json:"mlp_only_layers,omitempty"`
	QKVBias                      *bool `json:"qkv_bias,omitempty"`

	// GLM-4.5's mixture of experts (Glm4MoeConfig; DeepSeek-V3 names them
	// alike): n_routed_experts sigmoid-routed experts in n_group groups, of
	// which topk_group are kept per token, weights times
	// routed_scaling_factor; n_shared_experts ungated shared experts of
	// moe_intermediate_size each; dense MLPs on the first
	// first_k_dense_replace layers; num_nextn_predict_layers multi-token
	// prediction layers stored after the causal ones; q/k norms when
	// use_qk_norm.
	NRoutedExperts        *int     `json:"n_routed_experts,omitempty"`
	NSharedExperts        *int     `json:"n_shared_experts,omitempty"`
	NGroup                *int     `json:"n_group,omitempty"`
	TopKGroup             *int     `json:"topk_group,omitempty"`
	RoutedScalingFactor   *float64 `json:"routed_scaling_factor,omitempty"`
	FirstKDenseReplace    *int     `json:"first_k_dense_replace,omitempty"`
	NumNextnPredictLayers *int     `json:"num_nextn_predict_layers,omitempty"`
	UseQKNorm             *bool    `json:"use_qk_norm,omitempty"`
}

// Defaults for fields that config.json may omit; they match the
// transformers defaults for the Qwen2 and Llama configs.
const (
	DefaultRMSNormEps            = 1e-6
	DefaultRopeTheta             = 10000
	DefaultMaxPositionEmbeddings = 32768
)

// Arch is the single architecture name ("" if the config has none; a Config
// from ParseConfig always has exactly one).
func (c Config) Arch() string {
	if len(c.Architectures) == 0 {
		return ""
	}
	return c.Architectures[0]
}

// Upper bounds on config.json's sizes. A config is read before any tensor,
// and loaders size tables and loops by it, so a corrupt or hostile value
// (num_hidden_layers: 1e9) must be refused here, before it costs memory or
// time. Each bound admits the largest published models with room to spare
// (dense models past 1T parameters, vocabularies of 1M, contexts of 10M
// tokens):
//
//   - layers: Llama 3.1 405B has 126, PaLM 540B 118; 4096 layers of
//     hidden 16384 would be 13T parameters.
//   - hidden_size: 16384 for Llama 3.1 405B, 18432 for PaLM.
//   - intermediate_size: 53248 for Llama 3.1 405B, 73728 for PaLM.
//   - vocab_size: 262144 for Gemma 3; the bound admits a 1M vocabulary
//     twice over.
//   - heads: 128 for the largest models; head_dim: 256 for Gemma.
//   - max_position_embeddings: 10,485,760 for Llama 4 Scout.
//
// Their products stay far inside int64 (vocab × hidden < 2^39, layers ×
// intermediate × hidden < 2^49), so later size arithmetic cannot overflow.
const (
	MaxLayers            = 1 << 12
	MaxHiddenSize        = 1 << 17
	MaxIntermediateSize  = 1 << 20
	MaxVocabSize         = 1 << 21
	MaxHeads             = 1 << 12
	MaxHeadDim           = 1 << 12
	MaxPositionEmbedding = 1 << 24
)

// configPresence tells an absent field from one explicitly set to zero, and
// picks up the spellings newer transformers versions write instead.
type configPresence struct {
	RMSNormEps            *float64 `json:"rms_norm_eps"`
	RopeTheta             *float64 `json:"rope_theta"`
	MaxPositionEmbeddings *int     `json:"max_position_embeddings"`
	TieWordEmbeddings     *bool    `json:"tie_word_embeddings"`
	Dtype                 string   `json:"dtype"` // torch_dtype's newer name
	RopeParameters        *struct {
		RopeTheta *float64 `json:"rope_theta"`
		RopeType  string   `json:"rope_type"`
	} `json:"rope_parameters"`
}

// ParseConfig parses and validates config.json bytes; name is used in errors.
func ParseConfig(data []byte, name string) (Config, error) {
	fail := func(format string, args ...any) (Config, error) {
		return Config{}, fmt.Errorf("checkpoint: %s: %s", name, fmt.Sprintf(format, args...))
	}
	var c Config
	var p configPresence
	if err := json.Unmarshal(data, &c); err != nil {
		return fail("%s", jsonError(err))
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return fail("%s", jsonError(err))
	}
	if string(c.RopeScaling) == "null" {
		c.RopeScaling = nil
	}
	if c.RopeScaling == nil && p.RopeParameters != nil && p.RopeParameters.RopeType != "" && p.RopeParameters.RopeType != "default" {
		var raw struct {
			RopeParameters json.RawMessage `json:"rope_parameters"`
		}
		if err := json.Unmarshal(data, &raw); err != nil {
			return fail("%s", jsonError(err))
		}
		c.RopeScaling = raw.RopeParameters
	}
	if string(c.QuantizationConfig) == "null" {
		c.QuantizationConfig = nil
	}
	if c.TorchDtype == "" {
		c.TorchDtype = p.Dtype
	}

	if len(c.Architectures) != 1 || c.Architectures[0] == "" {
		return fail("architectures must have exactly one entry, got %q", c.Architectures)
	}
	for _, f := range []struct {
		field    string
		v, limit int
	}{
		{"hidden_size", c.HiddenSize, MaxHiddenSize},
		{"intermediate_size", c.IntermediateSize, MaxIntermediateSize},
		{"num_hidden_layers", c.NumHiddenLayers, MaxLayers},
		{"num_attention_heads", c.NumAttentionHeads, MaxHeads},
		{"vocab_size", c.VocabSize, MaxVocabSize},
	} {
		if f.v == 0 {
			return fail("%s is missing (or 0)", f.field)
		}
		if f.v < 0 {
			return fail("%s must be > 0, got %d", f.field, f.v)
		}
		if f.v > f.limit {
			return fail("%s %d: more than %d", f.field, f.v, f.limit)
		}
	}
	// Optional sizes, 0 when absent; checked here so that the checks below
	// that combine them report the bound, not a symptom of the size.
	for _, f := range []struct {
		field    string
		v, limit int
	}{
		{"num_key_value_heads", c.NumKeyValueHeads, MaxHeads},
		{"head_dim", c.HeadDim, MaxHeadDim},
	} {
		if f.v > f.limit {
			return fail("%s %d: more than %d", f.field, f.v, f.limit)
		}
	}

	// 0 means absent: transformers writes no explicit zero for these.
	switch {
	case c.NumKeyValueHeads < 0:
		return fail("num_key_value_heads must be > 0, got %d", c.NumKeyValueHeads)
	case c.NumKeyValueHeads == 0:
		c.NumKeyValueHeads = c.NumAttentionHeads
	case c.NumAttentionHeads%c.NumKeyValueHeads != 0:
		return fail("num_key_value_heads = %d must divide num_attention_heads = %d",
			c.NumKeyValueHeads, c.NumAttentionHeads)
	}
	switch {
	case c.HeadDim < 0:
		return fail("head_dim must be > 0, got %d", c.HeadDim)
	case c.HeadDim == 0 && c.Arch() == "Qwen3ForCausalLM":
		// Qwen3Config's head_dim defaults to 128, not hidden_size / heads.
		c.HeadDim = 128
	case c.HeadDim == 0 && c.Arch() == "Gemma3ForCausalLM":
		// So does Gemma3TextConfig's, to 256.
		c.HeadDim = 256
	case c.HeadDim == 0 && c.HiddenSize%c.NumAttentionHeads != 0:
		return fail("head_dim is absent and hidden_size = %d is not divisible by num_attention_heads = %d",
			c.HiddenSize, c.NumAttentionHeads)
	case c.HeadDim == 0:
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
	if c.HeadDim > MaxHeadDim {
		return fail("head_dim %d (hidden_size / num_attention_heads): more than %d", c.HeadDim, MaxHeadDim)
	}
	if c.HeadDim%2 != 0 {
		return fail("head_dim = %d must be even (RoPE rotates pairs of dimensions)", c.HeadDim)
	}

	// Gemma3TextConfig ties by default (Gemma 3 1B's config.json omits the
	// field); the Qwen and Llama configs do not.
	if p.TieWordEmbeddings == nil && c.Arch() == "Gemma3ForCausalLM" {
		c.TieWordEmbeddings = true
	}

	// Glm4MoeConfig's defaults differ: rms_norm_eps 1e-5,
	// max_position_embeddings 131072.
	glm := c.Arch() == "Glm4MoeForCausalLM"
	c.RMSNormEps = DefaultRMSNormEps
	if glm {
		c.RMSNormEps = 1e-5
	}
	if p.RMSNormEps != nil {
		if *p.RMSNormEps <= 0 {
			return fail("rms_norm_eps must be > 0, got %g", *p.RMSNormEps)
		}
		c.RMSNormEps = *p.RMSNormEps
	}
	// Gemma3TextConfig's defaults differ: rope_theta 1e6 (its global
	// layers'), max_position_embeddings 131072.
	gemma3 := c.Arch() == "Gemma3ForCausalLM"
	c.RopeTheta = DefaultRopeTheta
	if gemma3 {
		c.RopeTheta = 1e6
	}
	theta := p.RopeTheta
	if theta == nil && p.RopeParameters != nil {
		theta = p.RopeParameters.RopeTheta
	}
	if theta != nil {
		if *theta <= 0 {
			return fail("rope_theta must be > 0, got %g", *theta)
		}
		c.RopeTheta = *theta
	}
	c.MaxPositionEmbeddings = DefaultMaxPositionEmbeddings
	if gemma3 || glm {
		c.MaxPositionEmbeddings = 131072
	}
	if p.MaxPositionEmbeddings != nil {
		if *p.MaxPositionEmbeddings <= 0 {
			return fail("max_position_embeddings must be > 0, got %d", *p.MaxPositionEmbeddings)
		}
		if *p.MaxPositionEmbeddings > MaxPositionEmbedding {
			return fail("max_position_embeddings %d: more than %d", *p.MaxPositionEmbeddings, MaxPositionEmbedding)
		}
		c.MaxPositionEmbeddings = *p.MaxPositionEmbeddings
	}
	return c, nil
}

// GenerationConfig holds generation_config.json's token ids.
type GenerationConfig struct {
	BOSTokenID  *int
	EOSTokenIDs []int
}

// ParseGenerationConfig accepts eos_token_id as an int or a list of ints.
// Absent or null ids leave BOSTokenID nil and EOSTokenIDs empty.
func ParseGenerationConfig(data []byte, name string) (GenerationConfig, error) {
	var raw struct {
		BOS json.RawMessage `json:"bos_token_id"`
		EOS json.RawMessage `json:"eos_token_id"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return GenerationConfig{}, fmt.Errorf("checkpoint: %s: %s", name, jsonError(err))
	}
	var g GenerationConfig
	if len(raw.BOS) > 0 && string(raw.BOS) != "null" {
		var id int
		if err := json.Unmarshal(raw.BOS, &id); err != nil || id < 0 {
			return g, fmt.Errorf("checkpoint: %s: bos_token_id must be a non-negative integer, got %s", name, compact(raw.BOS))
		}
		g.BOSTokenID = &id
	}
	if len(raw.EOS) > 0 && string(raw.EOS) != "null" {
		var id int
		if err := json.Unmarshal(raw.EOS, &id); err == nil {
			g.EOSTokenIDs = []int{id}
		} else if err := json.Unmarshal(raw.EOS, &g.EOSTokenIDs); err != nil {
			return g, fmt.Errorf("checkpoint: %s: eos_token_id must be an integer or a list of integers, got %s", name, compact(raw.EOS))
		}
		for _, id := range g.EOSTokenIDs {
			if id < 0 {
				return g, fmt.Errorf("checkpoint: %s: eos_token_id must be non-negative, got %s", name, compact(raw.EOS))
			}
		}
	}
	return g, nil
}

// jsonError rewords encoding/json errors to name the offending field.
func jsonError(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return fmt.Sprintf("got a JSON %s, want an object", te.Value)
		}
		return fmt.Sprintf("%s: got a JSON %s, want %s", te.Field, te.Value, te.Type)
	}
	return "malformed JSON: " + err.Error()
}

// compact renders a raw JSON value on one line for an error message.
func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
