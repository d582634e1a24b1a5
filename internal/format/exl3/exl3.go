// Package exl3 decodes the trellis tiles of exllamav3's EXL3 format: the
// inner weights Ŵ of a quantized linear layer, bit for bit as exllamav3's
// kernels reconstruct them (v1.4.1: codebook.cuh, exl3_dq.cuh, the
// tensor-core order of quantize.py), and packs states back into tiles.
//
// A layer of k inputs and n outputs (each padded to a multiple of 128)
// stores trellis (k/16, n/16, 16·K) int16: one tile of 16×16 weights per
// (k/16, n/16), K bits a weight (1…8). The dense weight is
// diag(suh)·H·Ŵ·H·diag(svh) with H the normalised 128-wide Hadamard;
// the transforms round differently in each of exllamav3's paths, so Ŵ is
// the bit-exact target and the rest is compared within a tolerance.
//
// A tile's 16·K words are read as 8·K little-endian uint32s, u[i] =
// w[2i] | w[2i+1]<<16, and those as one bitstream, most significant bit
// first. The state of position p (0…255) is the 16 bits of the stream
// that end at bit (p+1)·K, the stream read circularly (the trellis is
// tail-biting); a codebook maps a state to an fp16 value; position p is
// element Position(p) of the tile. ReadLayer reads a layer's tensors from
// a safetensors file; Layer.Inner and Layer.Dense decode it; EncodeTile
// finds a tile for given weights.
package exl3

import (
	"fmt"
	"math"
)

// TileWeights is the number of weights in a tile: 16×16.
const TileWeights = 256

// Codebook maps a trellis state to a weight: exllamav3's decode_3inst<cb>.
type Codebook int

const (
	Inst3 Codebook = iota // "3INST": the first default
	MCG                   // the default from October 2025 (a mcg tensor)
	MUL1                  // the default from July 2026 (a mul1 tensor)
)

func (cb Codebook) String() string {
	switch cb {
	case Inst3:
		return "3inst"
	case MCG:
		return "mcg"
	case MUL1:
		return "mul1"
	}
	return fmt.Sprintf("codebook %d", int(cb))
}

// The MUL1 codebook's fp16 constants: a sum of bytes in 1024…2044 times
// mul1Inv plus mul1Bias.
const (
	mul1Inv  = 0x1EEE // 0.00676727294921875
	mul1Bias = 0xC931 // −10.3828125
)

// Decode is state s's weight as fp16 bits. 3INST and MCG multiply the
// state (and 3INST adds) in 32 bits, keep the fp16 exponent and mantissa
// bits the mask leaves of each half, xor in the bits of 0.75 twice, and
// add the two halves as fp16 (one rounding: the sum of two fp16 values is
// exact in float64). MUL1 sums the product's four bytes and scales the
// sum with one fp16 fused multiply-add.
func (cb Codebook) Decode(s uint16) uint16 {
	switch cb {
	case MUL1:
		x := uint32(s) * 0x83DCD12D
		sum := x&0xFF + x>>8&0xFF + x>>16&0xFF + x>>24
		return toF16(float64(1024+sum)*f16(mul1Inv) + f16(mul1Bias))
	case MCG:
		return halves(uint32(s) * 0xCBAC1FED)
	}
	return halves(uint32(s)*89226354 + 64248484)
}

func halves(x uint32) uint16 {
	x = x&0x8FFF8FFF ^ 0x3B603B60
	return toF16(f16(uint16(x)) + f16(uint16(x>>16)))
}

