package margins

import (
	"math"
	"testing"

	"logitscope/internal/format/dump"
)

// flipCase is one row over 1000 tokens: a broad base in [−2, 2], the
// reference's choice a = 10 at refA and b = 20 at refB; the test adds
// Gaussian noise (s = 0.05) to every token, then sets its own values of a
// and b so that b wins.
func flipCase(refA, refB, testA, testB float32) (ref, test *dump.Logits) {
	const V = 1000
	rng := newRNG(11)
	r := make([]float32, V)
	tt := make([]float32, V)
	for v := range r {
		r[v] = float32(4*rng.float64() - 2)
		tt[v] = r[v] + float32(0.05*rng.norm())
	}
	r[10], r[20] = refA, refB
	tt[10], tt[20] = testA, testB
	return logits(r), logits(tt)
}

func TestCloseFlip(t *testing.T) {
	// A near tie (m = 0.01) flipped by a pair perturbation of 0.04, while the
	// noise is s = 0.05, σ ≈ √2·0.05 ≈ 0.07: m/σ ≈ 0.14.
	ref, test := flipCase(5.00, 4.99, 4.99, 5.02)
	p := mustCompare(t, ref, test, nil, Options{}).Positions[0]
	if !p.Flip || p.RefChoice != 10 || p.TestChoice != 20 {
		t.Fatalf("a=%d b=%d flip=%v, want a flip 10 → 20", p.RefChoice, p.TestChoice, p.Flip)
	}
	if p.Class != Close || p.Sigma < 0.06 || p.Sigma > 0.08 || *p.Ratio > 0.2 {
		t.Errorf("class %s, σ %.4f, m/σ %.3f; want close, σ ≈ 0.07, m/σ ≈ 0.14", p.Class, p.Sigma, *p.Ratio)
	}
	near(t, "m", p.Margin, float64(float32(5.00))-float64(float32(4.99)))
}

func TestClearFlip(t *testing.T) {
	// The reference prefers a by 6 logits; the test keeps a and pushes b up
	// by 7. That one outlier inflates the row's own σ to ≈ √2·√(49/1000) ≈
	// 0.32, still far below m/3.
	ref, test := flipCase(8, 2, 8, 9)
	p := mustCompare(t, ref, test, nil, Options{}).Positions[0]
	if !p.Flip || p.Class != Clear {
		t.Fatalf("flip %v class %s, want a clear flip", p.Flip, p.Class)
	}
	if p.Margin != 6 || *p.Ratio < 15 {
		t.Errorf("m %g, m/σ %.2f; want 6 and well above 3", p.Margin, *p.Ratio)
	}
	if p.PairShift < p.Margin {
		t.Errorf("pair shift %g below m %g: the flip needs more", p.PairShift, p.Margin)
	}
	if p.RefChoiceRankInTest != 2 || p.TestChoiceRankInRef != 2 {
		t.Errorf("ranks %d, %d, want 2, 2", p.RefChoiceRankInTest, p.TestChoiceRankInRef)
	}
}

func TestClassifyBoundary(t *testing.T) {
	c := Criterion{Mode: "sigma", K: 3}
	for _, tc := range []struct {
		m, sigma float64
		want     Class
	}{
		{3, 1, Close}, // m = K·σ is close
		{math.Nextafter(3, 4), 1, Clear},
		{0, 0, Close}, // identical rows up to a shift, exact tie
		{1e-300, 0, Clear},
	} {
		if got := c.classify(tc.m, tc.sigma); got != tc.want {
			t.Errorf("m %g σ %g: %s, want %s", tc.m, tc.sigma, got, tc.want)
		}
	}
}

// TestBoundaryEndToEnd moves K across m/σ of handCase's flip (m = 1,
// σ = 2/√3).
func TestBoundaryEndToEnd(t *testing.T) {
	k := math.Sqrt(3) / 2
	for _, tc := range []struct {
		k    float64
		want Class
	}{{k * (1 + 1e-9), Close}, {k * (1 - 1e-9), Clear}} {
		if got := compareHand(t, Options{K: tc.k}).Positions[0].Class; got != tc.want {
			t.Errorf("K = %.12g: %s, want %s", tc.k, got, tc.want)
		}
	}
}

