package compressed

import "math"

// E4M3 is the value of each FP8 E4M3FN byte (sign, 4 exponent bits of
// bias 7, 3 mantissa bits; no infinities; 0x7F and 0xFF are NaN). It is
// the lookup table of float-quantized weights and of NVFP4's scales.
var E4M3 = func() [256]float32 {
	var t [256]float32
	for b := range 256 {
		e, m := b>>3&15, b&7
		var v float64
		switch {
		case e == 15 && m == 7:
			v = math.NaN()
		case e == 0:
			v = float64(m) / 8 * math.Ldexp(1, -6)
		default:
			v = (1 + float64(m)/8) * math.Ldexp(1, e-7)
		}
		if b&0x80 != 0 {
			v = -v
		}
		t[b] = float32(v)
	}
	return t
}()

// E2M1 is the value of each FP4 E2M1 nibble (sign in bit 3): NVFP4's
// lookup table.
var E2M1 = [16]float32{0, 0.5, 1, 1.5, 2, 3, 4, 6, -0, -0.5, -1, -1.5, -2, -3, -4, -6}

// isNaNE4M3 says whether b is one of E4M3FN's two NaN codes.
func isNaNE4M3(b byte) bool { return b&0x7F == 0x7F }

// nearest is the index of the value of mags (ascending, from 0) nearest
// a ≥ 0, a tie going to the even index (the even mantissa): the rounding
// of torch's cast to float8_e4m3fn and of compressed-tensors' cast_to_fp4.
// a beyond the last value takes the last (the callers clamp first).
func nearest(mags []float32, a float64) int {
	hi := len(mags) - 1
	lo := 0
	for lo < hi { // largest i with mags[i] <= a
		mid := (lo + hi + 1) / 2
		if float64(mags[mid]) <= a {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo == len(mags)-1 {
		return lo
	}
	d0, d1 := a-float64(mags[lo]), float64(mags[lo+1])-a
	if d1 < d0 || (d1 == d0 && lo%2 == 1) {
		return lo + 1
	}
	return lo
}

// ToE4M3 rounds x to the nearest E4M3FN byte, ties to even, saturating
// at ±448 (compressed-tensors clamps to ±448 before casting).
func ToE4M3(x float64) byte {
	b := byte(nearest(E4M3[:0x7F], math.Abs(x)))
	if x < 0 {
		b |= 0x80
	}
	return b
}

// toE2M1 rounds x to an E2M1 nibble as cast_to_fp4 does (clamped to
// ±6); a negative x that rounds to 0 keeps its sign (−0, code 8), as the
// packer's signbit does.
func toE2M1(x float64) byte {
	b := byte(nearest(E2M1[:8], math.Abs(x)))
	if x < 0 {
		b |= 8
	}
	return b
}
