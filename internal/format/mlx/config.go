// Package mlx reads and writes MLX's affine quantization as mlx-lm stores
// it: per module a U32 "weight" of packed b-bit codes, and "scales" and
// "biases" of one value per group of input columns, with
//
//	w = scales·q + biases   (q in [0, 2^b), a bias, not a zero point)
//
// Bits are 2, 3, 4, 5, 6 or 8 and groups 32, 64 or 128 columns. Codes run
// along each row as one little-endian bit stream: code c holds bits
// [c·b, (c+1)·b), so 3-, 5- and 6-bit codes straddle bytes (MLX packs 8
// three-bit codes in 3 bytes, 8 five-bit codes in 5, 4 six-bit codes in 3).
// Embeddings are quantized like linears; a MoE's experts are stacked under
// mlp.switch_mlp as [experts, out, in] tensors; config.json's
// "quantization" can give a module its own bits and group size, or false
// to leave it float.
package mlx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/safetensors"
)

// settings are one module's bits and group size; Bits 0 is left float.
type settings struct{ Bits, GroupSize int }

// defaults are to_quantized's own for affine mode, which a per-layer
// object's missing keys take (not the top level's).
var defaults = settings{Bits: 4, GroupSize: 64}

// Format is an MLX affine quantization.
type Format struct {
	def    settings
	layers map[string]settings
	// scales is the dtype of the scales and biases the writer stores:
	// MLX casts them to the weight's dtype.
	scales safetensors.DType
	err    error
	stacks *stacks
}

// New is the writer's format: every linear and embedding at bits and
// groupSize, scales and biases in BF16 (see WithScales).
func New(bits, groupSize int) *Format {
	l := settings{Bits: bits, GroupSize: groupSize}
	return &Format{def: l, scales: safetensors.BF16, err: l.check("mlx"), stacks: &stacks{}}
}

// Err is what New refused in its settings (Quantize returns it too).
func (f *Format) Err() error { return f.err }

// WithScales is f storing its scales and biases as dt (F32, F16, BF16),
// MLX's choice for weights of that dtype.
func (f *Format) WithScales(dt safetensors.DType) *Format {
	g := *f
	g.scales = dt
	if !dt.IsFloat() && g.err == nil {
		g.err = fmt.Errorf("mlx: scales of dtype %s, want F32, F16 or BF16", dt)
	}
	return &g
}

func (l settings) check(where string) error {
	if !slices.Contains([]int{2, 3, 4, 5, 6, 8}, l.Bits) {
		return fmt.Errorf("%s.bits = %d, want 2, 3, 4, 5, 6 or 8", where, l.Bits)
	}
	if !slices.Contains([]int{32, 64, 128}, l.GroupSize) {
		return fmt.Errorf("%s.group_size = %d, want 32, 64 or 128", where, l.GroupSize)
	}
	return nil
}

// Parse reads config.json's "quantization" object (mlx-lm writes the same
// object as "quantization_config"): "bits", "group_size", "mode", and per
// module path an object of its own "bits"/"group_size" or false.
func Parse(q json.RawMessage) (lookup.Format, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(q, &fields); err != nil || fields == nil {
		return nil, fmt.Errorf("mlx: quantization is not a JSON object: %.80s", q)
	}
	f := &Format{layers: map[string]settings{}, scales: safetensors.BF16, stacks: &stacks{}}
	var err error
	if f.def, err = parseLayer("quantization", fields, true); err != nil {
		return nil, err
	}
	for path, v := range fields {
		switch path {
		case "bits", "group_size", "mode", "quantize_input":
			continue
		}
		where := "quantization." + path
		switch v = bytes.TrimSpace(v); {
		case string(v) == "false":
			f.layers[path] = settings{}
		case string(v) == "true":
			f.layers[path] = f.def
		case len(v) > 0 && v[0] == '{':
			var sub map[string]json.RawMessage
			if err := json.Unmarshal(v, &sub); err != nil {
				return nil, fmt.Errorf("mlx: %s: %v", where, err)
			}
			if f.layers[path], err = parseLayer(where, sub, false); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("mlx: %s = %.40s: not bits, group_size or mode, nor a module's settings (an object or false)", where, v)
		}
	}
	return f, nil
}

