// Package acts rounds a product's activations as the engines that run
// hub quantizations do before multiplying (vLLM's kernels): each token's
// row quantized on the fly to 8-bit integers, FP8 (E4M3) or NVFP4 (E2M1
// in blocks of 16), and multiplied back by its scales, so that a float
// kernel given the result computes what the integer or FP8/FP4 kernel
// computes. Every step is a float32 operation that IEEE rounds exactly
// (a product, a quotient, a maximum, a round to nearest even), so that
// lookup.wgsl's quantize pass gives the same bits.
package acts

import (
	"fmt"
	"math"
)

// The activation quantizations (lookup.Format.Acts's names).
const (
	// Int8 is compressed-tensors' W8A8 (vLLM's dynamic scaled_int8_quant):
	// per token s = absmax/127, q = x·(127/absmax) rounded to nearest,
	// ties to even (CUDA's cvt.rni.sat.s8.f32, ROCm's nearbyint), clamped
	// to [-128, 127]; x' = q·s. An all-zero row stays zero.
	Int8 = "int8"
	// FP8 is FP8-dynamic (vLLM's dynamic per-token scaled_fp8_quant): s =
	// max(absmax/448, 1/(448·512)), q = E4M3(x·(1/s)) after clamping to
	// ±448, rounded to nearest even; x' = q·s.
	FP8 = "fp8"
	// FP4 is NVFP4: a global scale G = 448·6/absmax, per 16 consecutive
	// values an E4M3 block scale b = E4M3(G·(blockmax/6)) (saturating),
	// d = b/G, q = E2M1(x/d) (nearest even, saturating at 6); x' = q·d.
	// The absmax is the token's row, not the whole batch's as in the
	// static NVFP4 of a checkpoint's input_global_scale: per token, a
	// token's products do not depend on which tokens share its batch, so
	// that KV-cache decode and teacher forcing still agree bit for bit.
	FP4 = "fp4"
)

// Check refuses a name that is none of the above ("" is none).
func Check(mode string) error {
	switch mode {
	case "", Int8, FP8, FP4:
		return nil
	}
	return fmt.Errorf("activation quantization %q: want %s, %s or %s", mode, Int8, FP8, FP4)
}

// Rows rounds T rows of k activations (T, k) in place, each on its own.
func Rows(mode string, x []float32, T, k int) {
	for t := range T {
		Row(mode, x[t*k:(t+1)*k])
	}
}

// Row rounds one token's activations in place; mode "" leaves them.
func Row(mode string, x []float32) {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs(v))
	}
	switch mode {
	case Int8:
		if amax == 0 {
			return
		}
		inv, s := 127/amax, amax/127
		for i, v := range x {
			q := float32(math.RoundToEven(float64(v * inv)))
			x[i] = min(max(q, -128), 127) * s
		}
	case FP8:
		s := max(amax/448, float32(1)/(448*512))
		inv := 1 / s
		for i, v := range x {
			x[i] = E4M3(min(max(v*inv, -448), 448)) * s
		}
	case FP4:
		if amax == 0 {
			return
		}
		g := 448 * 6 / amax
		for b := 0; b < len(x); b += 16 {
			blk := x[b:min(len(x), b+16)]
			var bmax float32
			for _, v := range blk {
				bmax = max(bmax, abs(v))
			}
			d := E4M3(min(g*(bmax/6), 448)) / g
			for i, v := range blk {
				if d == 0 {
					blk[i] = 0
					continue
				}
				blk[i] = E2M1(v/d) * d
			}
		}
	}
}

// E4M3 is v rounded to the nearest E4M3 (fn: no infinities, largest 448)
// value, ties to even; |v| must be at most 448 (callers clamp). Below
// 2^-6 the values are subnormal, multiples of 2^-9; from 2^e on (e ≥ -6)
// multiples of 2^(e-3).
func E4M3(v float32) float32 {
	a := abs(v)
	e := exponent(a)
	q := float32(math.Ldexp(1, max(e, -6)-3))
	r := float32(math.RoundToEven(float64(a/q))) * q
	return math.Float32frombits(math.Float32bits(r) | math.Float32bits(v)&(1<<31))
}

// E2M1 is v rounded to the nearest E2M1 value (0, 0.5, 1, 1.5, 2, 3, 4,
// 6, signed), ties to even, saturating at ±6.
func E2M1(v float32) float32 {
	a := min(abs(v), 6)
	q := float32(0.5)
	switch {
	case a >= 4:
		q = 2
	case a >= 2:
		q = 1
	}
	r := min(float32(math.RoundToEven(float64(a/q)))*q, 6)
	return math.Float32frombits(math.Float32bits(r) | math.Float32bits(v)&(1<<31))
}

// exponent is floor(log2 a) for a normal a > 0, and below -126 for 0 and
// subnormals (which E4M3 rounds to 0 anyway).
func exponent(a float32) int { return int(math.Float32bits(a)>>23) - 127 }

func abs(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }
