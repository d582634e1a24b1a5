package margins

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"

	"logitscope/internal/format/dump"
	"logitscope/internal/format/routing"
)

// handCase is two rows over a vocabulary of three, with small integer
// logits so that every number has a closed form (e = Euler's number):
//
// Row 0: ref (0, 1, 0), test (0, 0, 1).
//
//	p_ref = (1, e, 1)/(2+e), p_test = (1, 1, e)/(2+e): same normaliser.
//	KLD = p_ref[1]·ln(e/1) + p_ref[2]·ln(1/e) = (e−1)/(2+e) ≈ 0.364180.
//	a = 1, b = 2: a flip. m = z_ref[1] − z_ref[2] = 1 logit,
//	m_prob = (e−1)/(2+e). d = (0, −1, 1), mean 0, var 2/3,
//	σ = √2·√(2/3) = 2/√3 ≈ 1.1547, m/σ = √3/2 ≈ 0.866 ≤ 3: close.
//	Pair shift d[2] − d[1] = 2. Rank of a in test: token 2 is larger and
//	token 0 ties with a lower id, so 3; likewise b in ref: 3.
//	Reference runner-up: 0 and 2 tie at 0, the lower id 0 wins, top-1/2 = 1.
//	Target 2: p_ref = 1/(2+e), p_test = e/(2+e), Δp = (e−1)/(2+e).
//
// Row 1: ref = test = (2, 0, 0): KLD 0, no flip, σ 0 (no m/σ),
//
//	runner-up 1 with m = 2. Target 1: p = 1/(2+e²) on both sides, Δp 0.
func handCase() (ref, test *dump.Logits, targets []int) {
	ref = logits([]float32{0, 1, 0}, []float32{2, 0, 0})
	test = logits([]float32{0, 0, 1}, []float32{2, 0, 0})
	return ref, test, []int{2, 1}
}

func TestHandComputedPositions(t *testing.T) {
	e := math.E
	r := compareHand(t, Options{})

	p := r.Positions[0]
	near(t, "p_ref[1]", p.RefTop[0].Prob, e/(2+e))
	near(t, "p_test[2]", p.TestTop[0].Prob, e/(2+e))
	near(t, "KLD row 0", p.KLD, (e-1)/(2+e))
	if p.RefChoice != 1 || p.TestChoice != 2 || !p.Flip || p.Rival != 2 || p.MarginOf != "flip" {
		t.Errorf("row 0 choices: a=%d b=%d flip=%v rival=%d (%s), want 1 2 true 2 (flip)",
			p.RefChoice, p.TestChoice, p.Flip, p.Rival, p.MarginOf)
	}
	near(t, "m", p.Margin, 1)
	near(t, "m prob", p.MarginProb, (e-1)/(2+e))
	near(t, "σ", p.Sigma, 2/math.Sqrt(3))
	nearErr(t, "m/σ", p.Ratio, math.Sqrt(3)/2)
	near(t, "pair shift", p.PairShift, 2)
	near(t, "top-1/top-2", p.RefTop12, 1)
	if p.RefTop[1].ID != 0 || p.RefTop[2].ID != 2 {
		t.Errorf("ref top list %+v: ties must keep the lower id first", p.RefTop)
	}
	if p.Class != Close {
		t.Errorf("row 0 class %s, want close", p.Class)
	}
	if p.RefChoiceRankInTest != 3 || p.TestChoiceRankInRef != 3 {
		t.Errorf("ranks %d, %d, want 3, 3", p.RefChoiceRankInTest, p.TestChoiceRankInRef)
	}
	near(t, "p_ref(target)", p.PRefTarget, 1/(2+e))
	near(t, "p_test(target)", p.PTestTarget, e/(2+e))
	near(t, "Δp", p.DeltaP, (e-1)/(2+e))
	nearErr(t, "ln p_test(target)", p.LnPTestTarget, 1-math.Log(2+e))

	p = r.Positions[1]
	if p.KLD != 0 || p.Flip || p.Class != Agree || p.Sigma != 0 || p.Ratio != nil {
		t.Errorf("row 1: KLD %g flip %v class %s σ %g ratio %v, want 0 false agree 0 nil",
			p.KLD, p.Flip, p.Class, p.Sigma, p.Ratio)
	}
	if p.Rival != 1 || p.MarginOf != "runner_up" {
		t.Errorf("row 1 rival %d (%s), want 1 (runner_up)", p.Rival, p.MarginOf)
	}
	near(t, "row 1 m", p.Margin, 2)
	near(t, "row 1 m prob", p.MarginProb, (e*e-1)/(e*e+2))
	near(t, "row 1 p(target)", p.PRefTarget, 1/(2+e*e))
}

