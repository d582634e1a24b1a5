package margins

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"

	"logitscope/internal/format/dump"
	"logitscope/internal/format/routing"
)

// Compare compares the reference dump with the test dump position by
// position. targets, if not nil, holds the reference token of each row (in
// teacher-forced runs the real next token of the text): it is the token of
// Δp and of the PPL statistics. Without targets Δp is of the reference's
// argmax and PPL is left out.
//
// The dumps must have the same geometry, at least one row and a vocabulary
// of at least two tokens; a NaN or infinite logit is an error naming the
// dump, the row and the token. When both carry routes (a mixture of
// experts), the report compares those too (Report.Routing); when only one
// does, there is nothing to compare them with and the report has none.
func Compare(ref, test *dump.Logits, targets []int, opt Options) (*Report, error) {
	if ref == nil || test == nil {
		return nil, errors.New("margins: nil dump")
	}
	if ref.Rows != test.Rows || ref.Vocab != test.Vocab {
		return nil, fmt.Errorf("margins: reference is %d rows × %d vocab, test is %d rows × %d vocab",
			ref.Rows, ref.Vocab, test.Rows, test.Vocab)
	}
	for _, l := range []struct {
		name string
		d    *dump.Logits
	}{{"reference", ref}, {"test", test}} {
		if l.d.Rows*l.d.Vocab != len(l.d.Data) {
			return nil, fmt.Errorf("margins: %s is %d rows × %d vocab but holds %d values",
				l.name, l.d.Rows, l.d.Vocab, len(l.d.Data))
		}
		if rt := l.d.Routes; rt != nil && rt.Rows != l.d.Rows {
			return nil, fmt.Errorf("margins: %s has %d rows of logits but %d of routes", l.name, l.d.Rows, rt.Rows)
		}
	}
	if ref.Rows < 1 {
		return nil, errors.New("margins: the dumps have no rows")
	}
	if ref.Vocab < 2 {
		return nil, fmt.Errorf("margins: a vocabulary of %d token cannot have a flip or a margin", ref.Vocab)
	}
	if targets != nil {
		if len(targets) != ref.Rows {
			return nil, fmt.Errorf("margins: %d targets for %d rows", len(targets), ref.Rows)
		}
		for i, t := range targets {
			if t < 0 || t >= ref.Vocab {
				return nil, fmt.Errorf("margins: target %d of row %d is outside the vocabulary of %d", t, i, ref.Vocab)
			}
		}
	}
	opt, err := opt.withDefaults(ref.Vocab)
	if err != nil {
		return nil, err
	}

	pos, err := analyzeRows(ref, test, targets, opt)
	if err != nil {
		return nil, err
	}

	crit := newCriterion(opt)
	// Each row's d has mean zero over the same vocabulary, so the capture's
	// variance is the mean of the rows' variances. Summed in row order, so
	// the result does not depend on the goroutines.
	var sumVar float64
	for i := range pos {
		sumVar += pos[i].varD
	}
	captureSigma := math.Sqrt2 * math.Sqrt(sumVar/float64(len(pos)))
	for i := range pos {
		p := &pos[i]
		p.Sigma = math.Sqrt2 * math.Sqrt(p.varD)
		if opt.GlobalSigma {
			p.Sigma = captureSigma
		}
		if p.Sigma > 0 {
			r := p.Margin / p.Sigma
			if !math.IsInf(r, 0) {
				p.Ratio = &r
			}
		}
		p.Class = Agree
		if p.Flip {
			p.Class = crit.classify(p.Margin, p.Sigma)
		}
	}

	rep := &Report{
		Rows:      ref.Rows,
		Vocab:     ref.Vocab,
		TopK:      opt.TopK,
		Criterion: crit,
		Summary:   summarize(pos, targets != nil, captureSigma),
		Positions: pos,
		opt:       opt,
	}
	if ref.Routes != nil && test.Routes != nil {
		flips := make([]bool, len(pos))
		for i := range pos {
			flips[i] = pos[i].Flip
		}
		if rep.Routing, err = routing.Compare(ref.Routes, test.Routes, flips); err != nil {
			return nil, fmt.Errorf("margins: %v", err)
		}
	}
	return rep, nil
}

// analyzeRows runs analyzeRow over all rows on opt.Workers goroutines. Each
// row's result lands in its own slot, and of several bad rows the lowest
// one is reported, so the outcome is the same for any number of workers.
func analyzeRows(ref, test *dump.Logits, targets []int, opt Options) ([]Position, error) {
	n := ref.Rows
	pos := make([]Position, n)
	errs := make([]error, n)
	k := max(opt.TopK, 2)
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, n)
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			// failed is checked before a row is taken, never after, so
			// every row handed out is analyzed.
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				target := -1
				if targets != nil {
					target = targets[i]
				}
				pos[i], errs[i] = analyzeRow(i, ref.Row(i), test.Row(i), target, k, opt.TopK)
				if errs[i] != nil {
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		// Rows are handed out in order and each one handed out is
		// analyzed, so every row below a failed one was analyzed: the
		// lowest error is the first bad row.
		for _, err := range errs {
			if err != nil {
				return nil, err
			}
		}
	}
	return pos, nil
}
