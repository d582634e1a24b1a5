package margins

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// quantile is llama.cpp's percentile on sorted values: linear interpolation
// between the closest ranks at h = f·(n−1), the ends at f ≤ 0 and f ≥ 1
// (Hyndman and Fan type 7). llama.cpp evaluates f in float32 (0.999f); this
// uses float64, which can differ in the last digits only when f·(n−1) lands
// within float32 rounding of an integer.
func quantile(sorted []float64, f float64) float64 {
	n := len(sorted)
	if f <= 0 {
		return sorted[0]
	}
	if f >= 1 {
		return sorted[n-1]
	}
	h := f * float64(n-1)
	i := int(h)
	h -= float64(i)
	return (1-h)*sorted[i] + h*sorted[min(i+1, n-1)]
}

// median is llama.cpp's: the middle value, or the mean of the two middle
// values for even n (what quantile(0.5) gives too, up to rounding).
func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 0 {
		return 0.5 * (sorted[n/2-1] + sorted[n/2])
	}
	return sorted[n/2]
}

func quantiles(values []float64) Quantiles {
	s := slices.Clone(values)
	slices.Sort(s)
	return Quantiles{
		Max: s[len(s)-1], P99_9: quantile(s, 0.999), P99: quantile(s, 0.99),
		P95: quantile(s, 0.95), P90: quantile(s, 0.90), P75: quantile(s, 0.75),
		Median: median(s),
		P25:    quantile(s, 0.25), P10: quantile(s, 0.10), P5: quantile(s, 0.05),
		P1: quantile(s, 0.01), P0_1: quantile(s, 0.001), Min: s[0],
	}
}

// moments returns the mean and the population variance, two-pass: the
// one-pass E[x²] − E[x]² llama.cpp uses loses digits when the mean is large
// against the spread (PPL's ln p values), for the same quantity.
func moments(x []float64) (mean, variance float64) {
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for _, v := range x {
		variance += (v - mean) * (v - mean)
	}
	return mean, variance / float64(len(x))
}

// meanErr is llama.cpp's mean_and_uncertainty: the mean ± √(var/(n−1)),
// with var the population variance; no error for n < 2.
func meanErr(x []float64) Estimate {
	mean, variance := moments(x)
	return Estimate{Value: mean, Err: stdErr(variance, len(x))}
}

func stdErr(variance float64, n int) *float64 {
	if n < 2 {
		return nil
	}
	e := math.Sqrt(max(variance, 0) / float64(n-1))
	return &e
}

// finiteEst keeps an estimate only when it is finite, so that no infinity
// or NaN reaches JSON; a non-finite error alone is dropped.
func finiteEst(v float64, err *float64) *Estimate {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	if err != nil && (math.IsNaN(*err) || math.IsInf(*err, 0)) {
		err = nil
	}
	return &Estimate{Value: v, Err: err}
}

func summarize(pos []Position, teacherForced bool, captureSigma float64) Summary {
	n := len(pos)
	s := Summary{Positions: n, TeacherForced: teacherForced, FirstDisagreement: -1, CaptureSigma: captureSigma}
	kld := make([]float64, n)
	dp := make([]float64, n)
	dp2 := make([]float64, n)
	var same, refIn, testIn int
	for i, p := range pos {
		kld[i], dp[i], dp2[i] = p.KLD, p.DeltaP, p.DeltaP*p.DeltaP
		if !p.Flip {
			same++
		}
		if p.RefChoiceRankInTest <= containK {
			refIn++
		}
		if p.TestChoiceRankInRef <= containK {
			testIn++
		}
		switch p.Class {
		case Close:
			s.CloseFlips++
		case Clear:
			s.ClearFlips++
		}
		if p.Flip && s.FirstDisagreement < 0 {
			s.FirstDisagreement = p.Index
		}
	}
	s.Flips = s.CloseFlips + s.ClearFlips
	s.KLD, s.KLDQuant = meanErr(kld), quantiles(kld)
	s.DeltaP, s.DeltaPQ = meanErr(dp), quantiles(dp)
	s.DeltaPRMS = rms(dp2)

	share := float64(same) / float64(n)
	s.SameTop = Estimate{Value: share, Err: stdErr(share*(1-share), n)}
	s.RefTop1InTestTop5 = float64(refIn) / float64(n)
	s.TestTop1InRefTop5 = float64(testIn) / float64(n)

	if teacherForced {
		s.PPL = perplexity(pos)
	}
	return s
}

