// Package awq reads and writes AutoAWQ's GEMM checkpoints
// (quant_method "awq", version "gemm"): 4-bit codes packed eight to an
// int32 along the output dim in the interleaved order [0,2,4,6,1,3,5,7],
// fp16 scales and packed zero points per (input group, output).
//
//	qweight I32 (in, out/8)    qzeros I32 (in/g, out/8)    scales F16 (in/g, out)
//	W[o,i] = (q[i,o] - z[i/g,o]) * s[i/g,o]
//
// The GEMM kernel always subtracts qzeros; a zero_point=false checkpoint
// stores its signed codes +8 with every zero 8, which reads the same way.
// The other AutoAWQ versions (gemv, gemv_fast, marlin, exllama) pack
// differently and are refused.
package awq

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/safetensors"
)

// order is AutoAWQ's GEMM interleave: the k-th nibble of a word (bits
// 4k..4k+3) holds output column 8j+order[k].
var order = [8]int{0, 2, 4, 6, 1, 3, 5, 7}

// Format is one AWQ GEMM configuration.
type Format struct {
	Bits      int
	GroupSize int // -1: one group per input row (the whole input dim)
	ZeroPoint bool
	// NotConvert is modules_to_not_convert: a module whose name contains
	// any of these is left float (AutoAWQ's substring rule).
	NotConvert []string
}

// config is the quantization_config AutoAWQ writes into config.json.
type config struct {
	QuantMethod         string   `json:"quant_method"`
	ZeroPoint           *bool    `json:"zero_point"`
	GroupSize           *int     `json:"group_size"`
	QGroupSize          *int     `json:"q_group_size"`
	Bits                *int     `json:"bits"`
	WBit                *int     `json:"w_bit"`
	Version             string   `json:"version"`
	ModulesToNotConvert []string `json:"modules_to_not_convert"`
	Backend             string   `json:"backend"`
}

// New is the writer's format: AutoAWQ GEMM at bits (4) and groupSize
// (64, 128, ... or -1), with or without zero points.
func New(bits, groupSize int, zeroPoint bool) lookup.Format {
	return &Format{Bits: bits, GroupSize: groupSize, ZeroPoint: zeroPoint}
}

// Parse reads config.json's quantization_config (quant_method "awq"). It
// also takes AutoAWQ's quant_config.json spelling (q_group_size, w_bit).
func Parse(qc json.RawMessage) (lookup.Format, error) {
	var c config
	if err := json.Unmarshal(qc, &c); err != nil {
		return nil, fmt.Errorf("awq: quantization_config: %v", err)
	}
	if c.QuantMethod != "" && !strings.EqualFold(c.QuantMethod, "awq") {
		return nil, fmt.Errorf("awq: quantization_config: quant_method %q, want \"awq\"", c.QuantMethod)
	}
	f := &Format{Bits: 4, GroupSize: 128, ZeroPoint: true, NotConvert: c.ModulesToNotConvert}
	switch v := strings.ToLower(c.Version); v {
	case "", "gemm":
	case "gemv", "gemv_fast", "marlin", "exllama", "ipex":
		return nil, fmt.Errorf("awq: quantization_config: version %q packs its weights differently from GEMM and is not supported", c.Version)
	default:
		return nil, fmt.Errorf("awq: quantization_config: unknown version %q (only \"gemm\" is supported)", c.Version)
	}
	if c.Bits != nil {
		f.Bits = *c.Bits
	} else if c.WBit != nil {
		f.Bits = *c.WBit
	}
	if c.GroupSize != nil {
		f.GroupSize = *c.GroupSize
	} else if c.QGroupSize != nil {
		f.GroupSize = *c.QGroupSize
	}
	if c.ZeroPoint != nil {
		f.ZeroPoint = *c.ZeroPoint
	}
	if f.Bits != 4 {
		return nil, fmt.Errorf("awq: quantization_config: bits %d; AutoAWQ's GEMM packs only 4", f.Bits)
	}
	if f.GroupSize == 0 || f.GroupSize < -1 {
		return nil, fmt.Errorf("awq: quantization_config: group_size %d; want a positive size or -1", f.GroupSize)
	}
	return f, nil
}

// Name is "awq gemm 4-bit g128" plus " sym" without zero points.
func (f *Format) Name() string {
	s := fmt.Sprintf("awq gemm %d-bit g%d", f.Bits, f.GroupSize)
	if !f.ZeroPoint {
		s += " sym"
	}
	return s
}

// Quantized says whether AutoAWQ quantizes module: only the linears
// inside the decoder layers (a name with a numeric layer index; never
// lm_head or the embeddings), less those whose name contains any string
// of modules_to_not_convert.
func (f *Format) Quantized(module string) bool {
	if !inLayer(module) {
		return false
	}
	for _, s := range f.NotConvert {
		if strings.Contains(module, s) {
			return false
		}
	}
	return true
}

