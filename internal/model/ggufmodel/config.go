package ggufmodel

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/ggml"
	"logitscope/internal/format/gguf"
	"logitscope/internal/model"
)

// fromGGUF maps general.architecture to the config.json architecture
// whose forward pass llama.cpp runs for it, with the model_type
// transformers gives it. A Mistral checkpoint converts as llama and runs
// there as Llama, without its sliding window: so it opens as Llama.
var fromGGUF = map[string]struct{ arch, modelType string }{
	"llama":    {"LlamaForCausalLM", "llama"},
	"qwen2":    {"Qwen2ForCausalLM", "qwen2"},
	"qwen3":    {"Qwen3ForCausalLM", "qwen3"},
	"gemma3":   {"Gemma3ForCausalLM", "gemma3_text"},
	"qwen2moe": {"Qwen2MoeForCausalLM", "qwen2_moe"},
	"qwen3moe": {"Qwen3MoeForCausalLM", "qwen3_moe"},
}

// Config translates a GGUF file's metadata into the config.json and
// generation_config.json of the model llama.cpp runs from it, so that a
// GGUF file opens as a model by itself (OpenModel) and every engine here
// computes what llama.cpp computes on it.
//
// The hyperparameters come from the {arch}.* keys, with llama.cpp's
// loader's defaults where it has one (rope.freq_base 10000, head_count_kv
// = head_count, key_length = embedding_length / head_count); llama.cpp's
// semantics also decide what the metadata leaves to the architecture:
// Qwen2-, Qwen3- and Llama-family files never slide their attention
// window (llama.cpp reads no window for them), Qwen3-MoE renormalizes its
// top-k routing weights and Qwen2-MoE does not, Gemma 3 scales attention
// by key_length^-½ (hidden/heads for its 62-layer 27B) and its embeddings
// by √hidden in float32. The tensors say the rest: the vocabulary is
// token_embd's rows, the head is tied when there is no output.weight,
// biases exist when their tensors do, and a mixture's dense layers are
// those without a router. Llama 3's RoPE scaling, which llama.cpp stores
// as per-frequency factors (rope_freqs.weight), becomes the rope_scaling
// that reproduces them (llama3Scaling).
//
// A required key that is missing, a value of the wrong type or out of
// range, and anything the forward passes here do not implement (another
// architecture, YaRN, softcapping, non-causal attention, partial RoPE) is
// refused, naming the file and the key or tensor.
func Config(f *gguf.File) (checkpoint.Config, checkpoint.GenerationConfig, error) {
	d, err := configFiles(f)
	return d.config, d.generation, err
}

// derivedConfig is Config's result with the files it parsed.
type derivedConfig struct {
	cfg, gen   []byte // config.json, generation_config.json
	config     checkpoint.Config
	generation checkpoint.GenerationConfig
}

// meta reads one file's {arch}.* keys, each error naming the file and key.
type meta struct {
	f    *gguf.File
	arch string
}

func (m meta) key(k string) string { return m.arch + "." + k }

func (m meta) has(k string) bool { return m.f.Has(m.key(k)) }

// size reads a count that must be between 1 and limit.
func (m meta) size(k string, limit int) (int, error) {
	v, err := m.f.Uint(m.key(k))
	if err != nil {
		return 0, err
	}
	if v == 0 || v > uint64(limit) {
		return 0, fmt.Errorf("%s: %s is %d, outside 1…%d", m.f.Path, m.key(k), v, limit)
	}
	return int(v), nil
}

// sizeOr is size, or def when the key is absent.
func (m meta) sizeOr(k string, def, limit int) (int, error) {
	if !m.has(k) {
		return def, nil
	}
	return m.size(k, limit)
}

// number reads a number for config.json as the shortest decimal that
// gives back the stored value: a FLOAT32 rope_theta of 500000 is written
// 500000, an rms epsilon of 1e-5 1e-05, which is what the converter read
// from the original config.json in every real case.
func (m meta) number(k string) (json.Number, float64, error) {
	key := m.key(k)
	v, err := m.f.Float(key)
	if err != nil {
		return "", 0, err
	}
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "", 0, fmt.Errorf("%s: %s is %g", m.f.Path, key, v)
	}
	bits := 64
	if i := slices.IndexFunc(m.f.KV, func(kv gguf.KV) bool { return kv.Key == key }); i >= 0 {
		if _, ok := m.f.KV[i].Value.Any().(float32); ok {
			bits = 32
		}
	}
	return json.Number(strconv.FormatFloat(v, 'g', -1, bits)), v, nil
}

