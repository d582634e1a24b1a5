package ggml

import (
	"encoding/binary"
	"math"
)

// The i-quants, the ternary types and MXFP4. Their decoders follow the
// same rule as dequantize.go's: the float32 operations of ggml-base's
// dequantize_row_*, in its order. The grids and value tables they index
// are tables.go's, read back from the library itself (see its header).
//
// A grid entry packs 8 (or, in the IQ3 grids, 4) weight magnitudes, one a
// byte, weight j in byte j (little-endian). A sign byte from ksigns has bit
// j set when weight j of an 8-weight run is negative; its index is 7 bits
// (the eighth sign is the parity, which the table supplies). A sign is
// applied as ggml's compiled code does: a flip of the sign bit (signed).

// gridByte is magnitude j of a grid entry.
func gridByte(e uint64, j int) float32 { return float32(uint8(e >> (8 * j))) }

// signed is v with weight j's sign under sign byte s. ggml writes it as
// a product with ±1, which its compiler turns into a flip of the sign bit:
// a NaN's sign flips too, so a negation it is.
func signed(v float32, s uint8, j int) float32 {
	if s>>j&1 != 0 {
		return -v
	}
	return v
}

// decodeIQ2_XXS: 66 bytes for 256 weights in 8 groups of 32.
//
//	d  [0:2]   f16 scale
//	qs [2:66]  per group 8 bytes: a u32 of four 8-bit grid indices (one
//	           per run of 8 weights), then a u32 holding four 7-bit sign
//	           indices (bits 7l..7l+6) and a 4-bit scale s (bits 28..31)
//
// db = d * (0.5 + s) * 0.25; y = db * grid * sign.
func decodeIQ2_XXS(b []byte, y []float32) {
	d := half(b)
	for ib := range 8 {
		q := b[2+8*ib:]
		aux := binary.LittleEndian.Uint32(q[4:])
		db := d * (0.5 + float32(aux>>28)) * 0.25
		for l := range 4 {
			e := iq2xxsGrid[q[l]]
			s := ksigns[aux>>(7*l)&127]
			out := y[32*ib+8*l:]
			for j := range 8 {
				out[j] = signed(db*gridByte(e, j), s, j)
			}
		}
	}
}

// decodeIQ2_XS: 74 bytes for 256 weights in 8 groups of 32.
//
//	d      [0:2]    f16 scale
//	qs     [2:66]   a u16 per run of 8: a 9-bit grid index, then a 7-bit
//	                sign index
//	scales [66:74]  a byte per group: low nibble the scale of its first
//	                16 weights, high nibble of the last 16
//
// db = d * (0.5 + scale) * 0.25; y = db * grid * sign.
func decodeIQ2_XS(b []byte, y []float32) {
	d := half(b)
	for ib := range 8 {
		sc := b[66+ib]
		db := [2]float32{d * (0.5 + float32(sc&0xF)) * 0.25, d * (0.5 + float32(sc>>4)) * 0.25}
		for l := range 4 {
			v := binary.LittleEndian.Uint16(b[2+8*ib+2*l:])
			e := iq2xsGrid[v&511]
			s := ksigns[v>>9]
			out := y[32*ib+8*l:]
			for j := range 8 {
				out[j] = signed(db[l/2]*gridByte(e, j), s, j)
			}
		}
	}
}

// decodeIQ2_S: 82 bytes for 256 weights in 8 groups of 32.
//
//	d      [0:2]    f16 scale
//	qs     [2:34]   the low 8 bits of a 10-bit grid index per run of 8
//	signs  [34:66]  a sign byte per run of 8 (no table: all 8 bits)
//	qh     [66:74]  a byte per group: bits 2l..2l+1 are run l's top 2 bits
//	scales [74:82]  as IQ2_XS's
func decodeIQ2_S(b []byte, y []float32) {
	d := half(b)
	for ib := range 8 {
		sc := b[74+ib]
		db := [2]float32{d * (0.5 + float32(sc&0xF)) * 0.25, d * (0.5 + float32(sc>>4)) * 0.25}
		qh := int(b[66+ib])
		for l := range 4 {
			e := iq2sGrid[int(b[2+4*ib+l])|qh<<(8-2*l)&0x300]
			s := b[34+4*ib+l]
			out := y[32*ib+8*l:]
			for j := range 8 {
				out[j] = signed(db[l/2]*gridByte(e, j), s, j)
			}
		}
	}
}