func compareHand(t *testing.T, opt Options) *Report {
	ref, test, targets := handCase()
	return mustCompare(t, ref, test, targets, opt)
}

// TestHandComputedSummary checks the summary of handCase. With n = 2 every
// standard error √(var/(n−1)) is half the distance of the two values.
func TestHandComputedSummary(t *testing.T) {
	e := math.E
	r := compareHand(t, Options{})
	s := r.Summary
	k := (e - 1) / (2 + e) // KLD and Δp of row 0; row 1 has 0 for both

	near(t, "mean KLD", s.KLD.Value, k/2)
	nearErr(t, "KLD error", s.KLD.Err, k/2)
	near(t, "KLD max", s.KLDQuant.Max, k)
	near(t, "KLD 99.9%", s.KLDQuant.P99_9, 0.999*k) // h = 0.999·(2−1)
	near(t, "KLD median", s.KLDQuant.Median, k/2)
	near(t, "KLD 10%", s.KLDQuant.P10, 0.1*k)
	near(t, "KLD min", s.KLDQuant.Min, 0)

	near(t, "mean Δp", s.DeltaP.Value, k/2)
	// RMS = √(k²/2) = k/√2. Δp² is (k², 0): mean k²/2 ± k²/2, and the error
	// goes through the root as ½·(k²/2)/(k/√2) = k/(2√2).
	near(t, "RMS Δp", s.DeltaPRMS.Value, k/math.Sqrt2)
	nearErr(t, "RMS Δp error", s.DeltaPRMS.Err, k/(2*math.Sqrt2))

	near(t, "same top p", s.SameTop.Value, 0.5)
	nearErr(t, "same top p error", s.SameTop.Err, 0.5) // √(0.5·0.5/1)
	near(t, "ref top-1 in test top-5", s.RefTop1InTestTop5, 1)
	if s.Flips != 1 || s.CloseFlips != 1 || s.ClearFlips != 0 || s.FirstDisagreement != 0 {
		t.Errorf("flips %d (%d close, %d clear), first %d; want 1 (1, 0), 0",
			s.Flips, s.CloseFlips, s.ClearFlips, s.FirstDisagreement)
	}
	// Pooled: var(d) is 2/3 and 0, mean 1/3, σ = √2·√(1/3).
	near(t, "capture σ", s.CaptureSigma, math.Sqrt(2.0/3))

	// nll_base = (ln(2+e), ln(2+e²)); nll_Q = (ln(2+e) − 1, ln(2+e²)).
	// PPL(base) = √((2+e)(2+e²)), PPL(Q) = PPL(base)/√e, ln ratio −½.
	x1, x2 := math.Log(2+e), math.Log(2+e*e)
	pplB := math.Sqrt((2 + e) * (2 + e*e))
	ppl := s.PPL
	near(t, "PPL(base)", ppl.Ref.Value, pplB)
	nearErr(t, "PPL(base) error", ppl.Ref.Err, pplB*(x2-x1)/2)
	near(t, "PPL(Q)", ppl.Test.Value, pplB/math.Sqrt(e))
	nearErr(t, "PPL(Q) error", ppl.Test.Err, pplB/math.Sqrt(e)*(x2-x1+1)/2)
	near(t, "ln ratio", ppl.LnRatio.Value, -0.5)
	// The errors of the means are (x2−x1+1)/2 and (x2−x1)/2, their covariance
	// their product (two points): the error is their difference, ½.
	nearErr(t, "ln ratio error", ppl.LnRatio.Err, 0.5)
	near(t, "ratio", ppl.Ratio.Value, math.Exp(-0.5))
	nearErr(t, "ratio error", ppl.Ratio.Err, 0.5*math.Exp(-0.5))
	near(t, "PPL diff", ppl.Diff.Value, pplB/math.Sqrt(e)-pplB)
	// llama.cpp's √(err_Q² + err_base² − 2·PPL_Q·PPL_base·cov/(n−1)) for two
	// points: half the spread of PPL_Q·nll_Q − PPL_base·nll_base.
	pplQ := pplB / math.Sqrt(e)
	nearErr(t, "PPL diff error", ppl.Diff.Err, math.Abs(pplQ*(x2-x1+1)-pplB*(x2-x1))/2)
	nearErr(t, "correlation", ppl.Cor, 1) // two points lie on a line
}

