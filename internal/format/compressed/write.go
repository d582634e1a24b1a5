package compressed

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"sort"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/safetensors"
)

// version is the compressed-tensors release whose layouts the writer
// follows; llm-compressor records it in the config.
const version = "0.12.2"

// eps is torch.finfo(float32).eps, compressed-tensors' smallest scale.
const eps = 0x1p-23

// ByName is the writer for a CLI name:
//
//	ct-w4a16  pack-quantized int4, groups of 128, symmetric (llm-compressor's W4A16)
//	ct-w8a8   int-quantized int8 per channel, int8 dynamic per-token activations (W8A8)
//	ct-fp8    float-quantized E4M3 per channel, FP8 dynamic per-token activations (FP8_DYNAMIC)
//	ct-nvfp4  nvfp4-pack-quantized, E2M1 activations in groups of 16, input_global_scale 1 (NVFP4)
func ByName(name string) (lookup.Format, error) {
	switch name {
	case "ct-w4a16":
		return W4A16(128, true, "")
	case "ct-w8a8":
		return W8A8()
	case "ct-fp8":
		return FP8("channel", true)
	case "ct-nvfp4":
		return NVFP4(1)
	}
	return nil, fmt.Errorf("compressed: unknown writer %q (want ct-w4a16, ct-w8a8, ct-fp8 or ct-nvfp4)", name)
}

// quantArgs is QuantizationArgs as llm-compressor dumps it.
func quantArgs(bits int, typ, strategy string, groupSize any, symmetric bool, dynamic any, actorder any, observer any) map[string]any {
	return map[string]any{
		"num_bits": bits, "type": typ, "symmetric": symmetric, "group_size": groupSize,
		"strategy": strategy, "block_structure": nil, "dynamic": dynamic, "actorder": actorder,
		"observer": observer, "observer_kwargs": map[string]any{},
	}
}

// newFormat is the quantization_config llm-compressor writes for one
// group of Linear targets with lm_head ignored, parsed like any other.
func newFormat(format string, weights, inputs map[string]any) (lookup.Format, error) {
	var in any
	if inputs != nil {
		in = inputs
	}
	qc, err := json.Marshal(map[string]any{
		"config_groups": map[string]any{"group_0": map[string]any{
			"targets": []string{"Linear"}, "weights": weights, "input_activations": in,
			"output_activations": nil, "format": format,
		}},
		"format": format, "global_compression_ratio": nil, "ignore": []string{"lm_head"},
		"kv_cache_scheme": nil, "quant_method": "compressed-tensors", "quantization_status": "compressed",
		"sparsity_config": map[string]any{}, "transform_config": map[string]any{}, "version": version,
	})
	if err != nil {
		return nil, err
	}
	return Parse(qc)
}

// W4A16 is pack-quantized int4 weights in groups (llm-compressor's
// W4A16, or W4A16_ASYM with symmetric false); actorder "group" stores a
// weight_g_idx, "weight" (or "") does not.
func W4A16(groupSize int, symmetric bool, actorder string) (lookup.Format, error) {
	var ao any
	if actorder != "" {
		ao = actorder
	}
	return newFormat(packQuantized, quantArgs(4, "int", "group", groupSize, symmetric, false, ao, "minmax"), nil)
}

// W8A8 is int8 weights per channel, symmetric, with int8 dynamic
// per-token activations (llm-compressor's W8A8 / INT8).
func W8A8() (lookup.Format, error) {
	return newFormat(intQuantized,
		quantArgs(8, "int", "channel", nil, true, false, nil, "minmax"),
		quantArgs(8, "int", "token", nil, true, true, nil, nil))
}