// positive is number, refusing values that are not > 0.
func (m meta) positive(k string) (json.Number, error) {
	n, v, err := m.number(k)
	if err == nil && !(v > 0) {
		err = fmt.Errorf("%s: %s is %g, not positive", m.f.Path, m.key(k), v)
	}
	return n, err
}

// configFiles writes Config's config.json and generation_config.json and
// parses them as a checkpoint's.
func configFiles(f *gguf.File) (derivedConfig, error) {
	var d derivedConfig
	cfg, gen, err := configJSON(f)
	if err != nil {
		return d, err
	}
	d.cfg, d.gen = cfg, gen
	if d.config, err = checkpoint.ParseConfig(cfg, f.Path+" (its derived config.json)"); err != nil {
		return d, err
	}
	d.generation, err = checkpoint.ParseGenerationConfig(gen, f.Path+" (its derived generation_config.json)")
	return d, err
}

// configJSON is the bytes of configFiles.
func configJSON(f *gguf.File) (cfg, gen []byte, err error) {
	arch, err := f.String("general.architecture")
	if err != nil {
		return nil, nil, err
	}
	hf, ok := fromGGUF[arch]
	if !ok {
		var names []string
		for a := range fromGGUF {
			names = append(names, a)
		}
		slices.Sort(names)
		return nil, nil, fmt.Errorf("%s: general.architecture %q is not supported (supported: %s)", f.Path, arch, strings.Join(names, ", "))
	}
	m := meta{f, arch}
	c := map[string]any{"architectures": []string{hf.arch}, "model_type": hf.modelType, "torch_dtype": "float32"}
	if arch == "gemma3" {
		c["hidden_activation"] = "gelu_pytorch_tanh"
	} else {
		c["hidden_act"] = "silu"
	}
	sizes := map[string]int{}
	for _, k := range []struct {
		key, field string
		limit      int
	}{
		{"context_length", "max_position_embeddings", checkpoint.MaxPositionEmbedding},
		{"embedding_length", "hidden_size", checkpoint.MaxHiddenSize},
		{"block_count", "num_hidden_layers", checkpoint.MaxLayers},
		{"feed_forward_length", "intermediate_size", checkpoint.MaxIntermediateSize},
		{"attention.head_count", "num_attention_heads", checkpoint.MaxHeads},
	} {
		v, err := m.size(k.key, k.limit)
		if err != nil {
			return nil, nil, err
		}
		sizes[k.key], c[k.field] = v, v
	}
	embd, heads, layers := sizes["embedding_length"], sizes["attention.head_count"], sizes["block_count"]
	kvHeads, err := m.sizeOr("attention.head_count_kv", heads, checkpoint.MaxHeads)
	if err != nil {
		return nil, nil, err
	}
	hd, err := m.sizeOr("attention.key_length", embd/heads, checkpoint.MaxHeadDim)
	if err != nil {
		return nil, nil, err
	}
	c["num_key_value_heads"], c["head_dim"] = kvHeads, hd
	for _, k := range []string{"attention.value_length", "rope.dimension_count"} {
		if v, err := m.sizeOr(k, hd, checkpoint.MaxHeadDim); err != nil {
			return nil, nil, err
		} else if v != hd {
			return nil, nil, fmt.Errorf("%s: %s is %d but the key length is %d: only heads whose values and rotary dimensions are as wide as their keys are supported", f.Path, m.key(k), v, hd)
		}
	}
	if c["rms_norm_eps"], err = m.positive("attention.layer_norm_rms_epsilon"); err != nil {
		return nil, nil, err
	}
	theta := 10000.0 // llama.cpp's default
	c["rope_theta"] = json.Number("10000")
	if m.has("rope.freq_base") {
		n, err := m.positive("rope.freq_base")
		if err != nil {
			return nil, nil, err
		}
		c["rope_theta"] = n
		theta, _ = n.Float64()
	}
	if err := unsupportedKeys(m); err != nil {
		return nil, nil, err
	}
	if err := ropeScaling(m, c, theta, hd); err != nil {
		return nil, nil, err
	}

	embed, ok := f.Tensor("token_embd.weight")
	if !ok || len(embed.Dims) != 2 {
		return nil, nil, fmt.Errorf("%s: no 2-dimensional tensor token_embd.weight, whose rows are the vocabulary", f.Path)
	}
	vocab := int(embed.Dims[1])
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, nil, err
	}
	if len(tokens) != vocab {
		return nil, nil, fmt.Errorf("%s: tokenizer.ggml.tokens has %d tokens but token_embd.weight has %d rows", f.Path, len(tokens), vocab)
	}
	if m.has("vocab_size") {
		if v, err := f.Uint(m.key("vocab_size")); err != nil {
			return nil, nil, err
		} else if v != uint64(vocab) {
			return nil, nil, fmt.Errorf("%s: %s is %d but token_embd.weight has %d rows", f.Path, m.key("vocab_size"), v, vocab)
		}
	}
	if vocab > checkpoint.MaxVocabSize {
		return nil, nil, fmt.Errorf("%s: token_embd.weight has %d rows: more than %d", f.Path, vocab, checkpoint.MaxVocabSize)
	}
	c["vocab_size"] = vocab
	_, untied := f.Tensor("output.weight")
	c["tie_word_embeddings"] = !untied
	_, qBias := f.Tensor("blk.0.attn_q.bias")
	_, oBias := f.Tensor("blk.0.attn_output.bias")
	switch arch {
	case "llama":
		mlpBias := false
		for _, n := range []string{"ffn_gate", "ffn_up", "ffn_down"} {
			_, ok := f.Tensor("blk.0." + n + ".bias")
			mlpBias = mlpBias || ok
		}
		c["attention_bias"], c["mlp_bias"] = qBias || oBias, mlpBias
	case "qwen3", "qwen3moe", "gemma3":
		c["attention_bias"] = qBias || oBias
	case "qwen2moe":
		c["qkv_bias"] = qBias
	}
	if arch == "gemma3" {
		if err := gemma3Config(m, c, hd, layers); err != nil {
			return nil, nil, err
		}
	}
	if err := experts(m, c, sizes["feed_forward_length"], layers); err != nil {
		return nil, nil, err
	}
	if cfg, err = json.MarshalIndent(c, "", "  "); err != nil {
		return nil, nil, err
	}
	g, err := generation(f, tokens)
	if err != nil {
		return nil, nil, err
	}
	gen, err = json.MarshalIndent(g, "", "  ")
	return append(cfg, '\n'), append(gen, '\n'), err
}

