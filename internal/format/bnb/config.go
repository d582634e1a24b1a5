// Package bnb reads and writes bitsandbytes 4-bit (NF4 and FP4)
// checkpoints as transformers stores them: per module a U8 "weight" of
// [ceil(rows·cols/2), 1] holding two codes a byte, high nibble first,
// over the flattened (rows, cols) weight; one absmax per block of
// blocksize (64) consecutive weights of that flattened order, and
//
//	w = Table[q] · absmax[block]
//
// with Table bnb's NF4 or FP4 values. With double quantization the absmax
// are U8 codes into "nested_quant_map" times "nested_absmax" (one per 256
// blocks), plus "nested_offset". The settings that are not tensors
// (shape, dtype, blocksize, quant_type, nested_*) are a JSON object stored
// as the U8 tensor "weight.quant_state.bitsandbytes__nf4" (or __fp4).
package bnb

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"logitscope/internal/format/lookup"
)

// Format is a bitsandbytes 4-bit quantization.
type Format struct {
	quant  string // "nf4" or "fp4"
	double bool
	// compute is bnb_4bit_compute_dtype, kept for Config: the weights
	// decode to float32 whatever it is.
	compute string
	// skip is llm_int8_skip_modules; lm_head is always left float, as
	// transformers leaves the output embedding.
	skip []string
}

// NF4 is the writer's NF4 format (QLoRA's), double quantizing the absmax
// when double is set.
func NF4(double bool) *Format { return &Format{quant: "nf4", double: double, compute: "bfloat16"} }

// FP4 is the writer's FP4 format.
func FP4(double bool) *Format { return &Format{quant: "fp4", double: double, compute: "bfloat16"} }

// blocksize is what transformers quantizes with (bnb's quantize_4bit
// default); a reader takes the blocksize from each tensor's quant state.
const blocksize = 64

// Parse reads a config.json quantization_config of quant_method
// "bitsandbytes" with load_in_4bit. Fields it does not use are ignored,
// as transformers adds new ones over time; the ones that change the
// weights are checked.
func Parse(qc json.RawMessage) (lookup.Format, error) {
	var c struct {
		QuantMethod  *string   `json:"quant_method"`
		In4          *bool     `json:"load_in_4bit"`
		In8          *bool     `json:"load_in_8bit"`
		QuantType    *string   `json:"bnb_4bit_quant_type"`
		Double       *bool     `json:"bnb_4bit_use_double_quant"`
		Compute      *string   `json:"bnb_4bit_compute_dtype"`
		QuantStorage *string   `json:"bnb_4bit_quant_storage"`
		Skip         *[]string `json:"llm_int8_skip_modules"`
	}
	if err := json.Unmarshal(qc, &c); err != nil {
		return nil, fmt.Errorf("bnb: quantization_config: %v", err)
	}
	switch {
	case c.QuantMethod == nil || *c.QuantMethod != "bitsandbytes":
		return nil, fmt.Errorf("bnb: quantization_config.quant_method = %s, want \"bitsandbytes\"", show(c.QuantMethod))
	case c.In8 != nil && *c.In8:
		return nil, fmt.Errorf("bnb: quantization_config.load_in_8bit = true: LLM.int8 is not supported, only 4-bit")
	case c.In4 == nil || !*c.In4:
		return nil, fmt.Errorf("bnb: quantization_config.load_in_4bit = %s, want true", show(c.In4))
	}
	// transformers' BitsAndBytesConfig defaults: fp4, no double quant,
	// float32 compute, uint8 storage.
	f := &Format{quant: "fp4", compute: "float32"}
	if c.QuantType != nil {
		f.quant = *c.QuantType
	}
	if f.quant != "nf4" && f.quant != "fp4" {
		return nil, fmt.Errorf("bnb: quantization_config.bnb_4bit_quant_type = %q, want nf4 or fp4", f.quant)
	}
	if c.Double != nil {
		f.double = *c.Double
	}
	if c.Compute != nil {
		f.compute = strings.TrimPrefix(*c.Compute, "torch.")
	}
	if !slices.Contains([]string{"float32", "float16", "bfloat16"}, f.compute) {
		return nil, fmt.Errorf("bnb: quantization_config.bnb_4bit_compute_dtype = %q, want float32, float16 or bfloat16", f.compute)
	}
	if c.QuantStorage != nil && strings.TrimPrefix(*c.QuantStorage, "torch.") != "uint8" {
		return nil, fmt.Errorf("bnb: quantization_config.bnb_4bit_quant_storage = %q: only uint8 is supported", *c.QuantStorage)
	}
	if c.Skip != nil {
		f.skip = *c.Skip
	}
	return f, nil
}

func show[T any](v *T) string {
	if v == nil {
		return "missing"
	}
	b, _ := json.Marshal(*v)
	return string(b)
}

// Name is "bnb nf4", "bnb fp4 double-quant".
func (f *Format) Name() string {
	s := "bnb " + f.quant
	if f.double {
		s += " double-quant"
	}
	return s
}

// Quantized: transformers replaces every nn.Linear but the output
// embedding (lm_head) and llm_int8_skip_modules (a module named there, or
// inside one named there); embeddings are not linears and stay float.
func (f *Format) Quantized(module string) bool {
	if module == "lm_head" || module == "model.embed_tokens" {
		return false
	}
	for _, s := range f.skip {
		if module == s || strings.HasSuffix(module, "."+s) || strings.HasPrefix(module, s+".") || strings.Contains(module, "."+s+".") {
			return false
		}
	}
	return true
}

// Acts: bitsandbytes 4-bit quantizes no activations.
func (f *Format) Acts(string) string { return "" }

// Config is the quantization_config transformers writes.
func (f *Format) Config() json.RawMessage {
	var skip any
	if f.skip != nil {
		skip = f.skip
	}
	b, _ := json.Marshal(map[string]any{ // plain values always marshal
		"quant_method": "bitsandbytes", "load_in_4bit": true, "load_in_8bit": false,
		"_load_in_4bit": true, "_load_in_8bit": false,
		"bnb_4bit_quant_type": f.quant, "bnb_4bit_use_double_quant": f.double,
		"bnb_4bit_compute_dtype": f.compute, "bnb_4bit_quant_storage": "uint8",
		"llm_int8_skip_modules": skip, "llm_int8_threshold": 6.0,
		"llm_int8_has_fp16_weight": false, "llm_int8_enable_fp32_cpu_offload": false,
	})
	return b
}

// nf4 is bnb's NF4 table (functional.get_4bit_type, the CUDA kernel's
// nf4_dequantization_lut): quantiles of N(0, 1) scaled to [-1, 1].
var nf4 = []float32{
	-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453,
	-0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
	0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224,
	0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0,
}

// fp4 is bnb's FP4 table in code order: sign bit 3, then the E2M1-like
// magnitudes 0, 0.0625, 8, 12, 4, 6, 2, 3, divided by 12 in float32 (as
// get_4bit_type does; the CUDA kernel's fp4_dequantization_lut holds the
// same float32 values). Code 8 is −0.
var fp4 = func() []float32 {
	mag := []float32{0, 0.0625, 8, 12, 4, 6, 2, 3}
	t := make([]float32, 16)
	for i, m := range mag {
		t[i] = m / 12
		t[i+8] = float32(math.Copysign(float64(m/12), -1))
	}
	return t
}()

func table(quant string) []float32 {
	if quant == "nf4" {
		return nf4
	}
	return fp4
}