// parseLayer reads one settings object; top requires bits and group_size
// (mlx-lm indexes them), a module's object takes the defaults.
func parseLayer(where string, fields map[string]json.RawMessage, top bool) (settings, error) {
	l := defaults
	for k, v := range fields {
		var err error
		switch k {
		case "bits":
			err = json.Unmarshal(v, &l.Bits)
		case "group_size":
			err = json.Unmarshal(v, &l.GroupSize)
		case "mode":
			var mode string
			if err = json.Unmarshal(v, &mode); err == nil && mode != "affine" {
				return l, fmt.Errorf("mlx: %s.mode = %q: only affine is supported (MLX's mxfp4, nvfp4 and mxfp8 modes are not)", where, mode)
			}
		case "quantize_input":
			var on bool
			if err = json.Unmarshal(v, &on); err == nil && on {
				return l, fmt.Errorf("mlx: %s.quantize_input = true: activation quantization is not supported", where)
			}
		default:
			if !top {
				return l, fmt.Errorf("mlx: %s.%s: unknown setting", where, k)
			}
		}
		if err != nil {
			return l, fmt.Errorf("mlx: %s.%s = %.40s: %v", where, k, v, err)
		}
	}
	if top {
		for _, k := range []string{"bits", "group_size"} {
			if _, ok := fields[k]; !ok {
				return l, fmt.Errorf("mlx: %s.%s is missing", where, k)
			}
		}
	}
	return l, l.check("mlx: " + where)
}

// Name is "mlx 4-bit g64", with the count of per-module settings.
func (f *Format) Name() string {
	s := fmt.Sprintf("mlx %d-bit g%d", f.def.Bits, f.def.GroupSize)
	if len(f.layers) > 0 {
		s += fmt.Sprintf(" +%d per-layer", len(f.layers))
	}
	return s
}

// expertRE matches the per-expert module names the models use
// (Qwen2/3-MoE, GLM); mlx-lm stores them stacked under switch_mlp.
var expertRE = regexp.MustCompile(`^(.+\.mlp)\.experts\.(\d+)\.([A-Za-z0-9_]+)$`)

// stacked maps an expert's module to its switch_mlp module and its index
// there; any other module is its own, at -1.
func stacked(module string) (string, int) {
	m := expertRE.FindStringSubmatch(module)
	if m == nil {
		return module, -1
	}
	e := 0
	for _, c := range m[2] {
		if e > 1<<20 {
			return module, -1
		}
		e = e*10 + int(c-'0')
	}
	return m[1] + ".switch_mlp." + m[3], e
}

// layer is module's settings (its switch_mlp path's, for an expert) and
// whether it is quantized.
func (f *Format) layer(module string) (settings, bool) {
	path, _ := stacked(module)
	if l, ok := f.layers[path]; ok {
		return l, l.Bits != 0
	}
	return f.def, true
}

// Quantized: mlx-lm quantizes every linear and embedding (a matrix whose
// columns do not fill whole groups stays float; Quantize refuses it)
// unless the config sets its path to false.
func (f *Format) Quantized(module string) bool {
	_, ok := f.layer(module)
	return ok
}

// Acts: MLX's affine mode quantizes no activations.
func (f *Format) Acts(string) string { return "" }

// Config is the "quantization" object mlx-lm writes (the writer stores it
// as "quantization" and "quantization_config").
func (f *Format) Config() json.RawMessage {
	obj := map[string]any{"bits": f.def.Bits, "group_size": f.def.GroupSize, "mode": "affine"}
	for path, l := range f.layers {
		if l.Bits == 0 {
			obj[path] = false
		} else {
			obj[path] = map[string]int{"bits": l.Bits, "group_size": l.GroupSize}
		}
	}
	b, _ := json.Marshal(obj) // maps of ints and bools always marshal
	return b
}

// describe names a module's settings for errors.
func (l settings) String() string { return fmt.Sprintf("%d-bit g%d", l.Bits, l.GroupSize) }