// FP8 is E4M3 weights per "tensor" or "channel", with FP8 dynamic
// per-token activations when dynamicActs (FP8_DYNAMIC), else none
// (weights only).
func FP8(strategy string, dynamicActs bool) (lookup.Format, error) {
	if strategy != "tensor" && strategy != "channel" {
		return nil, fmt.Errorf("compressed: FP8 strategy %q, want tensor or channel", strategy)
	}
	var acts map[string]any
	if dynamicActs {
		acts = quantArgs(8, "float", "token", nil, true, true, nil, nil)
	}
	return newFormat(floatQuantized, quantArgs(8, "float", strategy, nil, true, false, nil, "minmax"), acts)
}

// NVFP4 is E2M1 weights in groups of 16 with E4M3 scales and a global
// divisor. With inputGlobalScale > 0 the activations are NVFP4 too and
// the writer stores that input_global_scale (llm-compressor calibrates it
// as 448·6/absmax of the activations; without calibration data the
// caller chooses it); with 0 the weights only (NVFP4A16).
func NVFP4(inputGlobalScale float32) (lookup.Format, error) {
	w := quantArgs(4, "float", "tensor_group", 16, true, false, nil, "minmax")
	var acts map[string]any
	if inputGlobalScale > 0 {
		acts = quantArgs(4, "float", "tensor_group", 16, true, "local", nil, "minmax")
	}
	f, err := newFormat(nvfp4Packed, w, acts)
	if err != nil {
		return nil, err
	}
	f.(*Format).inputGlobalScale = inputGlobalScale
	return f, nil
}

// Config is the quantization_config as parsed, or as llm-compressor
// writes it for the writers above.
func (f *Format) Config() json.RawMessage { return append(json.RawMessage(nil), f.config...) }

