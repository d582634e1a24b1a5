// Package quant implements the symmetric group-wise weight quantization that
// logitscope compares against the float reference: q8, q6 and q4, each with
// one f16 scale per group of GroupSize (32) consecutive weights along a row.
//
// A weight matrix W has shape (rows, cols) = (out, in); groups run along the
// input dimension, so every row holds G = ceil(cols/32) groups and a short last
// group is zero-padded (the padding always quantizes to q = 0).
//
// # Quantization
//
// For each group:
//
//	amax    = max |x|                       (float32)
//	scale16 = f16(amax / qmax)              (quotient in float32, then round to nearest even f16)
//	          clamped to [0x0400, 0x7BFF] when amax > 0, i.e. to [2^-14, 65504]
//	          0 when amax == 0
//	s       = float32(scale16)
//	q       = clamp(round(x / s), -qmax, qmax)   (round half away from zero; q = 0 when s == 0)
//
// with qmax = 127 (q8), 31 (q6), 7 (q4). Half away from zero (not to even) is
// chosen because it is odd-symmetric: -x always quantizes to -q, so it does not
// matter which sign a group's amax has. The quotient x/s is taken in float64,
// which is exact enough that q is the correctly rounded x/s: a float32 divided by
// an f16 never lands within a float64 ulp of a half-integer unless it is one.
//
// The scale is kept out of the f16 subnormal range on purpose: GPUs may flush
// f16 subnormals in unpack2x16float (drivers do under denorm-flush modes), so a
// subnormal scale could decode to 0 on one GPU and to a tiny value on another. With s >= 2^-14 and |q| >= 1 every
// product is a normal float32 too.
//
// Inputs that are NaN or ±Inf are rejected with an error naming row and column.
// Finite inputs always quantize; the only lossy clamp is for groups whose
// amax/qmax exceeds 65504 (amax > ~8.3e6 for q8), where the scale saturates.
//
// # Dequantization contract
//
// The dequantized value is exactly
//
//	float32(q) * s
//
// a single float32 multiply. Because s has 11 significant bits and |q| <= 128
// has at most 8, the product is exact in float32: there is no rounding for a
// GPU to do differently (FMA contraction or fast-math cannot change it), so
// the CPU Dequantize here and the WGSL shader agree bit for bit.
//
// Error bound: |x - deq| <= s/2 for every element of a group whose scale did
// not saturate (amax/qmax <= 65504), since f16 rounding of the scale changes
// amax/s by less than qmax*2^-11 < 0.5 and so the clamp to ±qmax never bites.
// In a saturated group the bound is max(s/2, |x| - qmax*s).
//
// # Bit layout
//
// A tensor, or any row range of it, is one little-endian blob read by the GPU
// as array<u32>. It has two regions:
//
//	quant region: rows × QuantWordsPerRow u32 words, row-major;
//	              each row is G groups of Wq words (Wq = 8 for q8, 6 for q6, 4 for q4)
//	scale region: rows × ScaleWordsPerRow u32 words, ScaleWordsPerRow = ceil(G/2);
//	              group g's f16 scale is the low 16 bits of the row's word g/2
//	              when g is even, the high 16 bits when g is odd
//	              (an odd G leaves the last high half 0)
//
// so for row r, group g the quant words start at word (r*G + g)*Wq and the
// scale word is at word rows*G*Wq + r*ceil(G/2) + g/2. In WGSL:
//
//	let sw = blob[scaleBase + r*sw_per_row + g/2u];
//	let s  = unpack2x16float(sw)[g & 1u];
//
// Within a group of 32 values, value j (0..31) is stored as:
//
//	q8: word j/4, byte j%4 (byte 0 = bits 0..7), two's complement q.
//	    unpack4xI8(word) yields values 4k..4k+3 in order; without it,
//	    q = bitcast<i32>(word << (24u - 8u*(j%4u))) >> 24u   (i32 >> sign-extends)
//	q4: u = q + 8 (1..15); word j/8, bits 4*(j%8) .. 4*(j%8)+3.
//	    q = i32((word >> (4u*(j%8u))) & 0xFu) - 8
//	q6: u = q + 32 (1..63); the low 4 bits of u exactly as q4 in words 0..3
//	    (word j/8, bits 4*(j%8)); the high 2 bits of u in word 4 + j/16,
//	    bits 2*(j%16) .. 2*(j%16)+1.
//	    q = i32(((w[j/8] >> (4u*(j%8u))) & 0xFu) |
//	            (((w[4u + j/16u] >> (2u*(j%16u))) & 3u) << 4u)) - 32
//
// Decoders do not validate codes; the encoder never writes u = 0 (q4, q6) or
// the byte 0x80 (q8), and a decoder given one computes q = -8, -32 or -128 as
// the formulas say, on CPU and GPU alike.
//
// Every row owns whole words in both regions, so rows [a, b) of a tensor form a
// valid blob of b-a rows on their own (see Layout.SliceRows). That is what lets
// large tensors be split by rows to fit GPU binding limits.
package quant
