package exp64

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// exp64 is e^x within an ulp of the truth (computed in 128-bit floats),
// and exactly what the special cases say. (math.Exp on amd64 is no
// reference: two ulps apart now and then, and infinite from 709.7.)
func TestExp64(t *testing.T) {
	for _, c := range []struct{ x, want float64 }{
		{math.Inf(1), math.Inf(1)},
		{math.Inf(-1), 0},
		{710, math.Inf(1)},
		{-746, 0},
		{0, 1},
		{math.Copysign(0, -1), 1},
		{1e-9, 1 + 1e-9},
		{-1e-9, 1 - 1e-9},
		{1, math.E},
	} {
		if got := Exp(c.x); got != c.want {
			t.Errorf("Exp(%v) = %v, want %v", c.x, got, c.want)
		}
	}
	if got := Exp(math.NaN()); got == got {
		t.Errorf("Exp(NaN) = %v, want NaN", got)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	xs := []float64{709.78, 709, -708, -740, -745, -744.44, 0.5 * math.Ln2, -0.5 * math.Ln2, 1.0 / (1 << 28), -1.0 / (1 << 28)}
	for range 200000 {
		xs = append(xs, rng.Float64()*1455-745, rng.NormFloat64()*rng.ExpFloat64())
	}
	bad := 0
	for _, x := range xs {
		got, want := Exp(x), expBig(x)
		if d := int64(math.Float64bits(got)) - int64(math.Float64bits(want)); d > 1 || d < -1 {
			if bad++; bad <= 5 {
				t.Errorf("Exp(%v) = %v, e^x = %v: %d ulps apart", x, got, want, d)
			}
		}
	}
}

// expBig is e^x rounded to float64 from 128-bit arithmetic: x = k·ln2 +
// r, e^r by its Taylor series, times 2^k.
func expBig(x float64) float64 {
	const prec = 128
	ln2, _, _ := big.ParseFloat("0.6931471805599453094172321214581765680755001343602552541206800094933936219696947156058633269964186875", 10, prec, big.ToNearestEven)
	k := math.Round(x / math.Ln2)
	r := new(big.Float).SetPrec(prec).SetFloat64(x)
	r.Sub(r, new(big.Float).SetPrec(prec).Mul(ln2, big.NewFloat(k)))
	sum, term := big.NewFloat(1).SetPrec(prec), big.NewFloat(1).SetPrec(prec)
	for n := 1; n < 40; n++ {
		term.Mul(term, r)
		term.Quo(term, big.NewFloat(float64(n)))
		sum.Add(sum, term)
	}
	sum.SetMantExp(sum, int(k))
	f, _ := sum.Float64()
	return f
}

// The assembly gives silu(x)·u the Go's bits, on random activations of
// every scale and the edges of exp64's cases.
func TestSiluMul(t *testing.T) {
	if !Asm {
		t.Skip("no exponential assembly on this CPU (AVX-512 F, VL and DQ)")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	edges := []float32{0, float32(math.Copysign(0, -1)), 1e-45, -1e-45, 1e-9, -1e-9, 1.0 / (1 << 28), -1.0 / (1 << 28),
		0.5, -0.5, 88, -88, 103, -103, 104, -104, 709.78, -709.78, 745.2, -745.2, 1e10, -1e10,
		math.MaxFloat32, -math.MaxFloat32, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}
	for _, scale := range []float64{0, 0.1, 1, 10, 100, 1000} {
		for _, n := range []int{1, 7, 8, 9, 64, 4867} {
			t.Run(fmt.Sprintf("scale=%v/n=%d", scale, n), func(t *testing.T) {
				x, u := make([]float32, n), make([]float32, n)
				for i := range x {
					x[i] = float32(rng.NormFloat64() * scale)
					if scale == 0 {
						x[i] = edges[i%len(edges)]
					}
					u[i] = float32(rng.NormFloat64())
				}
				got, want := make([]float32, n), make([]float32, n)
				SiluMul(got, x, u)
				SiluMulGo(want, x, u)
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) && (got[i] == got[i] || want[i] == want[i]) {
						t.Fatalf("silu(%v)·%v = %v (%#x), Go %v (%#x)", x[i], u[i], got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
				}
			})
		}
	}
}

// The assembly gives softmax's exponentials the Go's float64 bits.
func TestExpShift(t *testing.T) {
	if !Asm {
		t.Skip("no exponential assembly on this CPU (AVX-512 F, VL and DQ)")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, scale := range []float64{0.01, 1, 30, 300} {
		for _, n := range []int{1, 8, 13, 4099} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.NormFloat64() * scale)
			}
			x[0] = float32(math.Inf(-1))
			sub := x[n-1]
			got, want := make([]float64, n), make([]float64, n)
			Shift(got, x, sub)
			ShiftGo(want, x, sub)
			for i := range got {
				if math.Float64bits(got[i]) != math.Float64bits(want[i]) && (got[i] == got[i] || want[i] == want[i]) {
					t.Fatalf("scale %v n %d: e^(%v − %v) = %v, Go %v", scale, n, x[i], sub, got[i], want[i])
				}
			}
		}
	}
}