// Quantize makes the tensors llm-compressor's compressors store for W
// (rows=out, cols=in), rounding to nearest (ties to even) as torch does,
// with the min-max observer's scales: absmax/((2^b−1)/2) symmetric,
// (max−min)/(2^b−1) with min ≤ 0 ≤ max asymmetric, absmax/448 for FP8;
// int and FP8 scales are stored as BF16 (a bf16 model's dtype). GPTQ's
// error feedback needs calibration data and is not applied; with
// actorder "group" the columns are ordered by descending weight norm,
// standing in for the Hessian's diagonal.
func (f *Format) Quantize(module string, w []float32, rows, cols int) ([]safetensors.Tensor, error) {
	g := f.scheme(module)
	if g == nil {
		return nil, fmt.Errorf("compressed: %s: not quantized by this config", module)
	}
	if rows <= 0 || cols <= 0 || len(w) != rows*cols {
		return nil, fmt.Errorf("compressed: %s: %d weights for shape (%d, %d)", module, len(w), rows, cols)
	}
	switch g.format {
	case nvfp4Packed:
		return f.quantizeNVFP4(module, w, rows, cols)
	case packQuantized, intQuantized, naiveQuantized, floatQuantized:
	default:
		return nil, fmt.Errorf("compressed: %s: the writer does not write format %q", module, g.format)
	}
	if g.w.strategy == "block" {
		return nil, fmt.Errorf("compressed: %s: the writer does not write block scales", module)
	}
	lay := g.w.layout(rows, cols)
	if g.w.strategy == "group" && cols%lay.groupSize != 0 {
		return nil, fmt.Errorf("compressed: %s: %d inputs are not a whole number of groups of %d", module, cols, lay.groupSize)
	}
	members := g.members(w, rows, cols, lay)
	nscale := 1
	for _, d := range lay.shape {
		nscale *= d
	}
	scale := make([]float32, nscale)
	zero := make([]int8, nscale)
	q := make([]int8, rows*cols) // ints, or E4M3 bytes
	qmin, qmax := -(1 << (g.w.bits - 1)), 1<<(g.w.bits-1)-1
	for r := range rows {
		for gi := range lay.groups {
			i := lay.at(r, gi)
			if g.w.strategy == "tensor" && r > 0 {
				continue // one scale over the whole tensor, computed at row 0
			}
			lo, hi := float32(0), float32(0)
			for rr := range rows {
				if g.w.strategy != "tensor" && rr != r {
					continue
				}
				for _, c := range members[gi] {
					lo, hi = min(lo, w[rr*cols+c]), max(hi, w[rr*cols+c])
				}
			}
			switch {
			case g.w.float:
				scale[i] = toBF16(max(max(-lo, hi)/448, eps))
			case g.w.symmetric:
				scale[i] = toBF16(max(max(-lo, hi)/(float32(qmax-qmin)/2), eps))
			default:
				scale[i] = toBF16(max((hi-lo)/float32(qmax-qmin), eps))
				zero[i] = int8(clamp(math.RoundToEven(float64(qmin)-float64(lo)/float64(scale[i])), qmin, qmax))
			}
		}
	}
	for r := range rows {
		for gi := range lay.groups {
			i := lay.at(r, gi)
			for _, c := range members[gi] {
				x := float64(w[r*cols+c]) / float64(scale[i])
				if g.w.float {
					q[r*cols+c] = int8(ToE4M3(clamp(x, -448, 448)))
					continue
				}
				q[r*cols+c] = int8(clamp(math.RoundToEven(x+float64(zero[i])), qmin, qmax))
			}
		}
	}
	out := []safetensors.Tensor{{Name: module + ".weight_scale", DType: safetensors.BF16, Shape: lay.shape, Data: safetensors.EncodeBF16(scale)}}
	if g.w.strategy == "group" && g.w.actorder == "group" {
		idx := make([]int32, cols)
		for gi, cs := range members {
			for _, c := range cs {
				idx[c] = int32(gi)
			}
		}
		out = append(out, safetensors.Tensor{Name: module + ".weight_g_idx", DType: safetensors.I32, Shape: []int{cols}, Data: safetensors.EncodeI32(idx)})
	}
	if g.format != packQuantized {
		dt := safetensors.I8
		if g.w.float {
			dt = safetensors.F8E4M3
		}
		out = append(out, safetensors.Tensor{Name: module + ".weight", DType: dt, Shape: []int{rows, cols}, Data: int8Bytes(q)})
		if !g.w.symmetric {
			out = append(out, safetensors.Tensor{Name: module + ".weight_zero_point", DType: safetensors.I8, Shape: lay.shape, Data: int8Bytes(zero)})
		}
		return out, nil
	}
	b, pf := g.w.bits, 32/g.w.bits
	shape := make([]byte, 16)
	binary.LittleEndian.PutUint64(shape, uint64(rows))
	binary.LittleEndian.PutUint64(shape[8:], uint64(cols))
	out = append(out,
		safetensors.Tensor{Name: module + ".weight_packed", DType: safetensors.I32, Shape: []int{rows, (cols + pf - 1) / pf}, Data: safetensors.EncodeI32(packRows(q, rows, cols, b))},
		safetensors.Tensor{Name: module + ".weight_shape", DType: safetensors.I64, Shape: []int{2}, Data: shape})
	if !g.w.symmetric {
		// Group and channel zero points are packed along the output dim:
		// pack the transpose (groups, rows), then transpose the words back.
		ng := lay.shape[1]
		zt := make([]int8, ng*rows)
		for r := range rows {
			for j := range ng {
				zt[j*rows+r] = zero[r*ng+j]
			}
		}
		pt := packRows(zt, ng, rows, b)
		wr := (rows + pf - 1) / pf
		packed := make([]int32, wr*ng)
		for j := range ng {
			for k := range wr {
				packed[k*ng+j] = pt[j*wr+k]
			}
		}
		out = append(out, safetensors.Tensor{Name: module + ".weight_zero_point", DType: safetensors.I32, Shape: []int{wr, ng}, Data: safetensors.EncodeI32(packed)})
	}
	return out, nil
}