// rms is llama.cpp's RMS Δp: the root of the mean of Δp², its error carried
// through the square root (½·err(Δp²)/RMS). Where every Δp is 0 the error is
// 0, not 0/0.
func rms(sq []float64) Estimate {
	mse := meanErr(sq)
	r := Estimate{Value: math.Sqrt(mse.Value)}
	if mse.Err != nil {
		e := 0.0
		if *mse.Err > 0 {
			e = 0.5 / r.Value * *mse.Err
		}
		r.Err = &e
	}
	return r
}

// perplexity is llama.cpp's perplexity block. With nll = −ln p(target):
// PPL = exp(mean nll) ± PPL·err(nll). llama.cpp's error of the log ratio,
// √(err_Q² + err_base² − 2·cov/(n−1)), is the standard error of the mean of
// the per-token differences nll_Q − nll_base, and is computed that way here:
// the same number, without the cancellation that leaves 1e-8 where two
// identical dumps should give 0. The shared per-token difficulty cancels in
// the difference, which is why it is much tighter than either PPL's error.
// The error of PPL(Q) − PPL(base) is likewise that of PPL_Q·nll_Q −
// PPL_base·nll_base.
func perplexity(pos []Position) *PPL {
	n := len(pos)
	q := make([]float64, n)
	b := make([]float64, n)
	for i, p := range pos {
		q[i], b[i] = -*p.LnPTestTarget, -*p.LnPRefTarget
	}
	mq, vq := moments(q)
	mb, vb := moments(b)
	pplQ, pplB := math.Exp(mq), math.Exp(mb)
	out := &PPL{}
	out.Test = finiteEst(pplQ, mulErr(pplQ, stdErr(vq, n)))
	out.Ref = finiteEst(pplB, mulErr(pplB, stdErr(vb, n)))

	diff := make([]float64, n)
	for i := range diff {
		diff[i] = q[i] - b[i]
	}
	ln := meanErr(diff)
	ln.Value = mq - mb // as llama.cpp: the difference of the two means
	out.LnRatio = finiteEst(ln.Value, ln.Err)
	ratio := math.Exp(ln.Value)
	out.Ratio = finiteEst(ratio, mulErr(ratio, ln.Err))
	for i := range diff {
		diff[i] = pplQ*q[i] - pplB*b[i]
	}
	_, vd := moments(diff)
	out.Diff = finiteEst(pplQ-pplB, stdErr(vd, n))

	// llama.cpp divides the covariance of the means by the product of the
	// errors of the means; the (n−1) cancels and this is Pearson's r.
	if vq > 0 && vb > 0 {
		var cov float64
		for i := range q {
			cov += (q[i] - mq) * (b[i] - mb)
		}
		r := cov / float64(n) / math.Sqrt(vq*vb)
		r = max(-1, min(1, r)) // rounding must not push |r| past 1
		out.Cor = &r
	}
	return out
}

func mulErr(f float64, err *float64) *float64 {
	if err == nil {
		return nil
	}
	e := f * *err
	return &e
}

// SummaryOf summarizes the positions of r whose indices are given (a
// panel's windows of one domain, say), as Summary does all of them, with
// the capture's σ. Indices out of range are an error.
func (r *Report) SummaryOf(indices []int) (Summary, error) {
	if len(indices) == 0 {
		return Summary{}, errors.New("margins: a summary of no positions")
	}
	pos := make([]Position, len(indices))
	for j, i := range indices {
		if i < 0 || i >= len(r.Positions) {
			return Summary{}, fmt.Errorf("margins: position %d of %d", i, len(r.Positions))
		}
		pos[j] = r.Positions[i]
	}
	return summarize(pos, r.Summary.TeacherForced, r.Summary.CaptureSigma), nil
}
