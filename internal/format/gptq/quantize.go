package gptq

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"logitscope/internal/format/safetensors"
)

// put stores the bits-wide value v at bit offset off of the word stream
// word(k) points into: field's inverse.
func put(word func(k int) *uint32, off, bits, v int) {
	k, s := off/32, off%32
	x := uint64(v) << s
	*word(k) |= uint32(x)
	if s+bits > 32 {
		*word(k + 1) |= uint32(x >> 32)
	}
}

// Order is the order act-order quantizes a matrix's inputs in: by
// descending squared column norm of W (rows, cols), ties by index. GPTQ
// orders by the Hessian's diagonal, the calibration inputs' squared
// norms; without calibration data the weights' own is a deterministic
// stand-in that gives a non-monotonic g_idx all the same.
func Order(w []float32, rows, cols int) []int {
	norm := make([]float64, cols)
	for r := range rows {
		for c, x := range w[r*cols : (r+1)*cols] {
			norm[c] += float64(x) * float64(x)
		}
	}
	perm := make([]int, cols)
	for c := range perm {
		perm[c] = c
	}
	slices.SortStableFunc(perm, func(a, b int) int { return cmp.Compare(norm[b], norm[a]) })
	return perm
}

// Quantize rounds W (rows = outputs, cols = inputs) to nearest as GPTQ's
// quantizer grid does (without GPTQ's error compensation, which needs
// calibration data) and packs it as GPTQModel stores it: qweight,
// qzeros, scales (fp16) and g_idx.
func (f *Format) Quantize(module string, w []float32, rows, cols int) ([]safetensors.Tensor, error) {
	bits, maxq := f.c.Bits, f.c.maxq()
	switch {
	case len(w) != rows*cols || rows <= 0 || cols <= 0:
		return nil, fmt.Errorf("gptq: %s: %d weights for shape (%d, %d)", module, len(w), rows, cols)
	case cols*bits%32 != 0 || rows*bits%32 != 0:
		return nil, fmt.Errorf("gptq: %s: shape (%d, %d): %d-bit packing needs both dimensions to fill whole 32-bit words (multiples of %d)", module, rows, cols, bits, 32/gcd(bits, 32))
	}
	size := f.c.GroupSize
	if size == -1 {
		size = cols
	}
	groups := Groups(cols, f.c.GroupSize)
	perm := make([]int, cols)
	for c := range perm {
		perm[c] = c
	}
	if f.c.DescAct {
		perm = Order(w, rows, cols)
	}
	// Group g is the inputs perm[g·size : (g+1)·size]; g_idx maps each
	// input back to its group, as GPTQModel's g_idx[invperm] does.
	gidx := make([]int32, cols)
	for p, c := range perm {
		gidx[c] = int32(p / size)
	}
	scales := make([]float32, groups*rows) // (groups, rows), fp16 values
	zeros := make([]int, groups*rows)
	codes := make([]int, rows*cols)
	for g := range groups {
		in := perm[g*size : min((g+1)*size, cols)]
		for r := range rows {
			s, z := f.grid(w[r*cols:(r+1)*cols], in)
			scales[g*rows+r], zeros[g*rows+r] = s, z
			for _, c := range in {
				q := int(math.RoundToEven(float64(w[r*cols+c])/float64(s))) + z
				codes[r*cols+c] = min(max(q, 0), maxq)
			}
		}
	}

	qweight := make([]uint32, cols*bits/32*rows)
	for r := range rows {
		word := func(k int) *uint32 { return &qweight[k*rows+r] }
		for c := range cols {
			put(word, c*bits, bits, codes[r*cols+c])
		}
	}
	zw := rows * bits / 32
	qzeros := make([]uint32, groups*zw)
	for g := range groups {
		word := func(k int) *uint32 { return &qzeros[g*zw+k] }
		for r := range rows {
			z := zeros[g*rows+r]
			if !f.c.V2 {
				z-- // v1 stores zero − 1 (grid keeps z ≥ 1 there)
			}
			put(word, r*bits, bits, z)
		}
	}
	return []safetensors.Tensor{
		{Name: module + ".qweight", DType: safetensors.I32, Shape: []int{cols * bits / 32, rows}, Data: words(qweight)},
		{Name: module + ".qzeros", DType: safetensors.I32, Shape: []int{groups, zw}, Data: words(qzeros)},
		{Name: module + ".scales", DType: safetensors.F16, Shape: []int{groups, rows}, Data: safetensors.EncodeF16(scales)},
		{Name: module + ".g_idx", DType: safetensors.I32, Shape: []int{cols}, Data: safetensors.EncodeI32(gidx)},
	}, nil
}

// grid is GPTQ's quantizer grid for the weights row[c], c in in: the
// range widened to hold 0, the scale (rounded to fp16, as stored) and
// the zero point; sym centres the zero at 2^(bits−1).
func (f *Format) grid(row []float32, in []int) (float32, int) {
	maxq := float64(f.c.maxq())
	lo, hi := 0.0, 0.0
	for _, c := range in {
		lo, hi = min(lo, float64(row[c])), max(hi, float64(row[c]))
	}
	if f.c.Sym {
		hi = max(-lo, hi)
		if lo < 0 {
			lo = -hi
		}
	}
	if lo == 0 && hi == 0 {
		lo, hi = -1, 1
	}
	s := safetensors.FromF16(safetensors.ToF16(float32((hi - lo) / maxq)))
	if s == 0 {
		s = safetensors.FromF16(1) // the smallest fp16 above 0
	}
	z := int(math.RoundToEven(-lo / float64(s)))
	if f.c.Sym {
		z = (f.c.maxq() + 1) / 2
	}
	z = min(max(z, 0), f.c.maxq())
	if !f.c.V2 && z == 0 {
		// v1 cannot store a zero point of 0 (Matrix says why); GPTQModel
		// would write a word that its own reader decodes otherwise. The
		// nearest zero it can store keeps the file readable by all.
		z = 1
	}
	return s, z
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// words is little-endian uint32s.
func words(v []uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
	}
	return b
}