// Acts: AWQ quantizes weights only.
func (f *Format) Acts(string) string { return "" }

// Config is the quantization_config AutoAWQ's to_transformers_dict writes.
func (f *Format) Config() json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"quant_method":           "awq",
		"zero_point":             f.ZeroPoint,
		"group_size":             f.GroupSize,
		"bits":                   f.Bits,
		"version":                "gemm",
		"modules_to_not_convert": f.NotConvert,
	})
	return b
}

// groups is the number of input groups and their size for cols inputs.
func (f *Format) groups(cols int) (int, int, error) {
	g := f.GroupSize
	if g == -1 {
		g = cols
	}
	if g <= 0 || cols%g != 0 {
		return 0, 0, fmt.Errorf("%d inputs are not a whole number of groups of %d", cols, f.GroupSize)
	}
	return cols / g, g, nil
}

// tensor fetches module.name and checks its dtype and shape.
func tensor(t lookup.Tensors, module, name string, dtype safetensors.DType, shape ...int) ([]byte, error) {
	full := module + "." + name
	raw, info, err := t.Raw(full)
	if err != nil {
		return nil, fmt.Errorf("awq: %s: %v", full, err)
	}
	if info.DType != dtype {
		return nil, fmt.Errorf("awq: %s: dtype %s, want %s", full, info.DType, dtype)
	}
	if !slices.Equal(info.Shape, shape) {
		return nil, fmt.Errorf("awq: %s: shape %v, want %v", full, info.Shape, shape)
	}
	// The shape is the one asked for, whose product the caller bounded.
	if len(raw) != info.NumElements()*dtype.Size() {
		return nil, fmt.Errorf("awq: %s: %d bytes for shape %v", full, len(raw), info.Shape)
	}
	return raw, nil
}

// Matrix transcodes module's qweight, qzeros and scales: Table[q] = q,
// Scale = s, Offset = −s·z, so Row computes s·q − s·z = s·(q − z) exactly
// (fp16 s times a 4-bit integer is exact in float32, and so is their
// difference).
func (f *Format) Matrix(t lookup.Tensors, module string) (*lookup.Matrix, error) {
	name := module + ".qweight"
	qw, info, err := t.Raw(name)
	if err != nil {
		return nil, fmt.Errorf("awq: %s: %v", name, err)
	}
	if info.DType != safetensors.I32 {
		return nil, fmt.Errorf("awq: %s: dtype %s, want I32", name, info.DType)
	}
	if len(info.Shape) != 2 || info.Shape[0] <= 0 || info.Shape[1] <= 0 {
		return nil, fmt.Errorf("awq: %s: shape %v, want (in, out/8)", name, info.Shape)
	}
	in, words := info.Shape[0], info.Shape[1]
	if words > 1<<24 || in > 1<<24 || int64(len(qw)) != int64(in)*int64(words)*4 {
		return nil, fmt.Errorf("awq: %s: %d bytes for I32 shape %v (or dims over 2^24)", name, len(qw), info.Shape)
	}
	out := words * 8
	ng, gs, err := f.groups(in)
	if err != nil {
		return nil, fmt.Errorf("awq: %s: shape %v: %v (group_size)", name, info.Shape, err)
	}
	qz, err := tensor(t, module, "qzeros", safetensors.I32, ng, words)
	if err != nil {
		return nil, err
	}
	sc, err := tensor(t, module, "scales", safetensors.F16, ng, out)
	if err != nil {
		return nil, err
	}
	m := &lookup.Matrix{
		Rows: out, Cols: in, Bits: 4, Groups: ng, GroupSize: gs,
		Table:  make([]float32, 16),
		Scale:  make([]float32, out*ng),
		Offset: make([]float32, out*ng),
	}
	for q := range m.Table {
		m.Table[q] = float32(q)
	}
	m.Codes = make([]byte, out*m.RowBytes())
	rb := m.RowBytes()
	le := binary.LittleEndian
	// Inputs i and i+1 make one code byte of each output: read both rows
	// of words and write every byte once. Tiles of 128 inputs keep each
	// output's 64 code bytes in cache while the tile fills them.
	const tile = 128
	for i0 := 0; i0 < in; i0 += tile {
		for j := range words {
			for i := i0; i < min(i0+tile, in); i += 2 {
				lo := le.Uint32(qw[4*(i*words+j):])
				var hi uint32
				if i+1 < in {
					hi = le.Uint32(qw[4*((i+1)*words+j):])
				}
				for k, p := range order {
					m.Codes[(8*j+p)*rb+i/2] = byte(lo>>(4*k))&15 | byte(hi>>(4*k))<<4
				}
			}
		}
	}
	for g := range ng {
		for j := range words {
			w := le.Uint32(qz[4*(g*words+j):])
			for k, p := range order {
				o := 8*j + p
				z := float32(w >> (4 * k) & 15)
				s := safetensors.FromF16(le.Uint16(sc[2*(g*out+o):]))
				m.Scale[o*ng+g] = s
				m.Offset[o*ng+g] = -s * z
			}
		}
	}
	return m, nil
}

