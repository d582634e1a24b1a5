// Package gptq reads and writes GPTQ checkpoints as GPTQModel and
// AutoGPTQ store them, transcoding each quantized module to a
// lookup.Matrix without loss.
//
// A module X (a Linear of In inputs and Out outputs) is stored as
//
//	X.qweight  I32 (In·bits/32, Out)  codes packed along In
//	X.qzeros   I32 (G, Out·bits/32)   zero points packed along Out
//	X.scales   F16 (G, Out)
//	X.g_idx    I32 (In)               each input's group (act-order)
//
// with G = ceil(In/group_size) groups (1 for group_size −1), and
// W[o,i] = scales[g,o]·(q[i,o] − z[g,o]) for g = g_idx[i]. Values are a
// little-endian bit stream within each column of qweight (each row of
// qzeros): value k sits at bit k·bits, so 3-bit values straddle words.
// checkpoint_format "gptq" (v1, the default) stores z−1; "gptq_v2"
// stores z.
package gptq

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"logitscope/internal/format/lookup"
)

// Config is a GPTQ quantization_config's settings.
type Config struct {
	Bits int // 2, 3, 4 or 8
	// GroupSize is the inputs per group, −1 for one group per row.
	GroupSize int
	Sym       bool
	// DescAct (act-order) quantizes the inputs in a chosen order, so
	// that g_idx is not monotonic.
	DescAct bool
	// V2 is checkpoint_format "gptq_v2": zeros stored as they are, not
	// minus one.
	V2 bool
	// LMHead quantizes lm_head too.
	LMHead bool
	// Modules, when set, is modules_in_block_to_quantize flattened: the
	// names inside a decoder layer ("self_attn.q_proj") that are
	// quantized; nil is every linear projection of the layers.
	Modules []string
}

// Bits GPTQ packs.
var Bits = []int{2, 3, 4, 8}

// Check refuses settings the format has no layout for.
func (c Config) Check() error {
	if !slices.Contains(Bits, c.Bits) {
		return fmt.Errorf("gptq: bits %d: want 2, 3, 4 or 8", c.Bits)
	}
	if c.GroupSize != -1 && c.GroupSize <= 0 {
		return fmt.Errorf("gptq: group_size %d: want a positive size or -1", c.GroupSize)
	}
	return nil
}

// maxq is the largest code.
func (c Config) maxq() int { return 1<<c.Bits - 1 }

// Format is GPTQ with one Config; it implements lookup.Format.
type Format struct{ c Config }

// New is the format with settings c.
func New(c Config) (*Format, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	return &Format{c}, nil
}

// Settings is the format's settings.
func (f *Format) Settings() Config { return f.c }

// Name is "gptq 4-bit g128 sym", with " desc_act" and " v2" where set.
func (f *Format) Name() string {
	g := fmt.Sprintf("g%d", f.c.GroupSize)
	if f.c.GroupSize == -1 {
		g = "per-row"
	}
	s := fmt.Sprintf("gptq %d-bit %s %s", f.c.Bits, g, map[bool]string{true: "sym", false: "asym"}[f.c.Sym])
	if f.c.DescAct {
		s += " desc_act"
	}
	if f.c.V2 {
		s += " v2"
	}
	return s
}

// Quantized says whether GPTQModel quantizes the module: the linear
// projections of the decoder layers (every "*_proj" under "layers.N.",
// experts' included, not a MoE router), or those
// modules_in_block_to_quantize names, and lm_head where lm_head is set.
func (f *Format) Quantized(module string) bool {
	if module == "lm_head" {
		return f.c.LMHead
	}
	_, rest, ok := strings.Cut(module, ".layers.")
	if !ok {
		return false
	}
	_, inner, ok := strings.Cut(rest, ".")
	if !ok {
		return false
	}
	if f.c.Modules != nil {
		return slices.Contains(f.c.Modules, inner)
	}
	return strings.HasSuffix(inner, "_proj")
}

// Acts is "": GPTQ quantizes weights only.
func (f *Format) Acts(string) string { return "" }

