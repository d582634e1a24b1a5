// Package exp64 is e^x in float64 with the same bits on every platform,
// in Go and in AVX-512, and the vector kernels built on it: the CPU
// engine's SiLU and softmax (Shift), and the sums of the margins' KL
// divergence (KLSums). engine.wasm and the page run the Go, a native
// amd64 build the assembly, and their results agree bit for bit.
package exp64

import "math"

// Exp is e^x by fdlibm's method (e_exp.c), the one Go's math package
// runs where it has no assembly (engine.wasm), each product rounded
// before its sum so that no compiler fuses one: Go on every platform and
// the vector kernels (exp_amd64.s) give the same bits. math.Exp on amd64
// runs assembly of another method, an ulp apart now and then, which the
// float64 activations (SiLU, softmax) would carry to engine.wasm's
// float32 results at rounding boundaries.
//
// x = k·ln2 + r with |r| ≤ ln2/2 (k rounded half away from zero, ln2 in
// two parts, r = hi − lo); e^r from a degree-5 rational approximation in
// t = r², c = r − t·P(t), e^r = 1 − ((lo − r·c/(2 − c)) − hi); then
// scaled by 2^k.
func Exp(x float64) float64 {
	const (
		ln2Hi     = 6.93147180369123816490e-01
		ln2Lo     = 1.90821492927058770002e-10
		log2e     = 1.44269504088896338700e+00
		overflow  = 7.09782712893383973096e+02
		underflow = -7.45133219101941108420e+02
		nearZero  = 1.0 / (1 << 28)

		p1 = 1.66666666666666657415e-01
		p2 = -2.77777777770155933842e-03
		p3 = 6.61375632143793436117e-05
		p4 = -1.65339022054652515390e-06
		p5 = 4.13813679705723846039e-08
	)
	switch {
	case x != x:
		return x
	case x > overflow:
		return math.Inf(1)
	case x < underflow:
		return 0
	case -nearZero < x && x < nearZero:
		return 1 + x
	}
	half := 0.5
	if x < 0 {
		half = -0.5
	}
	k := int(float64(log2e*x) + half)
	fk := float64(k)
	hi := x - float64(fk*ln2Hi)
	lo := fk * ln2Lo
	r := hi - lo
	t := r * r
	p := float64(t*p5) + p4
	p = float64(t*p) + p3
	p = float64(t*p) + p2
	p = float64(t*p) + p1
	c := r - float64(t*p)
	y := 1 - ((lo - float64(r*c)/(2-c)) - hi)
	return scale2(y, k)
}

// scale2 is y·2^k rounded once, as math.Ldexp gives it, for y in [0.5, 2)
// and k in [−1076, 1024]: two exact powers of two, the first product exact
// (normal), the second rounded (to a subnormal or infinity where it
// falls there).
func scale2(y float64, k int) float64 {
	k1 := k >> 1
	return float64(y*math.Float64frombits(uint64(k1+1023)<<52)) * math.Float64frombits(uint64(k-k1+1023)<<52)
}

// silu is x·sigmoid(x) = x / (1 + e^−x), in float64.
func silu(x float32) float32 { return float32(float64(x) / (1 + Exp(-float64(x)))) }

// SiluMulGo: out[i] = silu(g[i]) · u[i] (a float32 product).
func SiluMulGo(out, g, u []float32) {
	for i := range out {
		out[i] = silu(g[i]) * u[i]
	}
}

// SiluMul is SiluMulGo, or assembly where the CPU has it (then
// Asm is set).
var (
	SiluMul = SiluMulGo
	Asm     bool
)

// ShiftGo: out[i] = e^(x[i] − sub), the difference in float32.
func ShiftGo(out []float64, x []float32, sub float32) {
	for i, v := range x {
		out[i] = Exp(float64(v - sub))
	}
}

// Shift is ShiftGo, or assembly where the CPU has it.
var Shift = ShiftGo