// unsupportedKeys refuses what llama.cpp would read from the file and no
// engine here implements.
func unsupportedKeys(m meta) error {
	if m.has("attention.causal") {
		causal, err := m.f.Bool(m.key("attention.causal"))
		if err != nil {
			return err
		}
		if !causal {
			return fmt.Errorf("%s: %s is false: only causal attention is supported", m.f.Path, m.key("attention.causal"))
		}
	}
	for _, k := range []string{"final_logit_softcapping", "attn_logit_softcapping"} {
		if !m.has(k) {
			continue
		}
		if _, v, err := m.number(k); err != nil {
			return err
		} else if v != 0 {
			return fmt.Errorf("%s: %s is %g: softcapping is not supported", m.f.Path, m.key(k), v)
		}
	}
	if m.has("rope.scaling.attn_factor") {
		if _, v, err := m.number("rope.scaling.attn_factor"); err != nil {
			return err
		} else if v != 1 {
			return fmt.Errorf("%s: %s is %g: only an attention factor of 1 is supported", m.f.Path, m.key("rope.scaling.attn_factor"), v)
		}
	}
	return nil
}

// ropeScaling writes rope_scaling: llama.cpp's linear scaling (its
// default type when a factor is given), or Llama 3's from rope_freqs.
func ropeScaling(m meta, c map[string]any, theta float64, hd int) error {
	typ := "linear" // llama.cpp's default
	if m.has("rope.scaling.type") {
		var err error
		if typ, err = m.f.String(m.key("rope.scaling.type")); err != nil {
			return err
		}
	}
	factorKey := "rope.scaling.factor"
	if !m.has(factorKey) && m.has("rope.scale_linear") { // the older name, as llama.cpp reads it
		factorKey = "rope.scale_linear"
	}
	var factor json.Number
	f := 0.0
	if m.has(factorKey) {
		var err error
		if factor, f, err = m.number(factorKey); err != nil {
			return err
		}
	}
	switch typ {
	case "linear":
		if f < 0 {
			return fmt.Errorf("%s: %s is %g, not positive", m.f.Path, m.key(factorKey), f)
		}
		if f != 0 { // llama.cpp reads 0 as none
			c["rope_scaling"] = map[string]any{"rope_type": "linear", "factor": factor}
		}
	case "none":
		if f != 0 && f != 1 {
			return fmt.Errorf("%s: %s is %g but rope.scaling.type is none", m.f.Path, m.key(factorKey), f)
		}
	default:
		return fmt.Errorf("%s: %s %q is not supported (linear, none)", m.f.Path, m.key("rope.scaling.type"), typ)
	}
	if _, ok := m.f.Tensor("rope_freqs.weight"); !ok {
		return nil
	}
	if m.arch != "llama" {
		return fmt.Errorf("%s: tensor rope_freqs.weight: llama.cpp's %s does not read one", m.f.Path, m.arch)
	}
	if c["rope_scaling"] != nil {
		return fmt.Errorf("%s: tensor rope_freqs.weight beside %s: two RoPE scalings", m.f.Path, m.key(factorKey))
	}
	s, err := llama3Scaling(m.f, theta, hd)
	if s != nil {
		c["rope_scaling"] = s
	}
	return err
}