// States are a tile's 256 trellis states; tile is its 16·k words.
func States(tile []uint16, k int) ([TileWeights]uint16, error) {
	var s [TileWeights]uint16
	if k < 1 || k > 8 {
		return s, fmt.Errorf("exl3: %d bits per weight: want 1 to 8", k)
	}
	if len(tile) != 16*k {
		return s, fmt.Errorf("exl3: a tile of %d bits per weight is %d int16 words, got %d", k, 16*k, len(tile))
	}
	n := TileWeights * k // bits in the stream
	bit := func(b int) uint16 {
		b = (b%n + n) % n
		u := uint32(tile[b>>5<<1]) | uint32(tile[b>>5<<1|1])<<16
		return uint16(u >> (31 - b&31) & 1)
	}
	// The state before position 0 ends the stream; each next state takes
	// k more bits.
	var st uint16
	for b := -16; b < 0; b++ {
		st = st<<1 | bit(b)
	}
	for p := range s {
		for b := p * k; b < (p+1)*k; b++ {
			st = st<<1 | bit(b)
		}
		s[p] = st
	}
	return s, nil
}

// Position is tile position p's row (input) and column (output): the
// order of a tensor core's fragments, eight positions a thread.
func Position(p int) (row, col int) {
	t, e := p/8, p%8
	return 2*(t%4) + e&1 + 8*(e>>1&1), t/4 + 8*(e>>2)
}

// DecodeTile is a tile's 16×16 weights as fp16 bits, row-major (rows
// are inputs).
func DecodeTile(tile []uint16, k int, cb Codebook) ([TileWeights]uint16, error) {
	var w [TileWeights]uint16
	s, err := States(tile, k)
	if err != nil {
		return w, err
	}
	for p, st := range s {
		r, c := Position(p)
		w[r*16+c] = cb.Decode(st)
	}
	return w, nil
}

// Pack lays out states as a tile of k bits per weight: the inverse of
// States for a tail-biting path, where each state's high 16−k bits are
// the bits before it (the low bits of the states before it). It packs
// each state's low k bits in order.
func Pack(states [TileWeights]uint16, k int) ([]uint16, error) {
	if k < 1 || k > 8 {
		return nil, fmt.Errorf("exl3: %d bits per weight: want 1 to 8", k)
	}
	u := make([]uint32, 8*k)
	for p, st := range states {
		for i := range k {
			if st>>(k-1-i)&1 == 1 {
				b := p*k + i
				u[b>>5] |= 1 << (31 - b&31)
			}
		}
	}
	tile := make([]uint16, 16*k)
	for i, x := range u {
		tile[2*i], tile[2*i+1] = uint16(x), uint16(x>>16)
	}
	return tile, nil
}

