// Package margins compares the logits of a float reference with those of a
// quantized variant, position by position, and tells a close call from a
// clear call.
//
// Both dumps hold one logit row per position (row i is the row computed
// before output token i was appended). [Compare] works on each row in
// float64 with a max-subtracted log-softmax, so vocabularies of 151,936
// tokens keep probabilities exact far beyond what the statistics need.
//
// # Statistics
//
// The summary repeats what llama.cpp's `llama-perplexity --kl-divergence`
// prints, with the same definitions, so numbers can be compared with runs
// people already trust: KLD(ref‖test) = Σ p_ref·(ln p_ref − ln p_test)
// mean ± error, maximum, percentiles and minimum; Δp = p_test(t) − p_ref(t)
// of the reference token t; RMS Δp; "same top p" with the binomial error
// √(p(1−p)/(n−1)); and, when the reference tokens are the real next tokens
// of a text (teacher forcing), PPL of both sides, their ratio, the log
// ratio with its covariance-corrected error, and the correlation of the
// per-token ln p. KLD sums over the whole vocabulary (llama.cpp's stored
// base log-probabilities skip tokens below ln p = −16). Every "±" is a standard error of the mean:
// √((E[x²] − E[x]²)/(n−1)), which is llama.cpp's formula; where llama.cpp
// prints 0 for n ≤ 10 this package still gives the formula's value, and
// leaves the error out (null in JSON) only when n < 2 leaves nothing to
// estimate it from.
//
// Percentiles use llama.cpp's convention: linear interpolation between the
// closest ranks of the sorted values, at h = f·(n−1) (Hyndman and Fan's
// type 7, NumPy's default "linear"), with the median the mean of the two
// middle values for even n (the same number).
//
// # Close call or clear call
//
// At a position where the reference's top-1 token a differs from the
// test's top-1 token b (argmax, ties broken towards the lowest token id),
// let
//
//	m = z_ref[a] − z_ref[b] ≥ 0
//
// be how strongly the reference preferred its own choice, in logits, and
// let d = z_test − z_ref over the whole vocabulary, with its mean over the
// vocabulary removed (logits are shift-invariant, so a constant offset is
// no perturbation at all). The test picked b because the pair's
// perturbation made up the reference's margin: d[b] − d[a] ≥ m. If the perturbations of single
// tokens are about independent with standard deviation s, the difference
// of a pair has standard deviation √2·s, so
//
//	σ = √2 · std(d)        (population std over the V tokens of the position)
//
// is the typical perturbation of a pair at that position. The flip is a
//
//	close call  when m ≤ K·σ   (K = 3 by default: rounding noise, not a defect)
//	clear call  when m > K·σ   (the reference clearly preferred a: a defect)
//
// The report gives m in logits and in probability (p_ref[a] − p_ref[b]), σ
// and m/σ for every position, so a reader can judge the boundary; at
// positions without a flip m is the reference's own top-1/top-2 margin and
// says so, which shows how near a flip the position was.
//
// With [Options.GlobalSigma], σ is pooled over the whole capture instead
// (√2 · the root of the mean over positions of var(d)). A defect that
// disturbs one position heavily also inflates that position's own σ and
// would excuse itself; the pooled σ measures the scheme's usual noise
// instead. With [Options.AbsMargin] > 0 the criterion is a fixed threshold,
// close when m ≤ AbsMargin logits, for people used to fixed thresholds;
// noise grows with the scheme and the depth of the model, so a fixed
// threshold is the blunter test.
//
// Degenerate cases: σ = 0 means the test row is the reference row plus a
// constant, which cannot reorder tokens, so no flip; the rule still reads
// sensibly there (an exact tie, m = 0, is close; anything else is clear)
// and m/σ is left out rather than reported as infinite. A NaN or infinite
// logit in either dump is an error that names the dump, row and token.
package margins
