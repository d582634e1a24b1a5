package bnb

import (
	"encoding/json"
	"math"

	"logitscope/internal/format/lookup"
)

// kernelTables are bnb's CUDA lookup tables as csrc/kernels.cu writes
// them (FP4: the magnitudes for bits 0-2, negated when bit 3 is set).
var kernelTables = map[string][]float32{
	"nf4": {-1.0, -0.6961928009986877, -0.5250730514526367, -0.39491748809814453, -0.28444138169288635, -0.18477343022823334, -0.09105003625154495, 0.0,
		0.07958029955625534, 0.16093020141124725, 0.24611230194568634, 0.33791524171829224, 0.44070982933044434, 0.5626170039176941, 0.7229568362236023, 1.0},
	"fp4": {0.0, 0.005208333333, 0.66666667, 1.0, 0.33333333, 0.5, 0.16666667, 0.25,
		negZero, -0.005208333333, -0.66666667, -1.0, -0.33333333, -0.5, -0.16666667, -0.25},
}

// negZero is −0 (a Go constant −0.0 is +0): the kernel's 0 · −1.
var negZero = float32(math.Copysign(0, -1))

// dequantize is an independent bitsandbytes dequantizer over the stored
// tensors (no code shared with the reader), as dequantize_4bit computes:
// the flat weight's codes high nibble first, absmax per block (double
// quantized ones decoded first), w = table[q]·absmax in float32.
func dequantize(m lookup.Memory, module, quant string) []float32 {
	var st map[string]any
	if err := json.Unmarshal(m[module+".weight.quant_state.bitsandbytes__"+quant].Data, &st); err != nil {
		panic(err)
	}
	shape := st["shape"].([]any)
	n := int(shape[0].(float64)) * int(shape[1].(float64))
	bs := int(st["blocksize"].(float64))
	absmax := m[module+".weight.absmax"]
	var am []float32
	if off, ok := st["nested_offset"]; ok {
		code := f32s(m[module+".weight.nested_quant_map"].Data)
		nabs := f32s(m[module+".weight.nested_absmax"].Data)
		nbs := int(st["nested_blocksize"].(float64))
		for b, q := range absmax.Data {
			prod := code[q] * nabs[b/nbs]
			am = append(am, prod+float32(off.(float64)))
		}
	} else {
		am = f32s(absmax.Data)
	}
	w := m[module+".weight"].Data
	out := make([]float32, n)
	for i := range out {
		q := w[i/2] & 15
		if i%2 == 0 {
			q = w[i/2] >> 4
		}
		out[i] = kernelTables[quant][q] * am[i/bs]
	}
	return out
}

func f32s(b []byte) []float32 {
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24)
	}
	return out
}