func TestIdenticalDumps(t *testing.T) {
	ref, _ := randomPair(1, 16, 4000, 0)
	targets := make([]int, ref.Rows)
	for i := range targets {
		targets[i] = (i * 37) % ref.Vocab
	}
	r := mustCompare(t, ref, ref, targets, Options{})
	for _, p := range r.Positions {
		if p.KLD != 0 || p.DeltaP != 0 || p.Flip || p.Class != Agree || p.Sigma != 0 {
			t.Fatalf("row %d: KLD %g Δp %g flip %v class %s σ %g; want all zero, agree",
				p.Index, p.KLD, p.DeltaP, p.Flip, p.Class, p.Sigma)
		}
	}
	s := r.Summary
	if s.KLD.Value != 0 || *s.KLD.Err != 0 || s.KLDQuant.Max != 0 || s.DeltaP.Value != 0 || s.DeltaPRMS.Value != 0 || *s.DeltaPRMS.Err != 0 {
		t.Errorf("KLD %+v max %g Δp %+v RMS %+v, want zeros", s.KLD, s.KLDQuant.Max, s.DeltaP, s.DeltaPRMS)
	}
	if s.SameTop.Value != 1 || *s.SameTop.Err != 0 || s.Flips != 0 || s.FirstDisagreement != -1 {
		t.Errorf("same top %+v, flips %d, first %d; want 1 ± 0, 0, -1", s.SameTop, s.Flips, s.FirstDisagreement)
	}
	near(t, "PPL ratio", s.PPL.Ratio.Value, 1)
	near(t, "ln ratio error", *s.PPL.LnRatio.Err, 0)
	nearErr(t, "correlation", s.PPL.Cor, 1)
}

// TestShiftInvariance: adding a constant to a test row changes nothing,
// because d has its mean removed and softmax ignores the shift.
func TestShiftInvariance(t *testing.T) {
	ref, test := randomPair(2, 4, 3000, 0.1)
	shifted := &dump.Logits{Rows: test.Rows, Vocab: test.Vocab, Data: make([]float32, len(test.Data))}
	for i, v := range test.Data {
		// On a grid of 2⁻¹⁰ and below 2¹³ the shift by 64 is exact in float32.
		test.Data[i] = float32(math.Round(float64(v)*1024) / 1024)
		shifted.Data[i] = test.Data[i] + 64
	}
	a := mustCompare(t, ref, test, nil, Options{})
	b := mustCompare(t, ref, shifted, nil, Options{})
	for i := range a.Positions {
		pa, pb := a.Positions[i], b.Positions[i]
		if math.Abs(pa.KLD-pb.KLD) > 1e-12 || math.Abs(pa.Sigma-pb.Sigma) > 1e-12 || pa.Class != pb.Class {
			t.Errorf("row %d: KLD %g vs %g, σ %g vs %g, %s vs %s", i, pa.KLD, pb.KLD, pa.Sigma, pb.Sigma, pa.Class, pb.Class)
		}
	}
}

