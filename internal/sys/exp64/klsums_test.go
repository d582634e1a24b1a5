package exp64

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// KLSums's blocks are the plain sums they say (to rounding), and the
// assembly gives the Go's bits, for rows of every length around a block
// and logits of every scale.
func TestKLSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, scale := range []float64{0.01, 1, 10, 300} {
		for _, n := range []int{1, 7, 63, 64, 65, 200, 4099, 151936} {
			t.Run(fmt.Sprintf("scale=%v/n=%d", scale, n), func(t *testing.T) {
				x, y := make([]float32, n), make([]float32, n)
				maxX, maxY := math.Inf(-1), math.Inf(-1)
				for i := range x {
					x[i] = float32(rng.NormFloat64() * scale)
					y[i] = x[i] + float32(rng.NormFloat64()*scale*0.05)
					maxX, maxY = max(maxX, float64(x[i])), max(maxY, float64(y[i]))
				}
				meanD := 0.01
				blocks := (n + Block - 1) / Block
				got, want := make([]float64, 4*blocks), make([]float64, 4*blocks)
				KLSums(x, y, maxX, maxY, meanD, got)
				KLSumsGo(x, y, maxX, maxY, meanD, want)
				for i := range got {
					if math.Float64bits(got[i]) != math.Float64bits(want[i]) {
						t.Fatalf("block %d sum %d: %v, Go %v", i/4, i%4, got[i], want[i])
					}
				}
				for b := range blocks {
					var plain [4]float64
					for j := b * Block; j < min(n, (b+1)*Block); j++ {
						u, w := float64(x[j])-maxX, float64(y[j])-maxY
						d := float64(y[j]) - float64(x[j]) - meanD
						plain[0] += math.Exp(u)
						plain[1] += math.Exp(w)
						plain[2] += math.Exp(u) * (u - w)
						plain[3] += d * d
					}
					for k, p := range plain {
						if g := want[4*b+k]; math.Abs(g-p) > 1e-13*max(1, math.Abs(p)) {
							t.Fatalf("block %d sum %d: %v, plainly %v", b, k, g, p)
						}
					}
				}
			})
		}
	}
}

func BenchmarkKLSums(b *testing.B) {
	const n = 151936
	rng := rand.New(rand.NewPCG(9, 10))
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * 3)
		y[i] = x[i] + float32(rng.NormFloat64()*0.1)
	}
	out := make([]float64, 4*(n/Block+1))
	for _, k := range []struct {
		name string
		f    func(x, y []float32, maxX, maxY, meanD float64, out []float64)
	}{{"go", KLSumsGo}, {"kernel", KLSums}} {
		b.Run(k.name, func(b *testing.B) {
			b.SetBytes(8 * n)
			for b.Loop() {
				k.f(x, y, 20, 20, 0, out)
			}
		})
	}
}
