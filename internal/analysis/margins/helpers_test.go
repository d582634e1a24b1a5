package margins

import (
	"math"
	"slices"
	"testing"

	"logitscope/internal/format/dump"
	"logitscope/internal/format/routing"
)

// logits builds a dump from literal rows.
func logits(rows ...[]float32) *dump.Logits {
	l := &dump.Logits{Rows: len(rows), Vocab: len(rows[0])}
	for _, r := range rows {
		l.Data = append(l.Data, r...)
	}
	return l
}

// rng is splitmix64 with Box–Muller normals: written out so that the
// golden files do not depend on a library's choice of algorithms.
type rng struct{ state uint64 }

func newRNG(seed uint64) *rng { return &rng{seed} }

func (r *rng) uint64() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float64 is uniform in [0, 1).
func (r *rng) float64() float64 { return float64(r.uint64()>>11) / (1 << 53) }

func (r *rng) intN(n int) int { return int(r.uint64() % uint64(n)) }

func (r *rng) norm() float64 {
	u := 1 - r.float64() // (0, 1]: the logarithm stays finite
	return math.Sqrt(-2*math.Log(u)) * math.Cos(2*math.Pi*r.float64())
}

// randomPair returns a reference of rows × vocab logits, roughly like a
// model's (a few strong tokens over a broad base), and a test copy with
// Gaussian noise of the given standard deviation.
func randomPair(seed uint64, rows, vocab int, noise float64) (ref, test *dump.Logits) {
	rng := newRNG(seed)
	ref = &dump.Logits{Rows: rows, Vocab: vocab, Data: make([]float32, rows*vocab)}
	test = &dump.Logits{Rows: rows, Vocab: vocab, Data: make([]float32, rows*vocab)}
	for i := range ref.Data {
		z := 2 * rng.norm()
		if rng.intN(1000) == 0 {
			z += 12
		}
		ref.Data[i] = float32(z)
		test.Data[i] = float32(z + noise*rng.norm())
	}
	return ref, test
}

// withRoutes gives ref and test routes of layout (TopK 2): distinct
// random experts per layer; on the test side every 5th row swaps one
// expert of a random layer for another, and every 7th reorders one.
func withRoutes(seed uint64, ref, test *dump.Logits, l routing.Layout) {
	rng := newRNG(seed)
	a := &routing.Routes{Layout: l, Rows: ref.Rows}
	for range ref.Rows * len(l.Layers) {
		x := rng.intN(l.Experts)
		y := (x + 1 + rng.intN(l.Experts-1)) % l.Experts
		a.IDs = append(a.IDs, int32(x), int32(y))
	}
	b := &routing.Routes{Layout: l, Rows: ref.Rows, IDs: slices.Clone(a.IDs)}
	for i := range ref.Rows {
		ids := b.At(i, rng.intN(len(l.Layers)))
		switch {
		case i%5 == 0:
			for e := range int32(l.Experts) {
				if e != ids[0] && e != ids[1] {
					ids[1] = e
					break
				}
			}
		case i%7 == 0:
			ids[0], ids[1] = ids[1], ids[0]
		}
	}
	ref.Routes, test.Routes = a, b
}

func near(t *testing.T, name string, got, want float64) {
	t.Helper()
	if math.Abs(got-want) > 1e-9 {
		t.Errorf("%s = %.15g, want %.15g (off by %.3g)", name, got, want, got-want)
	}
}

func nearErr(t *testing.T, name string, got *float64, want float64) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: error missing, want %.15g", name, want)
		return
	}
	near(t, name, *got, want)
}

func mustCompare(t testing.TB, ref, test *dump.Logits, targets []int, opt Options) *Report {
	t.Helper()
	r, err := Compare(ref, test, targets, opt)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
