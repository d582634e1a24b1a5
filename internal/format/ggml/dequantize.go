package ggml

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"
)

// Exactness. Each decoder below evaluates the same float32 operations, in
// the same order, as ggml-base's reference dequantize_row_* (ggml-quants.c),
// so that a weight decoded here has the very bits llama.cpp computes:
//
//   - ggml-base is built for baseline x86-64 (SSE2, no FMA instructions), so
//     C rounds every product before the add or subtraction that follows. Go
//     may fuse x*y+z into one FMA (it does on arm64, ppc64, s390x, riscv64,
//     and on amd64 with GOAMD64=v3) unless an explicit float32(...)
//     conversion separates the two; every such product here is wrapped.
//   - Every product is in fact exact: an f16 scale has 11 significant bits
//     and the integers it meets (a 6-bit sub-scale times a 5-bit quant, or
//     Q6_K's 8-bit scale times its 6-bit quant) fewer than 13, so products
//     fit float32's 24 bits and rounding happens only in Q4_1's, Q5_1's and
//     the K-quants' final add or subtraction, which a fused operation rounds
//     the same. What fusion does change is the NaN: with an infinite scale
//     and a zero quant, C's product is x86's default NaN (0xFFC00000) and
//     the subtraction keeps it, while a fused operation returns the NaN of
//     the minimum when that is a NaN. The tests' random blocks hit that.
//
// NaN payloads otherwise follow x86's rules (an operation on one NaN returns
// it made quiet; on two, the first operand's), which Go on amd64 shares.
// Other architectures differ only in NaN bits.

// decoder decodes whole blocks: len(y) weights from their len(y) /
// BlockSize() * BlockBytes() bytes.
type decoder func(b []byte, y []float32)

var decoders = map[Type]decoder{
	F32: decodeF32, F16: decodeF16, BF16: decodeBF16,
	Q4_0: blocks(Q4_0, decodeQ4_0), Q4_1: blocks(Q4_1, decodeQ4_1), Q5_0: blocks(Q5_0, decodeQ5_0),
	Q5_1: blocks(Q5_1, decodeQ5_1), Q8_0: blocks(Q8_0, decodeQ8_0),
	Q2_K: blocks(Q2_K, decodeQ2_K), Q3_K: blocks(Q3_K, decodeQ3_K), Q4_K: blocks(Q4_K, decodeQ4_K),
	Q5_K: blocks(Q5_K, decodeQ5_K), Q6_K: blocks(Q6_K, decodeQ6_K),
	IQ2_XXS: blocks(IQ2_XXS, decodeIQ2_XXS), IQ2_XS: blocks(IQ2_XS, decodeIQ2_XS), IQ2_S: blocks(IQ2_S, decodeIQ2_S),
	IQ3_XXS: blocks(IQ3_XXS, decodeIQ3_XXS), IQ3_S: blocks(IQ3_S, decodeIQ3_S),
	IQ1_S: blocks(IQ1_S, decodeIQ1_S), IQ1_M: blocks(IQ1_M, decodeIQ1_M),
	IQ4_NL: blocks(IQ4_NL, decodeIQ4_NL), IQ4_XS: blocks(IQ4_XS, decodeIQ4_XS),
	TQ1_0: blocks(TQ1_0, decodeTQ1_0), TQ2_0: blocks(TQ2_0, decodeTQ2_0), MXFP4: blocks(MXFP4, decodeMXFP4),
}

// blocks makes a decoder of a one-block decoder.
func blocks(t Type, one decoder) decoder {
	bs, bb := t.BlockSize(), t.BlockBytes()
	return func(b []byte, y []float32) {
		for i := range len(y) / bs {
			one(b[i*bb:(i+1)*bb], y[i*bs:(i+1)*bs])
		}
	}
}

// Supported says whether Dequantize decodes t: F32, F16, BF16, Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0, the K-quants Q2_K … Q6_K, the i-quants (IQ1_S, IQ1_M,
// IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ4_NL, IQ4_XS), the ternary
// TQ1_0 and TQ2_0, and MXFP4: every type llama.cpp's quantizer writes
// into a model file. Q8_1 and Q8_K are intermediates of ggml's dot
// products, never stored in a model file.
func Supported(t Type) bool {
	_, ok := decoders[t]
	return ok
}