// members lists each group's columns: runs of group_size, or with
// actorder "group" runs of the columns sorted by descending norm.
func (g *group) members(w []float32, rows, cols int, lay layout) [][]int {
	order := make([]int, cols)
	for c := range order {
		order[c] = c
	}
	if g.w.strategy == "group" && g.w.actorder == "group" {
		norm := make([]float64, cols)
		for r := range rows {
			for c := range cols {
				norm[c] += float64(w[r*cols+c]) * float64(w[r*cols+c])
			}
		}
		sort.SliceStable(order, func(a, b int) bool { return norm[order[a]] > norm[order[b]] })
	}
	out := make([][]int, lay.groups)
	for i, c := range order {
		out[i/lay.groupSize] = append(out[i/lay.groupSize], c)
	}
	return out
}

// packRows packs signed b-bit values (rows, cols) +2^(b−1) into 32/b
// per int32, low bits first, padding the last word with zeros.
func packRows(v []int8, rows, cols, b int) []int32 {
	pf := 32 / b
	words := (cols + pf - 1) / pf
	out := make([]int32, rows*words)
	for r := range rows {
		for c := range cols {
			u := uint32(int(v[r*cols+c])+1<<(b-1)) & (1<<b - 1)
			out[r*words+c/pf] |= int32(u << (b * (c % pf)))
		}
	}
	return out
}

// quantizeNVFP4 is compressed-tensors' NVFP4: a global scale
// 448·6/absmax(W), per 16 inputs an E4M3 scale of global·absmax/6 (0
// becomes 0.125), and E2M1 codes of W·global/scale.
func (f *Format) quantizeNVFP4(module string, w []float32, rows, cols int) ([]safetensors.Tensor, error) {
	if cols%16 != 0 {
		return nil, fmt.Errorf("compressed: %s: NVFP4 needs inputs in whole groups of 16, not %d", module, cols)
	}
	amax := float32(0)
	for _, x := range w {
		amax = max(amax, float32(math.Abs(float64(x))))
	}
	global := float32(1) // an all-zero weight: any divisor will do
	if amax > 0 {
		global = 448 * 6 / amax
	}
	ng := cols / 16
	scales := make([]byte, rows*ng)
	packed := make([]byte, rows*cols/2)
	for r := range rows {
		for gi := range ng {
			grp := w[r*cols+16*gi : r*cols+16*gi+16]
			ga := float32(0)
			for _, x := range grp {
				ga = max(ga, float32(math.Abs(float64(x))))
			}
			sb := ToE4M3(clamp(float64(global*(ga/6)), -448, 448))
			if sb == 0 {
				sb = ToE4M3(0.125)
			}
			scales[r*ng+gi] = sb
			eff := E4M3[sb] / global
			for k, x := range grp {
				c := 16*gi + k
				packed[(r*cols+c)/2] |= toE2M1(clamp(float64(x/eff), -6, 6)) << (4 * (c % 2))
			}
		}
	}
	out := []safetensors.Tensor{
		{Name: module + ".weight_packed", DType: safetensors.U8, Shape: []int{rows, cols / 2}, Data: packed},
		{Name: module + ".weight_scale", DType: safetensors.F8E4M3, Shape: []int{rows, ng}, Data: scales},
		{Name: module + ".weight_global_scale", DType: safetensors.F32, Shape: []int{1}, Data: safetensors.EncodeF32([]float32{global})},
	}
	if f.Acts(module) == "fp4" {
		out = append(out, safetensors.Tensor{Name: module + ".input_global_scale", DType: safetensors.F32, Shape: []int{1}, Data: safetensors.EncodeF32([]float32{f.inputGlobalScale})})
	}
	return out, nil
}

func clamp(x float64, lo, hi int) float64 { return math.Max(float64(lo), math.Min(float64(hi), x)) }

func toBF16(x float32) float32 { return safetensors.FromBF16(safetensors.ToBF16(x)) }

func int8Bytes(v []int8) []byte {
	b := make([]byte, len(v))
	for i, x := range v {
		b[i] = byte(x)
	}
	return b
}