// llama3Scaling reads rope_freqs.weight, the factor llama.cpp divides each
// RoPE frequency by, as the llama3 rope_scaling it was computed from. The
// factors fix only the scaling factor (the largest, applied to the lowest
// frequencies) and where the blend between kept and divided frequencies
// lies in units of original_max_position_embeddings / low_freq_factor and
// / high_freq_factor: Llama 3.1 to 3.3 all use 1 and 4 for those, so
// those are assumed and the original context solved from a blended
// frequency (or, without one, the powers of two tried). The parameters
// are accepted only when they give back every stored factor to within
// float32 rounding (1e-5 relative; the next original context is off by
// more): the engines here then rotate by those parameters as
// transformers does, and llama.cpp by the stored factors, to the same
// frequencies. Anything else is refused, naming the tensor. All factors 1
// is no scaling (nil).
func llama3Scaling(f *gguf.File, theta float64, hd int) (map[string]any, error) {
	info, _ := f.Tensor("rope_freqs.weight")
	if info.Type != ggml.F32 || len(info.Dims) != 1 || int(info.Dims[0]) != hd/2 {
		return nil, fmt.Errorf("%s: tensor rope_freqs.weight is %v %v; want F32 [%d], a factor per RoPE frequency", f.Path, info.Type, info.Dims, hd/2)
	}
	data, err := f.ReadTensor(info)
	if err != nil {
		return nil, err
	}
	stored := make([]float64, hd/2)
	factor := 0.0
	for i := range stored {
		stored[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])))
		if !(stored[i] >= 1) || math.IsInf(stored[i], 0) {
			return nil, fmt.Errorf("%s: tensor rope_freqs.weight[%d] is %g: Llama 3's scaling divides frequencies by factors of at least 1", f.Path, i, stored[i])
		}
		factor = max(factor, stored[i])
	}
	if factor == 1 {
		return nil, nil
	}
	// A human chose the factor (8, 32): its float32 may carry noise.
	factor, _ = strconv.ParseFloat(strconv.FormatFloat(factor, 'g', 6, 64), 64)
	base := (model.Geometry{RopeTheta: theta, HeadDim: hd}).InvFreq()
	var candidates []int
	for i, r := range stored {
		if r > 1 && r < factor {
			s := (1/r - 1/factor) / (1 - 1/factor)
			wavelen := 2 * math.Pi / float64(base[i])
			candidates = append(candidates, int(math.Round(wavelen*(1+3*s))))
			break
		}
	}
	for k := range 25 {
		candidates = append(candidates, 1<<k)
	}
	for _, orig := range candidates {
		if orig < 1 {
			continue
		}
		r := model.RopeScaling{Type: "llama3", Factor: factor, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: orig}
		scaled := (model.Geometry{RopeTheta: theta, HeadDim: hd, Rope: r}).InvFreq()
		ok := true
		for i := range stored {
			want := float64(base[i]) / float64(scaled[i])
			ok = ok && math.Abs(want-stored[i]) <= 1e-5*stored[i]
		}
		if ok {
			return map[string]any{"rope_type": "llama3", "factor": factor, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
				"original_max_position_embeddings": orig}, nil
		}
	}
	return nil, fmt.Errorf("%s: tensor rope_freqs.weight: its factors are not Llama 3's RoPE scaling (low_freq_factor 1, high_freq_factor 4, factor %g) for any original context length", f.Path, factor)
}