// Config is the quantization_config GPTQModel writes into config.json.
func (f *Format) Config() json.RawMessage {
	format := "gptq"
	if f.c.V2 {
		format = "gptq_v2"
	}
	b, _ := json.Marshal(map[string]any{
		"quant_method":      "gptq",
		"bits":              f.c.Bits,
		"group_size":        f.c.GroupSize,
		"sym":               f.c.Sym,
		"desc_act":          f.c.DescAct,
		"checkpoint_format": format,
		"pack_dtype":        "int32",
		"lm_head":           f.c.LMHead,
		"damp_percent":      0.01,
		"static_groups":     false,
		"true_sequential":   true,
		// The quantizer is named as GPTQModel names itself: what made the
		// file, so that nobody mistakes it for a calibrated GPTQ run.
		"meta": map[string]any{"quantizer": []string{"logitscope:rtn"}},
	})
	return b
}

// Parse reads a config.json's quantization_config with quant_method
// "gptq", refusing what this package does not read by its field and
// value.
func Parse(qc json.RawMessage) (lookup.Format, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(qc, &raw); err != nil {
		return nil, fmt.Errorf("gptq: quantization_config: %v", err)
	}
	var c Config
	field := func(name string, v any, required bool) (bool, error) {
		b, ok := raw[name]
		if !ok || string(b) == "null" {
			if required {
				return false, fmt.Errorf("gptq: quantization_config has no %s", name)
			}
			return false, nil
		}
		if err := json.Unmarshal(b, v); err != nil {
			return false, fmt.Errorf("gptq: quantization_config.%s %s: %v", name, b, err)
		}
		return true, nil
	}
	var method string
	if _, err := field("quant_method", &method, true); err != nil {
		return nil, err
	}
	if !strings.EqualFold(method, "gptq") {
		return nil, fmt.Errorf("gptq: quantization_config.quant_method %q, want \"gptq\"", method)
	}
	if _, err := field("bits", &c.Bits, true); err != nil {
		return nil, err
	}
	if !slices.Contains(Bits, c.Bits) {
		return nil, fmt.Errorf("gptq: quantization_config.bits %d: want 2, 3, 4 or 8", c.Bits)
	}
	if _, err := field("group_size", &c.GroupSize, true); err != nil {
		return nil, err
	}
	if c.GroupSize != -1 && c.GroupSize <= 0 {
		return nil, fmt.Errorf("gptq: quantization_config.group_size %d: want a positive size or -1", c.GroupSize)
	}
	// sym decides nothing about reading (the zeros are stored either
	// way), but names the format in receipts: both tools always write it.
	if _, err := field("sym", &c.Sym, true); err != nil {
		return nil, err
	}
	if _, err := field("desc_act", &c.DescAct, false); err != nil {
		return nil, err
	}
	if _, err := field("lm_head", &c.LMHead, false); err != nil {
		return nil, err
	}
	var marlin bool
	if _, err := field("is_marlin_format", &marlin, false); err != nil {
		return nil, err
	}
	if marlin {
		return nil, fmt.Errorf("gptq: quantization_config.is_marlin_format true: Marlin's repacked layout is not read; use the GPTQ checkpoint it was made from")
	}
	format := "gptq"
	name := "checkpoint_format"
	if ok, err := field(name, &format, false); err != nil {
		return nil, err
	} else if !ok {
		// GPTQModel's quantize_config.json spells it "format".
		name = "format"
		if _, err := field(name, &format, false); err != nil {
			return nil, err
		}
	}
	switch format {
	case "gptq":
	case "gptq_v2":
		c.V2 = true
	default:
		return nil, fmt.Errorf("gptq: quantization_config.%s %q: only \"gptq\" (v1) and \"gptq_v2\" are read (marlin, bitblas and ipex repack the weights for their kernels)", name, format)
	}
	pack := "int32"
	if _, err := field("pack_dtype", &pack, false); err != nil {
		return nil, err
	}
	if pack != "int32" {
		return nil, fmt.Errorf("gptq: quantization_config.pack_dtype %q: only int32 packing is read", pack)
	}
	var dynamic map[string]json.RawMessage
	if _, err := field("dynamic", &dynamic, false); err != nil {
		return nil, err
	}
	if len(dynamic) > 0 {
		return nil, fmt.Errorf("gptq: quantization_config.dynamic: per-module overrides of bits and group size are not read")
	}
	var blocks [][]string
	if _, err := field("modules_in_block_to_quantize", &blocks, false); err != nil {
		return nil, err
	}
	if blocks != nil {
		c.Modules = []string{}
		for _, b := range blocks {
			c.Modules = append(c.Modules, b...)
		}
	}
	return &Format{c}, nil
}