// f16 is fp16 bits as a float64.
func f16(h uint16) float64 {
	exp, man := int(h>>10&0x1F), float64(h&0x3FF)
	var v float64
	switch exp {
	case 0:
		v = math.Ldexp(man, -24)
	case 0x1F:
		v = math.Inf(1)
		if man != 0 {
			v = math.NaN()
		}
	default:
		v = math.Ldexp(1024+man, exp-25)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

// toF16 rounds x to the nearest fp16, ties to even, as fp16 arithmetic
// does: subnormals below 2⁻¹⁴, infinity from 65520 up.
func toF16(x float64) uint16 {
	var sign uint16
	if math.Signbit(x) {
		sign, x = 0x8000, -x
	}
	switch {
	case math.IsNaN(x):
		return 0x7E00
	case x >= 65520:
		return sign | 0x7C00
	}
	// x = m·2^e with m a whole number of 11 bits (10 in subnormals).
	_, e := math.Frexp(x) // x = f·2^e, f in [0.5, 1)
	e = max(e-11, -24)
	m := math.RoundToEven(math.Ldexp(x, -e))
	if m >= 2048 { // rounded up into the next binade
		m, e = m/2, e+1
	}
	if m < 1024 { // subnormal (e = −24)
		return sign | uint16(m)
	}
	return sign | uint16(e+25)<<10 | uint16(m-1024)
}

// Layer is one quantized linear layer's tensors as exllamav3 stores them:
// Trellis (In/16, Out/16, 16·K) int16 words, Suh (In) and Svh (Out) fp16
// bits, In and Out multiples of 128.
type Layer struct {
	In, Out  int
	K        int
	Codebook Codebook
	Trellis  []uint16
	Suh, Svh []uint16
}

// Inner is the layer's Ŵ (In, Out) as fp16 bits, row-major: every tile
// decoded into place.
func (l Layer) Inner() ([]uint16, error) {
	if l.In <= 0 || l.Out <= 0 || l.In%128 != 0 || l.Out%128 != 0 {
		return nil, fmt.Errorf("exl3: a layer of %d×%d: both want a positive multiple of 128", l.In, l.Out)
	}
	per := 16 * l.K
	if len(l.Trellis) != l.In/16*l.Out/16*per {
		return nil, fmt.Errorf("exl3: trellis of %d words for %d×%d at %d bits, want %d", len(l.Trellis), l.In, l.Out, l.K, l.In/16*l.Out/16*per)
	}
	w := make([]uint16, l.In*l.Out)
	for tk := range l.In / 16 {
		for tn := range l.Out / 16 {
			at := (tk*(l.Out/16) + tn) * per
			tile, err := DecodeTile(l.Trellis[at:at+per], l.K, l.Codebook)
			if err != nil {
				return nil, err
			}
			for r := range 16 {
				copy(w[(16*tk+r)*l.Out+16*tn:], tile[16*r:16*r+16])
			}
		}
	}
	return w, nil
}

// Dense is the layer's weight W (In, Out), y = x·W, as exllamav3's
// get_weight_tensor builds it: diag(suh)·H·Ŵ·H·diag(svh), H the 128-wide
// Hadamard normalised by 1/√128 on each block of 128. It rounds to fp16
// where that does (after each Hadamard and each scaling) but sums its
// Hadamards in its own order, so it matches exllamav3's to fp16
// rounding, not bit for bit: Inner is the exact part.
func (l Layer) Dense() ([]float32, error) {
	w, err := l.reconstruct(round16)
	out := make([]float32, len(w))
	for i, v := range w {
		out[i] = float32(v)
	}
	return out, err
}

// Exact is the layer's W (In, Out), y = x·W, computed in float64 from
// the stored values with no rounding between the steps: the reference
// both engines' products are held to. (Dense rounds where exllamav3's
// fp16 kernels do; no single path of exllamav3 is bit-exact.)
func (l Layer) Exact() ([]float64, error) {
	return l.reconstruct(func(x float64) float64 { return x })
}

// reconstruct is diag(suh)·H·Ŵ·H·diag(svh) in float64, round applied
// after each Hadamard and each scaling.
func (l Layer) reconstruct(round func(float64) float64) ([]float64, error) {
	inner, err := l.Inner()
	if err != nil {
		return nil, err
	}
	if len(l.Suh) != l.In || len(l.Svh) != l.Out {
		return nil, fmt.Errorf("exl3: suh of %d and svh of %d for a layer of %d×%d", len(l.Suh), len(l.Svh), l.In, l.Out)
	}
	w := make([]float64, len(inner))
	for i, h := range inner {
		w[i] = f16(h)
	}
	col := make([]float64, l.In)
	for c := range l.Out { // H·Ŵ: each column, along the inputs
		for r := range l.In {
			col[r] = w[r*l.Out+c]
		}
		hadamard(col)
		for r := range l.In {
			w[r*l.Out+c] = round(round(col[r]) * f16(l.Suh[r]))
		}
	}
	for r := range l.In { // ·H: each row, along the outputs
		row := w[r*l.Out : (r+1)*l.Out]
		hadamard(row)
		for c, v := range row {
			row[c] = round(round(v) * f16(l.Svh[c]))
		}
	}
	return w, nil
}

// hadamard applies the normalised 128-wide Hadamard to each block of 128
// of x, in place: H[i][j] = (−1)^popcount(i&j)/√128.
func hadamard(x []float64) {
	for b := 0; b < len(x); b += 128 {
		v := x[b : b+128]
		for h := 1; h < 128; h *= 2 {
			for i := 0; i < 128; i += 2 * h {
				for j := i; j < i+h; j++ {
					v[j], v[j+h] = v[j]+v[j+h], v[j]-v[j+h]
				}
			}
		}
		for i := range v {
			v[i] /= math.Sqrt(128)
		}
	}
}

func round16(x float64) float64 { return f16(toF16(x)) }
