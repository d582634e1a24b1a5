package cpu

import "logitscope/internal/sys/exp64"

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
//     lane j mod 16 becomes lane + w[j]·x[j]: the product rounded to
//     float32, then the sum rounded to float32 (a multiply and an add, not
//     a fused multiply-add). A last partial chunk of 16 is padded with
//     w = x = 0 (so lanes past k add a zero product, which turns a −0
//     lane into +0 and changes nothing else).
//  3. The lanes are summed as a tree: lane i += lane i+8 (i < 8), then
//     lane i += lane i+4, lane i += lane i+2, lane 0 += lane 1.
//  4. The bias, if any, is added to lane 0's sum.
//
// One output element never depends on another, so KV-cache decode (one
// token at a time) and teacher forcing (many) give the same bits, and the
// assembly and the pure-Go path agree bit for bit (the tests check both).
// Sixteen lanes are one AVX-512 register. Why not fused: engine.wasm must
// give the native engine's bits, and WebAssembly has no fused
// multiply-add: emulating one exactly in Go (through float64, with a
// round-to-odd rare path) made a dot product in wasm 18 times slower
// than a multiply and an add. AMD's AVX-512 cores (Zen 4, 5) multiply and
// add on separate pipes: the tiles ran as fast as with fused
// instructions there; Intel's run all three on the same two ports, where
// an arithmetic-bound tile can take up to twice as long. Go may fuse
// x*y + z into one instruction where the CPU has it (arm64, amd64 v3),
// unless a conversion rounds the product: every product below is written
// float32(x*y).

// lanes is the number of partial sums of a dot product (see the order
// above).
const lanes = 16

// dotGo is w · x over len(w) values in the order above.
func dotGo(w, x []float32) float32 {
	var acc [lanes]float32
	accumulate(&acc, w, x)
	return reduce(&acc)
}

// accumulate carries the lanes of w · x over len(w) more columns, a
// partial last chunk padded as the order says: a row split into panels
// at multiples of 16 columns gets the lanes of the whole row. The lanes
// live in sixteen variables and a chunk is one straight run of code:
// in wasm, where Go has no SIMD, a loop over an array of lanes and its
// branches took three times as long.
func accumulate(acc *[lanes]float32, w, x []float32) {
	x = x[:len(w)]
	a0, a1, a2, a3, a4, a5, a6, a7 := acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6], acc[7]
	a8, a9, a10, a11, a12, a13, a14, a15 := acc[8], acc[9], acc[10], acc[11], acc[12], acc[13], acc[14], acc[15]
	for len(w) >= lanes {
		wj, xj := w[:lanes:lanes], x[:lanes:lanes]
		a0 += float32(wj[0] * xj[0])
		a1 += float32(wj[1] * xj[1])
		a2 += float32(wj[2] * xj[2])
		a3 += float32(wj[3] * xj[3])
		a4 += float32(wj[4] * xj[4])
		a5 += float32(wj[5] * xj[5])
		a6 += float32(wj[6] * xj[6])
		a7 += float32(wj[7] * xj[7])
		a8 += float32(wj[8] * xj[8])
		a9 += float32(wj[9] * xj[9])
		a10 += float32(wj[10] * xj[10])
		a11 += float32(wj[11] * xj[11])
		a12 += float32(wj[12] * xj[12])
		a13 += float32(wj[13] * xj[13])
		a14 += float32(wj[14] * xj[14])
		a15 += float32(wj[15] * xj[15])
		w, x = w[lanes:], x[lanes:]
	}
	*acc = [lanes]float32{a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15}
	if len(w) > 0 {
		for i := range acc {
			if i < len(w) {
				acc[i] += float32(w[i] * x[i])
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

// dotRowsGo: out[i] = w_i · x for rows i < len(out) of w (stride ldw),
// k values each, a multiple of 4 rows: a decode step's float32 rows,
// four at a time through tile4x1.
func dotRowsGo(w []float32, ldw int, x []float32, k int, out []float32) {
	var t4 [4]float32
	for i := 0; i+4 <= len(out); i += 4 {
		tile4x1(w[i*ldw:], ldw, x, k, &t4)
		copy(out[i:i+4], t4[:])
	}
}

// axpyGo: out[i] += p_j·v_j[i] (product and sum each rounded, as the
// order says) for j = 0, 1, … in order, v_j the rows of v (stride ldv):
// attention's weighted sum of the values.
func axpyGo(out, p, v []float32, ldv int) {
	for j, pj := range p {
		vj := v[j*ldv : j*ldv+len(out)]
		for i := range out {
			out[i] += float32(pj * vj[i])
		}
	}
}

// The kernels in use: pure Go, replaced at init by assembly where the CPU
// has it (kernel_amd64.go), and in engine.wasm by the host's SIMD128 ones
// where it serves them (kernel_wasip1.go). Each computes the same bits as
// its Go twin.
var (
	tile4x4 = tile4x4Go
	tile4x1 = tile4x1Go
	dotRows = dotRowsGo
	axpy    = axpyGo
	// SiLU times the up projection: package exp64's, assembly where the
	// CPU has it.
	siluMul = exp64.SiluMul
	// lookupRowAsm, where the CPU has it, decodes a lookup row of
	// len(dst) columns in groups of groupSize as lookupRow does, and says
	// whether it could (the columns and groups whole runs of its loop).
	// affine says table[q] = base + q (affineTable). nil: lookupRow
	// decodes in Go.
	lookupRowAsm func(bits, groupSize int, table []float32, base int32, affine bool, codes []byte, scales, offsets, dst []float32) bool
)