func TestVocabularyFloat64Exactness(t *testing.T) {
	// 151,936 equal logits: p = 1/V each, ln p = −ln V, and a test that
	// moves one token by +1: KLD has a closed form to check precision at
	// full vocabulary size. With S = V−1+e:
	// KLD = Σ (1/V)(ln(1/V) − ln p_t) = −ln V − (1/V)(Σ_v z_t[v] − V·ln S)
	//     = ln S − ln V − 1/V.
	const V = 151936
	ref := &dump.Logits{Rows: 1, Vocab: V, Data: make([]float32, V)}
	test := &dump.Logits{Rows: 1, Vocab: V, Data: make([]float32, V)}
	test.Data[777] = 1
	r := mustCompare(t, ref, test, []int{777}, Options{})
	p := r.Positions[0]
	S := V - 1 + math.E
	want := math.Log1p((math.E-1)/V) - 1.0/V // ln S − ln V without cancellation
	// KLD is a difference of terms near 1 and near ln V ≈ 12, so a few ulp
	// of 12 (1.8e-15 each) is the floor; a plain sum over the vocabulary
	// would be 1e-12 off.
	if math.Abs(p.KLD-want) > 5e-15 {
		t.Errorf("KLD %.17g, want %.17g", p.KLD, want)
	}
	near(t, "Δp", p.DeltaP, math.E/S-1.0/V)
	if p.RefChoice != 0 || p.TestChoice != 777 || p.Class != Close {
		t.Errorf("a=%d b=%d class %s, want 0 777 close (an exact tie, m = 0)", p.RefChoice, p.TestChoice, p.Class)
	}
}

func TestGeometryMismatch(t *testing.T) {
	ref := &dump.Logits{Rows: 12, Vocab: 151936}
	test := &dump.Logits{Rows: 12, Vocab: 512}
	_, err := Compare(ref, test, nil, Options{})
	want := "margins: reference is 12 rows × 151936 vocab, test is 12 rows × 512 vocab"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}

