// Package compressed reads and writes compressed-tensors checkpoints
// (quant_method "compressed-tensors", as llm-compressor saves them; the
// layouts of compressed-tensors 0.12):
//
//   - pack-quantized: int codes +2^(b−1) (offset binary), 32/b to an
//     int32 along the input dim, low bits first: weight_packed I32,
//     weight_shape I64 (out, in), weight_scale, an asymmetric
//     weight_zero_point packed the same way along the output dim, and
//     weight_g_idx with actorder "group";
//   - int-quantized / naive-quantized: weight I8, weight_scale, and
//     weight_zero_point I8 when asymmetric;
//   - float-quantized: weight F8_E4M3 and weight_scale;
//   - nvfp4-pack-quantized: weight_packed U8 of two E2M1 nibbles (low
//     first), weight_scale F8_E4M3 per 16 inputs, weight_global_scale F32
//     (a divisor) and input_global_scale F32.
//
// Strategies tensor, channel, group (with or without g_idx) and block
// all fit lookup's (row, group) scales. The reference dequantization
// (quantization/lifecycle/forward.py) is (q − z)·s, with s divided by the
// global scale for NVFP4; Matrix reproduces it in float32.
package compressed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"logitscope/internal/format/lookup"
)

// Format is one compressed-tensors quantization_config.
type Format struct {
	groups []*group
	ignore []target
	format string // the top-level format
	config json.RawMessage
	// inputGlobalScale is what the writer stores as NVFP4's
	// input_global_scale (NVFP4's constructor sets it; 1 otherwise).
	inputGlobalScale float32
}

// Parse reads config.json's quantization_config (quant_method
// "compressed-tensors"). It refuses what it cannot transcode without
// loss, naming the config group and field: sparse and marlin-24 formats,
// 3/5/6/7-bit packing, output or static activation quantization, a
// quantized KV cache, and transforms.
func Parse(qc json.RawMessage) (lookup.Format, error) {
	var c qconfig
	if err := json.Unmarshal(qc, &c); err != nil {
		return nil, fmt.Errorf("compressed: quantization_config: %v", err)
	}
	if c.QuantMethod != "" && c.QuantMethod != "compressed-tensors" {
		return nil, fmt.Errorf("compressed: quantization_config: quant_method %q, want \"compressed-tensors\"", c.QuantMethod)
	}
	if !empty(c.SparsityConfig) {
		return nil, fmt.Errorf("compressed: quantization_config.sparsity_config: %s; sparse checkpoints are not supported", trim(c.SparsityConfig))
	}
	if !empty(c.TransformConfig) {
		return nil, fmt.Errorf("compressed: quantization_config.transform_config: online transforms (Hadamard rotations) are not supported")
	}
	if !empty(c.KVCacheScheme) {
		return nil, fmt.Errorf("compressed: quantization_config.kv_cache_scheme: %s; a quantized KV cache is not supported", trim(c.KVCacheScheme))
	}
	if c.Format == "" {
		return nil, fmt.Errorf("compressed: quantization_config.format: missing")
	}
	if empty(c.ConfigGroups) {
		return nil, fmt.Errorf("compressed: quantization_config.config_groups: missing")
	}
	keys, raws, err := orderedGroups(c.ConfigGroups)
	if err != nil {
		return nil, fmt.Errorf("compressed: quantization_config.%v", err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, qc); err != nil {
		return nil, fmt.Errorf("compressed: quantization_config: %v", err)
	}
	f := &Format{format: c.Format, config: buf.Bytes(), inputGlobalScale: 1}
	for _, k := range keys {
		g, err := parseGroup(k, raws[k], c.Format)
		if err != nil {
			return nil, fmt.Errorf("compressed: quantization_config.%v", err)
		}
		f.groups = append(f.groups, g)
	}
	for i, s := range c.Ignore {
		t, err := parseTarget(s, fmt.Sprintf("ignore[%d]", i))
		if err != nil {
			return nil, fmt.Errorf("compressed: quantization_config.%v", err)
		}
		f.ignore = append(f.ignore, t)
	}
	return f, nil
}

func trim(raw json.RawMessage) string {
	if s := string(raw); len(s) <= 80 {
		return s
	}
	return string(raw[:77]) + "..."
}

// Name is "compressed-tensors pack-quantized int4 g128" for a single
// group; each further group adds "+ ...".
func (f *Format) Name() string {
	parts := make([]string, len(f.groups))
	for i, g := range f.groups {
		w := g.w
		s := fmt.Sprintf("%s %s%d", g.format, map[bool]string{true: "float", false: "int"}[w.float], w.bits)
		switch w.strategy {
		case "group", "tensor_group":
			s += fmt.Sprintf(" g%d", w.groupSize)
		case "block":
			s += fmt.Sprintf(" block%dx%d", w.block[0], w.block[1])
		default:
			s += " " + w.strategy
		}
		if !w.symmetric {
			s += " asym"
		}
		if w.actorder != "" {
			s += " actorder=" + w.actorder
		}
		if g.acts != "" {
			s += " acts=" + g.acts
		}
		parts[i] = s
	}
	return "compressed-tensors " + strings.Join(parts, " + ")
}

// scheme is the config group that quantizes module, or nil: ignore wins,
// then the most specific target (an exact name, a regex, a class, as
// vLLM orders them), then the first group.
func (f *Format) scheme(module string) *group {
	for _, t := range f.ignore {
		if t.rank(module) > 0 {
			return nil
		}
	}
	var best *group
	rank := 0
	for _, g := range f.groups {
		for _, t := range g.targets {
			if r := t.rank(module); r > rank {
				best, rank = g, r
			}
		}
	}
	return best
}

// Quantized follows the config groups' targets and the ignore list.
func (f *Format) Quantized(module string) bool { return f.scheme(module) != nil }

// Acts is the module's group's input_activations: "int8", "fp8", "fp4"
// or "".
func (f *Format) Acts(module string) string {
	if g := f.scheme(module); g != nil {
		return g.acts
	}
	return ""
}
