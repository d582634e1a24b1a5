package bnb

import (
	"fmt"
	"math"
	"slices"
	"sort"

	"logitscope/internal/format/safetensors"
)

// Quantize is bnb's quantize_4bit of W (rows, cols) as its default (torch)
// backend computes it: blocks of 64 over the flattened weight (the last
// one short), each scaled by 1/absmax (a short block divided by it),
// clamped to [-1, 1], and given the code of the table value nearest below
// or at each midpoint (torch.bucketize); an odd count is padded with a
// 0. With double quantization, the absmax less their mean are quantized
// in blocks of 256 to bnb's signed dynamic 8-bit map. The tensors are
// named as transformers saves them.
func (f *Format) Quantize(module string, w []float32, rows, cols int) ([]safetensors.Tensor, error) {
	if rows <= 0 || cols <= 0 || len(w) != rows*cols {
		return nil, fmt.Errorf("bnb: %s: %d weights for (%d, %d)", module, len(w), rows, cols)
	}
	tab := table(f.quant)
	absmax, scaled := blockwise(w, blocksize)
	if len(scaled)%2 == 1 {
		scaled = append(scaled, 0)
	}
	codes := nearest(scaled, tab)
	packed := make([]byte, len(codes)/2)
	for i := range packed {
		packed[i] = codes[2*i]<<4 | codes[2*i+1]
	}
	// The stored quant_map is get_4bit_type's, whose FP4 list has the
	// integer -0, a +0; the kernels (and Table) give −0. Equal values.
	qmap := slices.Clone(tab)
	qmap[8] = 0
	name := module + ".weight"
	st := State{QuantType: f.quant, Blocksize: blocksize, DType: "bfloat16", Shape: []int{rows, cols}}
	out := []safetensors.Tensor{
		{Name: name, DType: safetensors.U8, Shape: []int{len(packed), 1}, Data: packed},
		{Name: name + ".quant_map", DType: safetensors.F32, Shape: []int{16}, Data: safetensors.EncodeF32(qmap)},
	}
	if !f.double {
		out = append(out, safetensors.Tensor{Name: name + ".absmax", DType: safetensors.F32, Shape: []int{len(absmax)}, Data: safetensors.EncodeF32(absmax)})
	} else {
		// offset = absmax.mean() in float32 (torch sums float32 in a
		// wider accumulator; the stored offset is what readers use).
		var sum float64
		for _, a := range absmax {
			sum += float64(a)
		}
		offset := float32(sum / float64(len(absmax)))
		centred := make([]float32, len(absmax))
		for i, a := range absmax {
			centred[i] = a - offset
		}
		nabs, nscaled := blockwise(centred, 256)
		o := float64(offset)
		st.NestedBlocksize, st.NestedDType, st.NestedOffset = 256, "float32", &o
		out = append(out,
			safetensors.Tensor{Name: name + ".absmax", DType: safetensors.U8, Shape: []int{len(absmax)}, Data: nearest(nscaled, dynamic)},
			safetensors.Tensor{Name: name + ".nested_absmax", DType: safetensors.F32, Shape: []int{len(nabs)}, Data: safetensors.EncodeF32(nabs)},
			safetensors.Tensor{Name: name + ".nested_quant_map", DType: safetensors.F32, Shape: []int{256}, Data: safetensors.EncodeF32(dynamic)})
	}
	js := st.Encode()
	return append(out, safetensors.Tensor{Name: name + ".quant_state.bitsandbytes__" + f.quant, DType: safetensors.U8, Shape: []int{len(js)}, Data: js}), nil
}

// blockwise is each block's absmax and the values scaled into [-1, 1]:
// times 1/absmax in a full block, divided by it in the short last one,
// as bnb's default backend computes (absmax clamped to at least 1e-38).
func blockwise(x []float32, size int) (absmax, scaled []float32) {
	scaled = make([]float32, len(x))
	for b := 0; b < len(x); b += size {
		blk := x[b:min(b+size, len(x))]
		var m float32
		for _, v := range blk {
			m = max(m, float32(math.Abs(float64(v))))
		}
		absmax = append(absmax, m)
		m = max(m, 1e-38)
		inv := 1 / m
		for i, v := range blk {
			s := v * inv
			if len(blk) < size {
				s = v / m
			}
			scaled[b+i] = min(max(s, -1), 1)
		}
	}
	return absmax, scaled
}

// nearest is torch.bucketize against the midpoints of the sorted table
// (a value on a midpoint takes the lower entry), mapped back to the
// table's own codes.
func nearest(x []float32, tab []float32) []byte {
	order := make([]int, len(tab))
	for i := range order {
		order[i] = i
	}
	// −0 sorts before +0, so that small negatives take FP4's −0 and
	// small positives its +0, as the CUDA kernel's sign bit does.
	sort.Slice(order, func(a, b int) bool {
		x, y := tab[order[a]], tab[order[b]]
		return x < y || x == y && math.Signbit(float64(x)) && !math.Signbit(float64(y))
	})
	mid := make([]float32, len(tab)-1)
	for i := range mid {
		mid[i] = (tab[order[i]] + tab[order[i+1]]) / 2
	}
	out := make([]byte, len(x))
	for i, v := range x {
		k, _ := slices.BinarySearch(mid, v) // first midpoint >= v
		out[i] = byte(order[k])
	}
	return out
}

// dynamic is bnb's create_dynamic_map(signed=True, max_exponent_bits=7,
// total_bits=8), the nested absmax's code, computed in float32 as torch
// does: for exponent i in 0..6, the 2^i means of linspace(0.1, 1, 2^i+1)
// times ±10^(i-6), then 0 and 1, sorted. torch's vectorized linspace may
// differ from this scalar form in the last bit of a few entries; the
// reader uses the map stored in the file.
var dynamic = func() []float32 {
	data := []float32{0, 1}
	for i := range 7 {
		n := 1<<i + 1
		start, end := float32(0.1), float32(1)
		step := (end - start) / float32(n-1)
		lin := make([]float32, n)
		for k := range n {
			if k < n/2 {
				lin[k] = start + float32(step*float32(k))
			} else {
				lin[k] = end - float32(step*float32(n-1-k))
			}
		}
		p := float32(math.Pow10(i - 6))
		for k := range n - 1 {
			mean := (lin[k] + lin[k+1]) / 2
			data = append(data, p*mean, -p*mean)
		}
	}
	slices.Sort(data)
	return data
}()
