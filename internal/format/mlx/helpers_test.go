package mlx

import (
	"logitscope/internal/format/lookup"
	"logitscope/internal/format/safetensors"
)

// dequantize is an independent MLX dequantizer over the stored tensors
// (no code shared with the reader): bit by bit from the U32 words' bytes,
// w = scale·q + bias in float32. expert < 0 is a plain module.
func dequantize(m lookup.Memory, stem string, expert, bits, group int) []float32 {
	w, s, b := m[stem+".weight"], m[stem+".scales"], m[stem+".biases"]
	sc, bi := floats(s), floats(b)
	n := len(w.Shape)
	rows, words := w.Shape[n-2], w.Shape[n-1]
	cols := words * 32 / bits
	groups := cols / group
	out := make([]float32, 0, rows*cols)
	for r := range rows {
		rr := r
		if expert >= 0 {
			rr += expert * rows
		}
		row := w.Data[rr*words*4 : (rr+1)*words*4]
		for c := range cols {
			q := 0
			for j := range bits {
				p := c*bits + j
				q |= int(row[p/8]>>(p%8)&1) << j
			}
			g := rr*groups + c/group
			out = append(out, float32(q)*sc[g]+bi[g])
		}
	}
	return out
}

func floats(t safetensors.Tensor) []float32 {
	out := make([]float32, len(t.Data)/t.DType.Size())
	if err := safetensors.DecodeFloat32(t.DType, t.Data, out); err != nil {
		panic(err)
	}
	return out
}