// Quantize is AutoAWQ's pseudo_quantize_tensor and GEMM packing of
// W (rows=out, cols=in), without the activation-aware scale search (that
// needs calibration data; the stored layout is the same). With zero
// points: s = max(max−min, 1e-5)/15 rounded to fp16, z = clamp(−round(min/s),
// 0, 15), q = clamp(round(w/s)+z, 0, 15). Without: s = max(|w|, 1e-5)/7,
// q = clamp(round(w/s), −8, 7) + 8 with z = 8. round is half to even, as
// torch.round.
func (f *Format) Quantize(module string, w []float32, rows, cols int) ([]safetensors.Tensor, error) {
	if f.Bits != 4 {
		return nil, fmt.Errorf("awq: %s: %d-bit GEMM is not supported", module, f.Bits)
	}
	if rows <= 0 || cols <= 0 || len(w) != rows*cols {
		return nil, fmt.Errorf("awq: %s: %d weights for shape (%d, %d)", module, len(w), rows, cols)
	}
	if rows%8 != 0 {
		return nil, fmt.Errorf("awq: %s: %d outputs are not a multiple of 8", module, rows)
	}
	ng, gs, err := f.groups(cols)
	if err != nil {
		return nil, fmt.Errorf("awq: %s: %v", module, err)
	}
	words := rows / 8
	scales := make([]float32, ng*rows) // (in/g, out)
	zeros := make([]int32, ng*rows)
	codes := make([]int32, cols*rows) // (in, out)
	for o := range rows {
		for g := range ng {
			grp := w[o*cols+g*gs : o*cols+(g+1)*gs]
			s, z := f.groupParams(grp)
			scales[g*rows+o] = s
			zeros[g*rows+o] = z
			for c, x := range grp {
				// Without zero points z is 8: clamp(r, −8, 7)+8 is clamp(r+8, 0, 15).
				q := math.RoundToEven(float64(x)/float64(s)) + float64(z)
				codes[(g*gs+c)*rows+o] = int32(math.Max(0, math.Min(15, q)))
			}
		}
	}
	sc := make([]byte, 2*len(scales))
	for i, s := range scales {
		binary.LittleEndian.PutUint16(sc[2*i:], safetensors.ToF16(s))
	}
	return []safetensors.Tensor{
		{Name: module + ".qweight", DType: safetensors.I32, Shape: []int{cols, words}, Data: safetensors.EncodeI32(pack(codes, cols, rows))},
		{Name: module + ".qzeros", DType: safetensors.I32, Shape: []int{ng, words}, Data: safetensors.EncodeI32(pack(zeros, ng, rows))},
		{Name: module + ".scales", DType: safetensors.F16, Shape: []int{ng, rows}, Data: sc},
	}, nil
}

// groupParams is one group's fp16-representable scale and its zero point.
func (f *Format) groupParams(grp []float32) (float32, int32) {
	if !f.ZeroPoint {
		amax := float32(0)
		for _, x := range grp {
			amax = max(amax, float32(math.Abs(float64(x))))
		}
		return safetensors.FromF16(safetensors.ToF16(max(amax, 1e-5) / 7)), 8
	}
	lo, hi := grp[0], grp[0]
	for _, x := range grp {
		lo, hi = min(lo, x), max(hi, x)
	}
	s := safetensors.FromF16(safetensors.ToF16(max(hi-lo, 1e-5) / 15))
	z := -math.RoundToEven(float64(lo) / float64(s))
	return s, int32(math.Max(0, math.Min(15, z)))
}

// pack packs v (n, out) of 4-bit values into (n, out/8) int32 words in
// the GEMM order.
func pack(v []int32, n, out int) []int32 {
	words := out / 8
	p := make([]int32, n*words)
	for i := range n {
		for j := range words {
			var w uint32
			for k, c := range order {
				w |= uint32(v[i*out+8*j+c]&15) << (4 * k)
			}
			p[i*words+j] = int32(w)
		}
	}
	return p
}

// inLayer says whether a module sits under a numbered layer
// ("model.layers.3.mlp.up_proj"), where AutoAWQ looks for linears.
func inLayer(module string) bool {
	parts := strings.Split(module, ".")
	for _, p := range parts[:len(parts)-1] {
		if p != "" && strings.Trim(p, "0123456789") == "" {
			last := parts[len(parts)-1]
			return !strings.Contains(last, "embed") && !strings.Contains(last, "norm")
		}
	}
	return false
}