// Dequantize decodes n = len(out) weights of type t from data, which must
// be exactly their RowBytes(n) bytes (whole blocks), as ggml's
// dequantize_row_* (the type's to_float) does, bit for bit.
func Dequantize(t Type, data []byte, out []float32) error {
	dec, ok := decoders[t]
	if !ok {
		return fmt.Errorf("ggml: cannot dequantize %v", t)
	}
	bs, bb := t.BlockSize(), t.BlockBytes()
	if len(out)%bs != 0 {
		return fmt.Errorf("ggml: %d %v weights are not whole %d-weight blocks", len(out), t, bs)
	}
	nb := len(out) / bs
	if len(data) != nb*bb {
		return fmt.Errorf("ggml: %d %v weights (%d blocks of %d bytes) are %d bytes, have %d",
			len(out), t, nb, bb, nb*bb, len(data))
	}
	dec(data, out)
	return nil
}

// half reads the little-endian IEEE binary16 at b[0:2] as ggml's
// GGML_FP16_TO_FP32 does: exactly, subnormals included, with a NaN made
// quiet (ggml's conversion ends in a float multiply, which quiets a
// signaling NaN; x448/float16 sets the quiet bit the same way).
func half(b []byte) float32 {
	return float16.Frombits(binary.LittleEndian.Uint16(b)).Float32()
}

