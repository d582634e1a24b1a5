// Package hubquant opens a Hugging Face checkpoint that another tool
// quantized (GPTQ today; AWQ, compressed-tensors, bitsandbytes and MLX as
// their readers land) as model.Quantized weights: the float model's
// ".weight" names, each quantized matrix transcoded without loss to a
// lookup.Matrix by its format's package.
package hubquant

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"logitscope/internal/format/awq"
	"logitscope/internal/format/bnb"
	"logitscope/internal/format/compressed"
	"logitscope/internal/format/gptq"
	"logitscope/internal/format/lookup"
	"logitscope/internal/format/mlx"
)

// parsers reads each quant_method's quantization_config. The one place
// a hub format's reader is registered.
var parsers = map[string]func(json.RawMessage) (lookup.Format, error){
	"gptq":               gptq.Parse,
	"awq":                awq.Parse,
	"compressed-tensors": compressed.Parse,
	"bitsandbytes":       bnb.Parse,
	// and MLX in FormatOf below (its config has no quant_method).
}

// refused is what a quant_method names that no reader here will take,
// and why: said instead of "unknown", since these are real formats.
var refused = map[string]string{
	"hqq":                          "HQQ's half-quadratic layout",
	"aqlm":                         "AQLM's additive codebooks",
	"exl2":                         "exllamav2's EXL2 (convert the float checkpoint with exllamav3 and use --scheme exl3-kK --exl3 DIR)",
	"marlin":                       "Marlin's repacked GPTQ layout (use the GPTQ checkpoint it was made from)",
	"fbgemm_fp8":                   "FBGEMM's FP8",
	"fp8":                          "transformers' block-wise FP8",
	"eetq":                         "EETQ's int8",
	"quanto":                       "optimum-quanto's layouts",
	"torchao":                      "torchao's tensor subclasses",
	"vptq":                         "VPTQ's vector codebooks",
	"spqr":                         "SpQR's sparse outliers",
	"higgs":                        "HIGGS's lattice codebooks",
	"bitnet":                       "BitNet's ternary weights",
	"fp_quant":                     "FP-Quant's Hadamard-rotated formats",
	"mxfp4":                        "gpt-oss's MXFP4 blocks",
	"quark":                        "AMD Quark's layouts",
	"auto-round":                   "AutoRound's own layout (export it with format auto_gptq)",
	"gptq_marlin":                  "Marlin's repacked GPTQ layout",
	"awq_marlin":                   "Marlin's repacked AWQ layout",
	"compressed_tensors_marlin_24": "Marlin-24's 2:4 sparse layout",
}

// FormatOf reads config.json's quantization settings (file names it in
// errors): quantization_config by its quant_method, or MLX's top-level
// "quantization". A config with neither is not quantized: nil, nil.
func FormatOf(config []byte, file string) (lookup.Format, error) {
	var c struct {
		QC  json.RawMessage `json:"quantization_config"`
		MLX json.RawMessage `json:"quantization"`
	}
	if err := json.Unmarshal(config, &c); err != nil {
		return nil, fmt.Errorf("%s: %v", file, err)
	}
	if string(c.QC) == "null" {
		c.QC = nil
	}
	if string(c.MLX) == "null" {
		c.MLX = nil
	}
	var method struct {
		Method json.RawMessage `json:"quant_method"`
		Format string          `json:"format"`
	}
	if c.QC != nil {
		if err := json.Unmarshal(c.QC, &method); err != nil {
			return nil, fmt.Errorf("%s: quantization_config: %v", file, err)
		}
	}
	switch {
	case c.QC == nil && c.MLX == nil:
		return nil, nil
	case method.Method == nil && c.MLX != nil:
		// mlx-lm writes "quantization" (and a copy as quantization_config,
		// without quant_method).
		f, err := mlx.Parse(c.MLX)
		if err != nil {
			return nil, fmt.Errorf("%s: quantization (MLX's): %w", file, err)
		}
		return f, nil
	case method.Method == nil:
		return nil, fmt.Errorf("%s: quantization_config has no quant_method (read: %s)", file, methods())
	}
	var name string
	if err := json.Unmarshal(method.Method, &name); err != nil {
		return nil, fmt.Errorf("%s: quantization_config.quant_method %s is not a string", file, method.Method)
	}
	name = strings.ToLower(name)
	if name == "compressed-tensors" && method.Format == "marlin-24" {
		return nil, fmt.Errorf("%s: quantization_config.format %q: %s is not read", file, method.Format, refused["compressed_tensors_marlin_24"])
	}
	parse, ok := parsers[name]
	if !ok {
		if why, ok := refused[name]; ok {
			return nil, fmt.Errorf("%s: quantization_config.quant_method %q: %s is not read (read: %s)", file, name, why, methods())
		}
		return nil, fmt.Errorf("%s: quantization_config.quant_method %q is not a format read here (read: %s)", file, name, methods())
	}
	f, err := parse(c.QC)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return f, nil
}

// methods is the quant_methods read, "gptq".
func methods() string { return strings.Join(slices.Sorted(maps.Keys(parsers)), ", ") }
