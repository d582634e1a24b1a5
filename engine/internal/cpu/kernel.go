package cpu

import "math"

// The order of a weight product. Every matrix product of the forward pass
// computes each output element y = w · x + b, for a weight row w and an
// activation row x of k values, in exactly this order, whatever the
// weights' format, the number of tokens, the tiling, the thread count, the
// instruction set (AVX-512 assembly or pure Go) and the runtime (native or
// wasm):
//
//  1. w is decoded to float32 exactly as the format's reference decoder
//     does it (quant.Layout.DequantizeRow for q8/q6/q4, ggml.Dequantize for
//     llama.cpp's block types and F16/BF16/F32, a plain copy for float32
//     rows): these decoders round nothing or round in one defined way, so
//     any implementation of them gives the same bits.
//  2. Sixteen float32 lanes start at +0. For j = 0, 1, …, k−1 in order,
//     lane j mod 16 becomes fma(w[j], x[j], lane): one fused multiply-add,
//     rounded once (IEEE 754 fusedMultiplyAdd in binary32). A last partial
//     chunk of 16 is padded with w = x = 0 (so lanes past k add a zero
//     product, which turns a −0 lane into +0 and changes nothing else).
//  3. The lanes are summed as a tree: lane i += lane i+8 (i < 8), then
//     lane i += lane i+4, lane i += lane i+2, lane 0 += lane 1.
//  4. The bias, if any, is added to lane 0's sum.
//
// One output element never depends on another, so KV-cache decode (one
// token at a time) and teacher forcing (many) give the same bits, and the
// assembly and the pure-Go path agree bit for bit (the tests check both).
// Sixteen lanes are one AVX-512 register; the fused multiply-add is twice
// the throughput of a multiply and an add, which is what prefill, bound by
// arithmetic, needs. Pure Go computes the fused multiply-add exactly with
// float64 arithmetic (fma32), slower but the same bits.

// lanes is the number of partial sums of a dot product (see the order
// above).
const lanes = 16

// fma32 is a·b + c rounded once to float32. The product is exact in
// float64 (48 significant bits) and so, mostly, is what float64's sum
// rounds away: rounding that sum again to float32 is wrong only when it
// lands exactly on a float32 tie that the exact sum is not on, or below
// float32's normal range, where ties sit at other bits. Then the sum is
// rounded to odd first, which makes the second rounding right (with
// 53 ≥ 24 + 2 bits: Boldo and Melquiond, "When double rounding is odd",
// 2005). Elsewhere one test of its bits, a branch almost never taken,
// suffices: a dot product of 896 values takes 4.8 µs in pure Go this
// way, 8.9 µs rounding every sum to odd, 0.6 µs as plain float32
// multiplies and adds (which would not equal the assembly's FMA).
func fma32(a, b, c float32) float32 {
	p := float64(a) * float64(b)
	s := p + float64(c)
	const tie = 1 << 28 // a float32 midpoint's last 29 bits of float64 mantissa
	if math.Float64bits(s)&(tie<<1-1) == tie || (s < 0x1p-126 && s > -0x1p-126) {
		return toOdd(p, float64(c), s)
	}
	return float32(s)
}

// toOdd is fma32's rare path: s = p + c rounded to nearest, rounded to
// odd instead, then to float32; out of line, so that fma32's common path
// stays short.
//
//go:noinline
func toOdd(p, c, s float64) float32 {
	// TwoSum: e is the rounding error of s, so s + e = p + c exactly.
	z := s - p
	e := (p - (s - z)) + (c - z)
	if bits := math.Float64bits(s); bits&1 == 0 && (e > 0 || e < 0) {
		// Inexact with an even last bit: step to the odd neighbour on the
		// side of the exact sum (up in magnitude when e has s's sign).
		if (e > 0) == (s > 0) {
			bits++
		} else {
			bits--
		}
		s = math.Float64frombits(bits)
	}
	return float32(s)
}

// dotGo is w · x over len(w) values in the order above.
func dotGo(w, x []float32) float32 {
	var acc [lanes]float32
	accumulate(&acc, w, x)
	return reduce(&acc)
}

// accumulate carries the lanes of w · x over len(w) more columns, a
// partial last chunk padded as the order says: a row split into panels
// at multiples of 16 columns gets the lanes of the whole row.
func accumulate(acc *[lanes]float32, w, x []float32) {
	k := len(w)
	x = x[:k]
	j := 0
	for ; j+lanes <= k; j += lanes {
		wj, xj := w[j:j+lanes:j+lanes], x[j:j+lanes:j+lanes]
		for i := range acc {
			acc[i] = fma32(wj[i], xj[i], acc[i])
		}
	}
	if j < k {
		for i := range acc {
			if j+i < k {
				acc[i] = fma32(w[j+i], x[j+i], acc[i])
			} else {
				acc[i] += 0 // the padding's zero product
			}
		}
	}
}

// reduce sums the lanes as the order's step 3 says.
func reduce(acc *[lanes]float32) float32 {
	for h := lanes / 2; h >= 1; h /= 2 {
		for i := range h {
			acc[i] += acc[i+h]
		}
	}
	return acc[0]
}

// Flags of tile4x4: start from zero lanes, and end by summing them.
const (
	first = 1 << iota
	last
)

// tile4x4Go carries the lanes of w_r · x_t, for rows r < 4 of w (stride
// ldw) and tokens t < 4 of x (stride ldx), over k more columns in
// acc[4r+t]: from zero when flags has first, and summed into out[4r+t]
// when it has last. Prefill splits long rows into panels so that a
// panel's weights and tokens stay in the L1 cache.
func tile4x4Go(w []float32, ldw int, x []float32, ldx, k int, acc *[16][lanes]float32, out *[16]float32, flags int) {
	for r := range 4 {
		for t := range 4 {
			a := &acc[4*r+t]
			if flags&first != 0 {
				*a = [lanes]float32{}
			}
			accumulate(a, w[r*ldw:r*ldw+k], x[t*ldx:t*ldx+k])
			if flags&last != 0 {
				out[4*r+t] = reduce(a)
			}
		}
	}
}

// tile4x1Go: out[r] = w_r · x for rows r < 4 of w (stride ldw), k values.
func tile4x1Go(w []float32, ldw int, x []float32, k int, out *[4]float32) {
	for r := range 4 {
		out[r] = dotGo(w[r*ldw:r*ldw+k], x[:k])
	}
}

// axpyGo: out[i] = fma(p_j, v_j[i], out[i]) for j = 0, 1, … in order, v_j
// the rows of v (stride ldv): attention's weighted sum of the values.
func axpyGo(out, p, v []float32, ldv int) {
	for j, pj := range p {
		vj := v[j*ldv : j*ldv+len(out)]
		for i := range out {
			out[i] = fma32(pj, vj[i], out[i])
		}
	}
}

// The kernels in use: pure Go, replaced at init by assembly where the CPU
// has it (kernel_amd64.go). Each assembly kernel computes the same bits as
// its Go twin.
var (
	tile4x4 = tile4x4Go
	tile4x1 = tile4x1Go
	axpy    = axpyGo
)