func TestInputErrors(t *testing.T) {
	ok := logits([]float32{1, 2, 3})
	for _, tc := range []struct {
		name      string
		ref, test *dump.Logits
		targets   []int
		opt       Options
		want      string
	}{
		{"short data", &dump.Logits{Rows: 1, Vocab: 3, Data: []float32{1}}, &dump.Logits{Rows: 1, Vocab: 3, Data: []float32{1}},
			nil, Options{}, "reference is 1 rows × 3 vocab but holds 1 values"},
		{"no rows", &dump.Logits{Vocab: 3}, &dump.Logits{Vocab: 3}, nil, Options{}, "no rows"},
		{"vocab 1", logits([]float32{1}), logits([]float32{1}), nil, Options{}, "vocabulary of 1"},
		{"targets length", ok, ok, []int{1, 2}, Options{}, "2 targets for 1 rows"},
		{"target range", ok, ok, []int{3}, Options{}, "target 3 of row 0"},
		{"negative K", ok, ok, nil, Options{K: -1}, "K -1"},
		{"NaN AbsMargin", ok, ok, nil, Options{AbsMargin: math.NaN()}, "AbsMargin NaN"},
	} {
		_, err := Compare(tc.ref, tc.test, tc.targets, tc.opt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestNonFiniteLogits(t *testing.T) {
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	for _, tc := range []struct {
		name      string
		ref, test *dump.Logits
		want      string
	}{
		{"NaN in test", logits([]float32{1, 2, 3}, []float32{1, 2, 3}), logits([]float32{1, 2, 3}, []float32{1, 2, nan}),
			"margins: test row 1: token 2 has logit NaN"},
		{"+Inf in reference", logits([]float32{1, 2, 3}, []float32{1, inf, 3}), logits([]float32{1, 2, 3}, []float32{1, 2, 3}),
			"margins: reference row 1: token 1 has logit +Inf"},
		{"-Inf in test", logits([]float32{-inf, 2, 3}), logits([]float32{1, 2, -inf}),
			"margins: reference row 0: token 0 has logit -Inf"},
	} {
		_, err := Compare(tc.ref, tc.test, nil, Options{})
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestFirstBadRowWins: of several bad rows the lowest is named, whatever
// the number of goroutines.
func TestFirstBadRowWins(t *testing.T) {
	ref, test := randomPair(3, 200, 300, 0.1)
	test.Row(150)[5] = float32(math.NaN())
	test.Row(37)[9] = float32(math.NaN())
	test.Row(180)[0] = float32(math.NaN())
	for _, w := range []int{1, 2, 3, 8, 64} {
		for range 20 {
			_, err := Compare(ref, test, nil, Options{Workers: w})
			if err == nil || !strings.Contains(err.Error(), "test row 37: token 9") {
				t.Fatalf("workers %d: error %v, want row 37", w, err)
			}
		}
	}
}

func TestDeterministicAcrossWorkers(t *testing.T) {
	ref, test := randomPair(4, 40, 5000, 0.3)
	var first []byte
	for _, w := range []int{1, 2, 5, 40} {
		r := mustCompare(t, ref, test, nil, Options{Workers: w, GlobalSigma: true})
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = b
		} else if string(b) != string(first) {
			t.Fatalf("workers %d: report differs from workers 1", w)
		}
	}
}

func TestTopKOption(t *testing.T) {
	ref, test, _ := handCase()
	r := mustCompare(t, ref, test, nil, Options{TopK: 1})
	if len(r.Positions[0].RefTop) != 1 || r.Positions[0].RefTop12 != 1 {
		t.Errorf("TopK 1: %d entries, top-1/2 margin %g; want 1 and 1 (runner-up kept anyway)",
			len(r.Positions[0].RefTop), r.Positions[0].RefTop12)
	}
	r = mustCompare(t, ref, test, nil, Options{TopK: 50})
	if r.TopK != 3 || len(r.Positions[0].TestTop) != 3 {
		t.Errorf("TopK 50 over a vocabulary of 3: top_k %d with %d entries, want 3", r.TopK, len(r.Positions[0].TestTop))
	}
	// Without targets Δp is of the reference's argmax.
	p := r.Positions[0]
	if p.Target != p.RefChoice || p.LnPRefTarget != nil || r.Summary.PPL != nil || r.Summary.TeacherForced {
		t.Errorf("argmax mode: target %d (a = %d), ln p %v, PPL %v", p.Target, p.RefChoice, p.LnPRefTarget, r.Summary.PPL)
	}
}

// Routes are compared when both dumps carry them, flips counted where
// the sets changed; one side alone has nothing to be compared with, and
// routes that do not line up with the logits are refused.
func TestCompareRouting(t *testing.T) {
	l := routing.Layout{Layers: []int{1, 2}, TopK: 2, Experts: 6}
	ref, test := randomPair(3, 40, 50, 0.8)
	withRoutes(4, ref, test, l)
	r := mustCompare(t, ref, test, nil, Options{})
	if r.Routing == nil {
		t.Fatal("no routing comparison")
	}
	flips := make([]bool, r.Rows)
	for i, p := range r.Positions {
		flips[i] = p.Flip
	}
	want, err := routing.Compare(ref.Routes, test.Routes, flips)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r.Routing, want) || r.Routing.Summary.Flips != r.Summary.Flips || r.Routing.Summary.SetChanged == 0 {
		t.Fatalf("routing summary %+v, want %+v with %d flips", r.Routing.Summary, want.Summary, r.Summary.Flips)
	}

	alone := *test
	alone.Routes = nil
	if r := mustCompare(t, ref, &alone, nil, Options{}); r.Routing != nil {
		t.Error("a comparison with routes on one side only has a routing report")
	}
	short := *test
	short.Routes = &routing.Routes{Layout: l, Rows: 1, IDs: test.Routes.IDs[:l.Width()]}
	if _, err := Compare(ref, &short, nil, Options{}); err == nil || !strings.Contains(err.Error(), "test has 40 rows of logits but 1 of routes") {
		t.Errorf("short routes: %v", err)
	}
	other := *test
	other.Routes = &routing.Routes{Layout: routing.Layout{Layers: []int{1, 2}, TopK: 2, Experts: 7}, Rows: 40, IDs: test.Routes.IDs}
	if _, err := Compare(ref, &other, nil, Options{}); err == nil || !strings.Contains(err.Error(), "of 7 experts") {
		t.Errorf("another layout: %v", err)
	}
}