func TestAbsMargin(t *testing.T) {
	// handCase's flip has m = 1 exactly.
	for _, tc := range []struct {
		abs  float64
		want Class
	}{{1, Close}, {0.999, Clear}, {0.5, Clear}, {2, Close}} {
		r := compareHand(t, Options{AbsMargin: tc.abs, K: 100})
		if got := r.Positions[0].Class; got != tc.want {
			t.Errorf("AbsMargin %g: %s, want %s", tc.abs, got, tc.want)
		}
		if r.Criterion.Mode != "abs" || r.Criterion.AbsMargin != tc.abs {
			t.Errorf("criterion %+v, want abs mode", r.Criterion)
		}
	}
}

func TestGlobalSigma(t *testing.T) {
	// handCase: row 0's own σ is 2/√3 ≈ 1.155, the pooled σ √(2/3) ≈ 0.816
	// because row 1 has none. With K = 1 and m = 1 the flip is close by its
	// own σ and clear by the capture's.
	own := compareHand(t, Options{K: 1})
	pooled := compareHand(t, Options{K: 1, GlobalSigma: true})
	if own.Positions[0].Class != Close || pooled.Positions[0].Class != Clear {
		t.Errorf("own σ: %s, pooled σ: %s; want close, clear", own.Positions[0].Class, pooled.Positions[0].Class)
	}
	near(t, "pooled σ", pooled.Positions[0].Sigma, math.Sqrt(2.0/3))
	near(t, "pooled σ at the agreeing row", pooled.Positions[1].Sigma, math.Sqrt(2.0/3))
	nearErr(t, "pooled m/σ", pooled.Positions[0].Ratio, math.Sqrt(1.5))
	if pooled.Criterion.SigmaScope != "capture" || own.Criterion.SigmaScope != "position" {
		t.Errorf("scopes %q, %q", pooled.Criterion.SigmaScope, own.Criterion.SigmaScope)
	}
}

func TestQuantileConvention(t *testing.T) {
	// NumPy's default (linear) gives the same: np.percentile([1,2,3,4,5], 90)
	// is 4.6, since h = 0.9·4 = 3.6 lies 0.6 of the way from 4 to 5.
	s := []float64{1, 2, 3, 4, 5}
	for _, tc := range []struct{ f, want float64 }{
		{0, 1}, {0.001, 1.004}, {0.01, 1.04}, {0.1, 1.4}, {0.5, 3},
		{0.9, 4.6}, {0.99, 4.96}, {0.999, 4.996}, {1, 5},
	} {
		near(t, "quantile", quantile(s, tc.f), tc.want)
	}
	// Unsorted input, even n: sorted (0, 5, 10, 20), median (5+10)/2.
	q := quantiles([]float64{10, 0, 20, 5})
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"max", q.Max, 20}, {"p95", q.P95, 18.5}, {"p90", q.P90, 17}, {"p75", q.P75, 12.5},
		{"median", q.Median, 7.5}, {"p25", q.P25, 3.75}, {"p10", q.P10, 1.5}, {"min", q.Min, 0},
	} {
		near(t, tc.name, tc.got, tc.want)
	}
	// One value: every quantile is that value.
	q = quantiles([]float64{7})
	if q.Min != 7 || q.Median != 7 || q.P99_9 != 7 || q.Max != 7 {
		t.Errorf("single value: %+v", q)
	}
}

func TestMeanErrMatchesLlamaFormula(t *testing.T) {
	// llama.cpp: f = Σx/n, err = √((Σx²/n − f²)/(n−1)). For 1..12:
	// mean 6.5, Σx² = 650, 650/12 − 42.25 = 11.91666…, /11, root.
	x := make([]float64, 12)
	for i := range x {
		x[i] = float64(i + 1)
	}
	e := meanErr(x)
	near(t, "mean", e.Value, 6.5)
	nearErr(t, "err", e.Err, math.Sqrt((650.0/12-42.25)/11))
	if meanErr([]float64{3}).Err != nil {
		t.Error("one value has no error")
	}
}