// decodeIQ3_XXS: 98 bytes for 256 weights in 8 groups of 32.
//
//	d  [0:2]    f16 scale
//	qs [2:66]   an 8-bit index into iq3xxsGrid (4 magnitudes) per 4 weights
//	ss [66:98]  a u32 per group: four 7-bit sign indices and a 4-bit scale
//	            s, as IQ2_XXS's second word
//
// db = d * (0.5 + s) * 0.5; y = db * grid * sign.
func decodeIQ3_XXS(b []byte, y []float32) {
	d := half(b)
	for ib := range 8 {
		aux := binary.LittleEndian.Uint32(b[66+4*ib:])
		db := d * (0.5 + float32(aux>>28)) * 0.5
		for l := range 4 {
			s := ksigns[aux>>(7*l)&127]
			e := uint64(iq3xxsGrid[b[2+8*ib+2*l]]) | uint64(iq3xxsGrid[b[3+8*ib+2*l]])<<32
			out := y[32*ib+8*l:]
			for j := range 8 {
				out[j] = signed(db*gridByte(e, j), s, j)
			}
		}
	}
}

// decodeIQ3_S: 110 bytes for 256 weights in 8 groups of 32.
//
//	d      [0:2]     f16 scale
//	qs     [2:66]    the low 8 bits of a 9-bit iq3sGrid index per 4 weights
//	qh     [66:74]   a byte per group: bit k is its k-th index's ninth bit
//	signs  [74:106]  a sign byte per run of 8
//	scales [106:110] a nibble per group (low nibble first)
//
// db = d * float(1 + 2*scale); y = db * grid * sign.
func decodeIQ3_S(b []byte, y []float32) {
	d := half(b)
	for ib := range 8 {
		db := d * float32(1+2*int(b[106+ib/2]>>(4*(ib%2))&0xF))
		qh := int(b[66+ib])
		for l := range 4 {
			i0 := int(b[2+8*ib+2*l]) | qh<<(8-2*l)&256
			i1 := int(b[3+8*ib+2*l]) | qh<<(7-2*l)&256
			e := uint64(iq3sGrid[i0]) | uint64(iq3sGrid[i1])<<32
			s := b[74+4*ib+l]
			out := y[32*ib+8*l:]
			for j := range 8 {
				out[j] = signed(db*gridByte(e, j), s, j)
			}
		}
	}
}

// iq1Delta is IQ1_S's and IQ1_M's shift of every grid value, ±1/8.
const iq1Delta = 0.125

// iq1Run writes 8 weights dl * (grid + delta) of iq1sGrid entry i, whose
// bytes are int8 in {-1, 0, 1}.
func iq1Run(out []float32, i int, dl, delta float32) {
	e := iq1sGrid[i]
	for j := range 8 {
		out[j] = dl * (float32(int8(e>>(8*j))) + delta)
	}
}

// decodeIQ1_S: 50 bytes for 256 weights in 8 groups of 32.
//
//	d  [0:2]    f16 scale
//	qs [2:34]   the low 8 bits of an 11-bit iq1sGrid index per run of 8
//	qh [34:50]  a u16 per group: bits 3l..3l+2 run l's top 3 bits, bits
//	            12..14 a scale s, bit 15 the sign of delta
//
// dl = d * float(2s + 1); y = dl * (grid + delta).
func decodeIQ1_S(b []byte, y []float32) {
	d := half(b)
	for ib := range 8 {
		qh := int(binary.LittleEndian.Uint16(b[34+2*ib:]))
		dl := d * float32(2*(qh>>12&7)+1)
		delta := float32(iq1Delta)
		if qh&0x8000 != 0 {
			delta = -iq1Delta
		}
		for l := range 4 {
			iq1Run(y[32*ib+8*l:], int(b[2+4*ib+l])|(qh>>(3*l)&7)<<8, dl, delta)
		}
	}
}