// decodeF32: 4 bytes a weight, a little-endian IEEE binary32; copied bit
// for bit.
func decodeF32(b []byte, y []float32) {
	for i := range y {
		y[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}

// decodeF16: 2 bytes a weight, a little-endian IEEE binary16, widened
// exactly (a NaN keeps its payload and becomes quiet).
func decodeF16(b []byte, y []float32) {
	for i := range y {
		y[i] = half(b[2*i:])
	}
}

// decodeBF16: 2 bytes a weight, the high half of a binary32 whose low 16
// bits are zero. A NaN stays as it is, signaling or not (ggml shifts, it
// does not compute).
func decodeBF16(b []byte, y []float32) {
	for i := range y {
		y[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
	}
}

// decodeQ4_0: 18 bytes for 32 weights.
//
//	d  [0:2]   f16 scale
//	qs [2:18]  16 bytes of 4-bit quants: byte j holds weight j in its low
//	           nibble and weight j+16 in its high nibble
//
// y = float(q - 8) * d
func decodeQ4_0(b []byte, y []float32) {
	d := half(b)
	qs := b[2:18]
	for j := range 16 {
		y[j] = float32(int(qs[j]&0xF)-8) * d
		y[j+16] = float32(int(qs[j]>>4)-8) * d
	}
}

// decodeQ4_1: 20 bytes for 32 weights.
//
//	d  [0:2]   f16 scale
//	m  [2:4]   f16 minimum
//	qs [4:20]  4-bit quants as Q4_0 lays them out, unsigned
//
// y = float(q) * d + m, the product rounded before the add.
func decodeQ4_1(b []byte, y []float32) {
	d, m := half(b), half(b[2:])
	qs := b[4:20]
	for j := range 16 {
		y[j] = float32(float32(qs[j]&0xF)*d) + m
		y[j+16] = float32(float32(qs[j]>>4)*d) + m
	}
}

// decodeQ5_0: 22 bytes for 32 weights.
//
//	d  [0:2]   f16 scale
//	qh [2:6]   little-endian uint32: bit i is the fifth bit of weight i
//	qs [6:22]  low 4 bits as Q4_0 lays them out
//
// y = float(q - 16) * d, with q = low | fifth<<4 in [0, 32).
func decodeQ5_0(b []byte, y []float32) {
	d := half(b)
	qh := binary.LittleEndian.Uint32(b[2:])
	qs := b[6:22]
	for j := range 16 {
		h0 := (qh >> j << 4) & 0x10
		h1 := (qh >> (j + 12)) & 0x10
		y[j] = float32(int32(uint32(qs[j]&0xF)|h0)-16) * d
		y[j+16] = float32(int32(uint32(qs[j]>>4)|h1)-16) * d
	}
}

// decodeQ5_1: 24 bytes for 32 weights.
//
//	d  [0:2]   f16 scale
//	m  [2:4]   f16 minimum
//	qh [4:8]   fifth bits as in Q5_0
//	qs [8:24]  low 4 bits as Q4_0 lays them out
//
// y = float(q) * d + m, the product rounded before the add.
func decodeQ5_1(b []byte, y []float32) {
	d, m := half(b), half(b[2:])
	qh := binary.LittleEndian.Uint32(b[4:])
	qs := b[8:24]
	for j := range 16 {
		h0 := (qh >> j << 4) & 0x10
		h1 := (qh >> (j + 12)) & 0x10
		y[j] = float32(float32(uint32(qs[j]&0xF)|h0)*d) + m
		y[j+16] = float32(float32(uint32(qs[j]>>4)|h1)*d) + m
	}
}

// decodeQ8_0: 34 bytes for 32 weights.
//
//	d  [0:2]   f16 scale
//	qs [2:34]  32 int8 quants, weight j in byte j
//
// y = float(q) * d
func decodeQ8_0(b []byte, y []float32) {
	d := half(b)
	for j, q := range b[2:34] {
		y[j] = float32(int8(q)) * d
	}
}

// decodeQ2_K: 84 bytes for a super-block of 256 weights in 16 groups of 16.
//
//	scales [0:16]   one byte per group: low nibble its scale, high nibble
//	                its minimum (both unsigned 4-bit)
//	qs     [16:80]  2-bit quants: in each half of 128 weights (32 bytes),
//	                group pair j (j = 0..3) takes bits 2j..2j+1, the first
//	                group of the pair from bytes 0..15, the second from 16..31
//	d      [80:82]  f16 super-scale of the scales
//	dmin   [82:84]  f16 super-scale of the minimums
//
// For a group with scale byte sc: dl = d * float(sc & 15),
// ml = dmin * float(sc >> 4), y = dl * float(q) - ml, the product rounded
// before the subtraction.
func decodeQ2_K(b []byte, y []float32) {
	scales, qs := b[0:16], b[16:80]
	d, dmin := half(b[80:]), half(b[82:])
	is := 0
	for n := 0; n < QK_K; n += 128 {
		q := qs[n/4 : n/4+32]
		for j := range 4 {
			shift := 2 * j
			for second := range 2 {
				sc := scales[is]
				is++
				dl := d * float32(sc&0xF)
				ml := dmin * float32(sc>>4)
				out := y[n+32*j+16*second:]
				for l, v := range q[16*second : 16*second+16] {
					out[l] = float32(dl*float32((v>>shift)&3)) - ml
				}
			}
		}
	}
}

// decodeQ3_K: 110 bytes for a super-block of 256 weights in 16 groups of 16.
//
//	hmask  [0:32]    third (high) bit of each quant: weight 32k+l (k = 0..7,
//	                 l = 0..31) in bit k of byte l
//	qs     [32:96]   low 2 bits, laid out as Q2_K's
//	scales [96:108]  sixteen 6-bit scales: group g's low 4 bits are the low
//	                 (g < 8) or high (g >= 8) nibble of byte g%8, its high 2
//	                 bits are bits 2(g/4)..2(g/4)+1 of byte 8 + g%4
//	d      [108:110] f16 super-scale
//
// With q = low2 - (high bit set ? 0 : 4) in [-4, 4):
// dl = d * float(scale - 32), y = dl * float(q).
func decodeQ3_K(b []byte, y []float32) {
	hm, qs, sb := b[0:32], b[32:96], b[96:108]
	d := half(b[108:])
	is := 0
	for n := 0; n < QK_K; n += 128 {
		q := qs[n/4 : n/4+32]
		for j := range 4 {
			shift := 2 * j
			m := byte(1) << (n/128*4 + j)
			for second := range 2 {
				g := is
				is++
				sc := sb[g%8]&0xF | (sb[8+g%4]>>(2*(g/4))&3)<<4
				if g >= 8 {
					sc = sb[g%8]>>4 | (sb[8+g%4]>>(2*(g/4))&3)<<4
				}
				dl := d * float32(int(sc)-32)
				out := y[n+32*j+16*second:]
				for l := range 16 {
					k := 16*second + l
					v := int((q[k] >> shift) & 3)
					if hm[k]&m == 0 {
						v -= 4
					}
					out[l] = dl * float32(v)
				}
			}
		}
	}
}

// scaleMinK4 unpacks the 6-bit scale and minimum of group j (0..7) from
// the 12 scale bytes of Q4_K and Q5_K: groups 0..3 keep theirs in the low
// 6 bits of bytes j (scale) and j+4 (minimum); groups 4..7 in the nibbles
// of byte j+4 (low: scale, high: minimum) with the top 2 bits taken from
// the top of bytes j-4 (scale) and j (minimum).
func scaleMinK4(j int, s []byte) (sc, m byte) {
	if j < 4 {
		return s[j] & 63, s[j+4] & 63
	}
	return s[j+4]&0xF | (s[j-4]>>6)<<4, s[j+4]>>4 | (s[j]>>6)<<4
}

// decodeQ4_K: 144 bytes for a super-block of 256 weights in 8 groups of 32.
//
//	d      [0:2]    f16 super-scale of the scales
//	dmin   [2:4]    f16 super-scale of the minimums
//	scales [4:16]   eight 6-bit scales and eight 6-bit minimums (scaleMinK4)
//	qs     [16:144] 4-bit quants: each 32 bytes hold two groups, the first
//	                in the low nibbles, the second in the high ones
//
// For group g: dg = d * float(scale), mg = dmin * float(min),
// y = dg * float(q) - mg, the product rounded before the subtraction.
func decodeQ4_K(b []byte, y []float32) {
	d, dmin := half(b), half(b[2:])
	scales, qs := b[4:16], b[16:144]
	for j := range 4 {
		sc1, m1 := scaleMinK4(2*j, scales)
		sc2, m2 := scaleMinK4(2*j+1, scales)
		d1, min1 := d*float32(sc1), dmin*float32(m1)
		d2, min2 := d*float32(sc2), dmin*float32(m2)
		q := qs[32*j : 32*j+32]
		out := y[64*j : 64*j+64]
		for l, v := range q {
			out[l] = float32(d1*float32(v&0xF)) - min1
			out[l+32] = float32(d2*float32(v>>4)) - min2
		}
	}
}

// decodeQ5_K: 176 bytes for a super-block of 256 weights in 8 groups of 32.
//
//	d      [0:2]    f16 super-scale of the scales
//	dmin   [2:4]    f16 super-scale of the minimums
//	scales [4:16]   as Q4_K's
//	qh     [16:48]  fifth bits: weight 32g+l (group g) in bit g of byte l
//	qs     [48:176] low 4 bits, laid out as Q4_K's quants
//
// For group g: dg = d * float(scale), mg = dmin * float(min),
// y = dg * float(low + 16*fifth) - mg, the product rounded before the
// subtraction.
func decodeQ5_K(b []byte, y []float32) {
	d, dmin := half(b), half(b[2:])
	scales, qh, qs := b[4:16], b[16:48], b[48:176]
	for j := range 4 {
		sc1, m1 := scaleMinK4(2*j, scales)
		sc2, m2 := scaleMinK4(2*j+1, scales)
		d1, min1 := d*float32(sc1), dmin*float32(m1)
		d2, min2 := d*float32(sc2), dmin*float32(m2)
		q := qs[32*j : 32*j+32]
		out := y[64*j : 64*j+64]
		for l, v := range q {
			// The fifth bit adds 16 (C's "+ 16 if set"): bit 4 of a
			// nibble is free, so an or does it without a branch.
			h := qh[l] >> (2 * j)
			lo := v&0xF | (h&1)<<4
			hi := v>>4 | (h&2)<<3
			out[l] = float32(d1*float32(lo)) - min1
			out[l+32] = float32(d2*float32(hi)) - min2
		}
	}
}

// decodeQ6_K: 210 bytes for a super-block of 256 weights in 16 groups of 16.
//
//	ql     [0:128]   low 4 bits: in each half of 128 weights (64 bytes),
//	                 weights l and l+64 in the low and high nibble of byte
//	                 l, weights l+32 and l+96 in those of byte l+32
//	                 (l = 0..31)
//	qh     [128:192] high 2 bits: in each half (32 bytes), weight l + 32k
//	                 in bits 2k..2k+1 of byte l
//	scales [192:208] int8 scale per group of 16
//	d      [208:210] f16 super-scale
//
// With q = (low | high<<4) - 32 in [-32, 32): y = (d * float(scale)) * float(q).
func decodeQ6_K(b []byte, y []float32) {
	d := half(b[208:])
	for h := range 2 {
		ql := b[64*h : 64*h+64]
		qh := b[128+32*h : 128+32*h+32]
		sc := b[192+8*h : 192+8*h+8]
		out := y[128*h : 128*h+128]
		for l := range 32 {
			is := l / 16
			q1 := int(ql[l]&0xF|(qh[l]&3)<<4) - 32
			q2 := int(ql[l+32]&0xF|(qh[l]>>2&3)<<4) - 32
			q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
			q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
			out[l] = d * float32(int8(sc[is])) * float32(q1)
			out[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
			out[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
			out[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
		}
	}
}
