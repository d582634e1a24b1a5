package margins

import (
	"fmt"
	"math"
)

// Defaults for the zero [Options].
const (
	DefaultTopK     = 5
	DefaultK        = 3.0
	DefaultMaxFlips = 10
)

// containK is the k of the "top-1 in top-k" containment statistics. It is
// fixed, not [Options.TopK], so that the numbers stay comparable between
// reports; ranks give it without storing top-5 lists.
const containK = 5

// Options configure [Compare]. The zero value is the documented default.
type Options struct {
	// TopK is how many top tokens of each side a position lists (default 5;
	// at most the vocabulary size).
	TopK int

	// K is the multiple of σ up to which a flip is a close call (default 3).
	K float64

	// GlobalSigma pools σ over the whole capture instead of taking each
	// position's own.
	GlobalSigma bool

	// AbsMargin > 0 replaces the σ rule with a fixed threshold: a flip is
	// close when m ≤ AbsMargin logits.
	AbsMargin float64

	// Workers bounds the goroutines over rows (default GOMAXPROCS). Results
	// do not depend on it.
	Workers int

	// MaxFlips is how many flips (and routing changes) WriteText lists
	// before it counts the rest: 0 is the default, 10; a negative number
	// lists none.
	MaxFlips int

	// TokenText, if set, turns a token id into readable text for WriteText.
	TokenText func(id int) string
}

func (o Options) withDefaults(vocab int) (Options, error) {
	if o.TopK < 0 {
		return o, fmt.Errorf("margins: TopK %d is negative", o.TopK)
	}
	if math.IsNaN(o.K) || math.IsInf(o.K, 0) || o.K < 0 {
		return o, fmt.Errorf("margins: K %v is not a finite non-negative number", o.K)
	}
	if math.IsNaN(o.AbsMargin) || math.IsInf(o.AbsMargin, 0) || o.AbsMargin < 0 {
		return o, fmt.Errorf("margins: AbsMargin %v is not a finite non-negative number", o.AbsMargin)
	}
	if o.TopK == 0 {
		o.TopK = DefaultTopK
	}
	o.TopK = min(o.TopK, vocab)
	if o.K == 0 {
		o.K = DefaultK
	}
	if o.MaxFlips == 0 {
		o.MaxFlips = DefaultMaxFlips
	}
	return o, nil
}

// Class is the verdict on one position.
type Class string

const (
	Agree Class = "agree" // both sides chose the same top-1 token
	Close Class = "close" // a flip the noise at that position explains
	Clear Class = "clear" // a flip against a clear reference preference
)

// Criterion is the close/clear rule a report was made with.
type Criterion struct {
	// Mode is "sigma" (m ≤ K·σ) or "abs" (m ≤ AbsMargin).
	Mode string `json:"mode"`
	// K is the σ multiple (sigma mode).
	K float64 `json:"k,omitempty"`
	// SigmaScope is "position" or "capture" (sigma mode).
	SigmaScope string `json:"sigma_scope,omitempty"`
	// AbsMargin is the fixed threshold in logits (abs mode).
	AbsMargin float64 `json:"abs_margin,omitempty"`
	// Text is the rule in words, as the text report prints it.
	Text string `json:"text"`
}

func newCriterion(o Options) Criterion {
	if o.AbsMargin > 0 {
		return Criterion{Mode: "abs", AbsMargin: o.AbsMargin,
			Text: fmt.Sprintf("a flip is close when m ≤ %g logits (fixed threshold)", o.AbsMargin)}
	}
	c := Criterion{Mode: "sigma", K: o.K, SigmaScope: "position"}
	scope := "at each position"
	if o.GlobalSigma {
		c.SigmaScope = "capture"
		scope = "pooled over the capture"
	}
	c.Text = fmt.Sprintf("a flip is close when m ≤ %g·σ, σ = √2·std(z_test − z_ref) %s", o.K, scope)
	return c
}

// classify applies the rule to a flip with reference margin m ≥ 0 and pair
// noise sigma. The comparison is ≤ so that an exact tie (m = 0) is close
// even where σ = 0.
func (c Criterion) classify(m, sigma float64) Class {
	limit := c.AbsMargin
	if c.Mode == "sigma" {
		limit = c.K * sigma
	}
	if m <= limit {
		return Close
	}
	return Clear
}

// listed is how many flips WriteText lists: MaxFlips, its default for 0,
// none for a negative number.
func (o Options) listed() int {
	switch {
	case o.MaxFlips == 0:
		return DefaultMaxFlips
	case o.MaxFlips < 0:
		return 0
	}
	return o.MaxFlips
}