// decodeIQ1_M: 56 bytes for 256 weights in 8 groups of 32, without a
// separate f16 scale.
//
//	qs     [0:32]   low 8 bits of an 11-bit iq1sGrid index per run of 8
//	qh     [32:48]  a byte per two runs: the low nibble for the first, the
//	                high for the second, each 3 top index bits and (bit 3)
//	                the sign of its delta
//	scales [48:56]  four u16: group ib's 3-bit scales for its halves at
//	                bits 6(ib%2) and 6(ib%2)+3 of u16 ib/2; the top nibbles
//	                of the four, in order, are the f16 super-scale d
//
// dl = d * float(2s + 1); y = dl * (grid + delta).
func decodeIQ1_M(b []byte, y []float32) {
	var sc [4]int
	for i := range sc {
		sc[i] = int(binary.LittleEndian.Uint16(b[48+2*i:]))
	}
	hd := uint16(sc[0]>>12 | sc[1]>>8&0xF0 | sc[2]>>4&0xF00 | sc[3]&0xF000)
	d := half([]byte{byte(hd), byte(hd >> 8)})
	for ib := range 8 {
		s := sc[ib/2] >> (6 * (ib % 2))
		dl := [2]float32{d * float32(2*(s&7)+1), d * float32(2*(s>>3&7)+1)}
		for l := range 4 {
			h := int(b[32+2*ib+l/2]) >> (4 * (l % 2))
			delta := float32(iq1Delta)
			if h&8 != 0 {
				delta = -iq1Delta
			}
			iq1Run(y[32*ib+8*l:], int(b[4*ib+l])|(h&7)<<8, dl[l/2], delta)
		}
	}
}

// decodeIQ4_NL: 18 bytes for 32 weights, laid out as Q4_0 with each
// nibble an index into kvaluesIQ4NL: y = d * kvalue.
func decodeIQ4_NL(b []byte, y []float32) {
	d := half(b)
	for j, q := range b[2:18] {
		y[j] = d * float32(kvaluesIQ4NL[q&0xF])
		y[j+16] = d * float32(kvaluesIQ4NL[q>>4])
	}
}

// decodeIQ4_XS: 136 bytes for 256 weights in 8 groups of 32.
//
//	d        [0:2]    f16 scale
//	scales_h [2:4]    u16: bits 2ib..2ib+1 are group ib's scale's top bits
//	scales_l [4:8]    a nibble per group (low nibble first): its low 4 bits
//	qs       [8:136]  16 bytes per group, laid out as IQ4_NL's
//
// dl = d * float(scale - 32); y = dl * kvalue.
func decodeIQ4_XS(b []byte, y []float32) {
	d := half(b)
	sh := int(binary.LittleEndian.Uint16(b[2:]))
	for ib := range 8 {
		ls := int(b[4+ib/2]>>(4*(ib%2))&0xF) | (sh>>(2*ib)&3)<<4
		dl := d * float32(ls-32)
		out := y[32*ib:]
		for j, q := range b[8+16*ib : 24+16*ib] {
			out[j] = dl * float32(kvaluesIQ4NL[q&0xF])
			out[j+16] = dl * float32(kvaluesIQ4NL[q>>4])
		}
	}
}

// tq1Trit is the n-th base-3 digit (most significant first) of a byte
// holding up to 5 trits as ceil(x * 256 / 243): the byte times 3^n keeps
// the digit in its top bits, which times 3 over 256 reads, minus 1.
func tq1Trit(q byte, n int) float32 {
	p := q * [5]byte{1, 3, 9, 27, 81}[n] // wraps, as ggml's uint8_t product
	return float32(int(uint16(p)*3>>8) - 1)
}