// gemma3Config writes what llama.cpp's gemma3 reads or decides: a sliding
// window when attention.sliding_window is set, on every layer but each
// attention.sliding_window_pattern-th (default 6), rotating with rope.freq_base_swa
// (default 10000) unscaled; attention scaled by key_length^-½, or, for
// the 62-layer 27B, by (hidden/heads)^-½.
func gemma3Config(m meta, c map[string]any, hd, layers int) error {
	scalar := hd
	if layers == 62 {
		scalar = c["hidden_size"].(int) / c["num_attention_heads"].(int)
	}
	c["query_pre_attn_scalar"] = scalar
	c["sliding_window_pattern"] = 1 // every layer global
	c["rope_local_base_freq"] = json.Number("10000")
	window := 0
	if m.has("attention.sliding_window") {
		v, err := m.f.Uint(m.key("attention.sliding_window"))
		if err != nil {
			return err
		}
		window = int(min(v, math.MaxInt32))
	}
	if window == 0 {
		return nil
	}
	c["sliding_window"] = window
	c["sliding_window_pattern"] = 6
	if m.has("attention.sliding_window_pattern") {
		p, err := m.size("attention.sliding_window_pattern", checkpoint.MaxLayers)
		if err != nil {
			return err
		}
		c["sliding_window_pattern"] = p
	}
	if m.has("rope.freq_base_swa") {
		n, err := m.positive("rope.freq_base_swa")
		if err != nil {
			return err
		}
		c["rope_local_base_freq"] = n
	}
	return nil
}

// experts writes a mixture's fields: expert_count and expert_used_count
// (required, as llama.cpp requires them), the experts' width (default
// feed_forward_length / expert_used_count, as llama.cpp's), Qwen2-MoE's
// shared expert's (default feed_forward_length), and the dense layers:
// those without a router tensor. A dense architecture with experts (a
// llama-architecture Mixtral) is refused.
func experts(m meta, c map[string]any, ff, layers int) error {
	moe := m.arch == "qwen2moe" || m.arch == "qwen3moe"
	if !moe {
		if m.has("expert_count") {
			if n, err := m.f.Uint(m.key("expert_count")); err != nil {
				return err
			} else if n > 0 {
				return fmt.Errorf("%s: %s is %d: a mixture of experts of architecture %s is not supported", m.f.Path, m.key("expert_count"), n, m.arch)
			}
		}
		return nil
	}
	n, err := m.size("expert_count", model.MaxExperts)
	if err != nil {
		return err
	}
	used, err := m.size("expert_used_count", n)
	if err != nil {
		return err
	}
	width, err := m.sizeOr("expert_feed_forward_length", ff/used, checkpoint.MaxIntermediateSize)
	if err != nil {
		return err
	}
	c["num_experts"], c["num_experts_per_tok"], c["moe_intermediate_size"] = n, used, width
	c["norm_topk_prob"] = m.arch == "qwen3moe"
	if m.arch == "qwen2moe" {
		if c["shared_expert_intermediate_size"], err = m.sizeOr("expert_shared_feed_forward_length", ff, checkpoint.MaxIntermediateSize); err != nil {
			return err
		}
	}
	dense := []int{}
	for l := range layers {
		if _, ok := m.f.Tensor(fmt.Sprintf("blk.%d.ffn_gate_inp.weight", l)); !ok {
			dense = append(dense, l)
		}
	}
	c["decoder_sparse_step"], c["mlp_only_layers"] = 1, dense
	return nil
}

// eogTokens are the tokens llama.cpp ends generation at by their text
// alone, whatever the eos keys say (llama-vocab.cpp): among them the
// end-of-turn tokens of the families that open here.
var eogTokens = []string{"<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|im_end|>", "<|endoftext|>", "<|end|>", "<end_of_turn>", "<EOT>"}

// generation is generation_config.json: the BOS, and as eos_token_id
// every token llama.cpp stops at: eos, eot and eom as the file names
// them, then those it recognizes by their text, in id order.
func generation(f *gguf.File, tokens []string) (map[string]any, error) {
	g := map[string]any{}
	id := func(key string) (int, bool, error) {
		if !f.Has(key) {
			return 0, false, nil
		}
		v, err := f.Uint(key)
		if err != nil {
			return 0, false, err
		}
		if v >= uint64(len(tokens)) {
			return 0, false, fmt.Errorf("%s: %s is %d, outside the %d tokens", f.Path, key, v, len(tokens))
		}
		return int(v), true, nil
	}
	if bos, ok, err := id("tokenizer.ggml.bos_token_id"); err != nil {
		return nil, err
	} else if ok {
		g["bos_token_id"] = bos
	}
	eos := []int{}
	for _, k := range []string{"eos", "eot", "eom"} {
		v, ok, err := id("tokenizer.ggml." + k + "_token_id")
		if err != nil {
			return nil, err
		}
		if ok && !slices.Contains(eos, v) {
			eos = append(eos, v)
		}
	}
	for i, t := range tokens {
		if slices.Contains(eogTokens, t) && !slices.Contains(eos, i) {
			eos = append(eos, i)
		}
	}
	if len(eos) > 0 {
		g["eos_token_id"] = eos
	}
	return g, nil
}
