package margins

import "logitscope/internal/format/routing"

// Report is the result of [Compare]. It marshals to JSON with no NaN or
// infinity anywhere: undefined values are null or left out.
type Report struct {
	Rows      int        `json:"rows"`
	Vocab     int        `json:"vocab"`
	TopK      int        `json:"top_k"`
	Criterion Criterion  `json:"criterion"`
	Summary   Summary    `json:"summary"`
	Positions []Position `json:"positions"`
	// Routing compares the experts a mixture of experts routed each
	// position to, when both dumps carry routes; nil otherwise.
	Routing *routing.Report `json:"routing,omitempty"`

	opt Options // text rendering: MaxFlips, TokenText
}

// Token is one entry of a top-k list.
type Token struct {
	ID    int     `json:"id"`
	Logit float64 `json:"logit"`
	Prob  float64 `json:"prob"`
}

// Position is the comparison at one row.
type Position struct {
	Index   int     `json:"index"`
	RefTop  []Token `json:"ref_top"`
	TestTop []Token `json:"test_top"`

	RefChoice  int  `json:"ref_choice"`  // a: reference argmax, ties → lowest id
	TestChoice int  `json:"test_choice"` // b: test argmax, ties → lowest id
	Flip       bool `json:"flip"`        // a != b

	// Rival is the token the margin is measured against: b on a flip, the
	// reference's runner-up otherwise (MarginOf says which).
	Rival    int    `json:"rival"`
	MarginOf string `json:"margin_of"` // "flip" or "runner_up"
	// Margin is m = z_ref[a] − z_ref[Rival]; MarginProb is p_ref[a] − p_ref[Rival].
	Margin     float64 `json:"margin"`
	MarginProb float64 `json:"margin_prob"`
	// RefTop12 is the reference's own top-1 − top-2 margin, always.
	RefTop12     float64 `json:"ref_top12_margin"`
	RefTop12Prob float64 `json:"ref_top12_margin_prob"`
	// PairShift is d[Rival] − d[a], the perturbation the pair received;
	// on a flip it is at least Margin.
	PairShift float64 `json:"pair_shift"`

	// Sigma is the σ the class was decided with (the capture's under
	// GlobalSigma); Ratio is Margin/Sigma, absent when Sigma is 0.
	Sigma float64  `json:"sigma"`
	Ratio *float64 `json:"ratio,omitempty"`
	Class Class    `json:"class"`

	KLD float64 `json:"kld"` // Σ p_ref·(ln p_ref − ln p_test)

	// RefChoiceRankInTest is the rank of a in the test row, 1 = top;
	// TestChoiceRankInRef the rank of b in the reference row.
	RefChoiceRankInTest int `json:"ref_choice_rank_in_test"`
	TestChoiceRankInRef int `json:"test_choice_rank_in_ref"`

	// Target is the reference token: the given target, or a without targets.
	Target      int     `json:"target"`
	PRefTarget  float64 `json:"p_ref_target"`
	PTestTarget float64 `json:"p_test_target"`
	DeltaP      float64 `json:"delta_p"` // p_test(target) − p_ref(target)
	// Log-probabilities of the target, only with targets given.
	LnPRefTarget  *float64 `json:"ln_p_ref_target,omitempty"`
	LnPTestTarget *float64 `json:"ln_p_test_target,omitempty"`

	varD float64 // var(d) over the vocabulary, for the pooled σ
}

// Estimate is a value with its standard error; Err is nil where it cannot
// be estimated (fewer than two positions).
type Estimate struct {
	Value float64  `json:"value"`
	Err   *float64 `json:"err,omitempty"`
}

// Quantiles are the order statistics llama.cpp prints, by its convention
// (see the package doc). P75 and P25 are printed for Δp only, as llama.cpp
// does, but given for both.
type Quantiles struct {
	Max    float64 `json:"max"`
	P99_9  float64 `json:"p99_9"`
	P99    float64 `json:"p99"`
	P95    float64 `json:"p95"`
	P90    float64 `json:"p90"`
	P75    float64 `json:"p75"`
	Median float64 `json:"median"`
	P25    float64 `json:"p25"`
	P10    float64 `json:"p10"`
	P5     float64 `json:"p5"`
	P1     float64 `json:"p1"`
	P0_1   float64 `json:"p0_1"`
	Min    float64 `json:"min"`
}

// Summary aggregates the positions.
type Summary struct {
	Positions int `json:"positions"`
	// TeacherForced is true when targets were given; otherwise Δp is of the
	// reference's argmax and there is no PPL.
	TeacherForced bool `json:"teacher_forced"`

	KLD       Estimate  `json:"kld_mean"`
	KLDQuant  Quantiles `json:"kld"`
	DeltaP    Estimate  `json:"delta_p_mean"`
	DeltaPQ   Quantiles `json:"delta_p"`
	DeltaPRMS Estimate  `json:"delta_p_rms"`

	// SameTop is the share of positions with the same argmax, with the
	// binomial error √(p(1−p)/(n−1)).
	SameTop Estimate `json:"same_top"`
	// Top-1 of one side within the top-5 of the other, as shares.
	RefTop1InTestTop5 float64 `json:"ref_top1_in_test_top5"`
	TestTop1InRefTop5 float64 `json:"test_top1_in_ref_top5"`

	Flips      int `json:"flips"`
	CloseFlips int `json:"close_flips"`
	ClearFlips int `json:"clear_flips"`
	// FirstDisagreement is the first flip's index, −1 when none.
	FirstDisagreement int `json:"first_disagreement"`

	// CaptureSigma is σ pooled over the capture, whatever the criterion.
	CaptureSigma float64 `json:"capture_sigma"`

	PPL *PPL `json:"ppl,omitempty"` // teacher-forced only
}

// PPL holds the perplexity statistics of teacher-forced comparisons, each
// as llama.cpp defines it. A value that overflows float64 (absurd logits)
// is left out rather than written as infinity.
type PPL struct {
	Test    *Estimate `json:"test,omitempty"`     // PPL(Q) = exp(mean −ln p_test(target))
	Ref     *Estimate `json:"ref,omitempty"`      // PPL(base)
	LnRatio *Estimate `json:"ln_ratio,omitempty"` // mean ln(PPL(Q)/PPL(base))
	Ratio   *Estimate `json:"ratio,omitempty"`    // PPL(Q)/PPL(base)
	Diff    *Estimate `json:"diff,omitempty"`     // PPL(Q) − PPL(base)
	// Cor is the Pearson correlation of ln p(target) between the sides,
	// llama.cpp's "Cor(ln(PPL(Q)), ln(PPL(base)))", absent when either
	// side's values are constant.
	Cor *float64 `json:"cor,omitempty"`
}