// decodeTQ1_0: 54 bytes for 256 weights of -1, 0 or 1, 5 to a byte.
//
//	qs [0:48]   weights 0..159: digit n of byte m is weight 32n+m (bytes
//	            0..31); weights 160..239: digit n of byte 32+m is weight
//	            160+16n+m (bytes 32..47)
//	qh [48:52]  weights 240..255: digit n of byte j is weight 240+4n+j
//	d  [52:54]  f16 scale
//
// y = float(trit) * d.
func decodeTQ1_0(b []byte, y []float32) {
	d := half(b[52:])
	for n := range 5 {
		for m := range 32 {
			y[32*n+m] = tq1Trit(b[m], n) * d
		}
		for m := range 16 {
			y[160+16*n+m] = tq1Trit(b[32+m], n) * d
		}
	}
	for n := range 4 {
		for j := range 4 {
			y[240+4*n+j] = tq1Trit(b[48+j], n) * d
		}
	}
}

// decodeTQ2_0: 66 bytes for 256 weights of -1, 0 or 1 stored +1 in 2 bits.
//
//	qs [0:64]   in each half of 128 weights (32 bytes), weight 32l+m in
//	            bits 2l..2l+1 of byte m
//	d  [64:66]  f16 scale
//
// y = float(q - 1) * d.
func decodeTQ2_0(b []byte, y []float32) {
	d := half(b[64:])
	for h := range 2 {
		for l := range 4 {
			for m := range 32 {
				y[128*h+32*l+m] = float32(int(b[32*h+m]>>(2*l)&3)-1) * d
			}
		}
	}
}

// E8M0Half is the MXFP4 block scale e as ggml reads it, halved
// (GGML_E8M0_TO_FP32_HALF): 2^(e-128), the two smallest as subnormals,
// the largest 2^127 (E8M0's NaN code is not one here). It is halved
// because kvaluesMXFP4 holds E2M1's values doubled.
func E8M0Half(e byte) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// decodeMXFP4: 17 bytes for 32 weights.
//
//	e  [0]     E8M0 scale
//	qs [1:17]  E2M1 codes laid out as Q4_0's nibbles
//
// y = kvalue * E8M0Half(e).
func decodeMXFP4(b []byte, y []float32) {
	d := E8M0Half(b[0])
	for j, q := range b[1:17] {
		y[j] = float32(kvaluesMXFP4[q&0xF]) * d
		y[j+16] = float32(kvaluesMXFP4[q>>4]) * d
	}
}

// A Table is one of the lookup tables that the i-quants and MXFP4 index,
// as the GPU kernels take it: Words little-endian u32 words, a grid's
// 8-byte entries two words each (low first), 4-byte ones one word, the
// 1-byte tables (ksigns; the int8 value tables, as two's complement) four
// entries a word.
type Table struct {
	Name  string
	Words []uint32
}

// Tables are every table, in a fixed order: iq2xxs_grid, iq2xs_grid,
// iq2s_grid, iq3xxs_grid, iq3s_grid, iq1s_grid, ksigns, kvalues_iq4nl,
// kvalues_mxfp4 (ggml's names).
func Tables() []Table {
	w64 := func(e []uint64) []uint32 {
		w := make([]uint32, 0, 2*len(e))
		for _, v := range e {
			w = append(w, uint32(v), uint32(v>>32))
		}
		return w
	}
	w8 := func(e []byte) []uint32 {
		w := make([]uint32, len(e)/4)
		for i, v := range e {
			w[i/4] |= uint32(v) << (8 * (i % 4))
		}
		return w
	}
	i8 := func(e [16]int8) []byte {
		b := make([]byte, len(e))
		for i, v := range e {
			b[i] = byte(v)
		}
		return b
	}
	return []Table{
		{"iq2xxs_grid", w64(iq2xxsGrid[:])}, {"iq2xs_grid", w64(iq2xsGrid[:])}, {"iq2s_grid", w64(iq2sGrid[:])},
		{"iq3xxs_grid", append([]uint32(nil), iq3xxsGrid[:]...)}, {"iq3s_grid", append([]uint32(nil), iq3sGrid[:]...)},
		{"iq1s_grid", w64(iq1sGrid[:])}, {"ksigns", w8(ksigns[:])},
		{"kvalues_iq4nl", w8(i8(kvaluesIQ4NL))}, {"kvalues_mxfp4", w8(i8(kvaluesMXFP4))},
	}
}
