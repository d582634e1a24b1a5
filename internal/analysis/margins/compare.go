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
	if err := sameGeometry(ref.Rows, ref.Vocab, test.Rows, test.Vocab); err != nil {
		return nil, err
	}
	for _, l := range []struct {
		name string
		d    *dump.Logits
	}{{"reference", ref}, {"test", test}} {
		if l.d.Rows*l.d.Vocab != len(l.d.Data) {
			return nil, fmt.Errorf("margins: %s is %d rows × %d vocab but holds %d values",
				l.name, l.d.Rows, l.d.Vocab, len(l.d.Data))
		}
	}
	return CompareReaders(ref.Reader("reference"), test.Reader("test"), targets, opt)
}

// CompareReaders is Compare on two captures read row by row: it holds a
// block of rows of each side and the positions' results, never the
// captures, so its memory does not grow with their vocabulary times their
// length. Reading the next block overlaps the analysis of this one.
func CompareReaders(ref, test *dump.Reader, targets []int, opt Options) (*Report, error) {
	if err := sameGeometry(ref.Rows, ref.Vocab, test.Rows, test.Vocab); err != nil {
		return nil, err
	}
	for _, l := range []struct {
		name string
		r    *dump.Reader
	}{{"reference", ref}, {"test", test}} {
		if rt := l.r.Routes; rt != nil && rt.Rows != l.r.Rows {
			return nil, fmt.Errorf("margins: %s has %d rows of logits but %d of routes", l.name, l.r.Rows, rt.Rows)
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

func sameGeometry(refRows, refVocab, testRows, testVocab int) error {
	if refRows != testRows || refVocab != testVocab {
		return fmt.Errorf("margins: reference is %d rows × %d vocab, test is %d rows × %d vocab",
			refRows, refVocab, testRows, testVocab)
	}
	return nil
}

// blockBytes is about how much of each side is analyzed at once; two
// blocks of each side are held, one analyzed while the next is read.
const blockBytes = 8 << 20

// block is a run of rows of both sides, as the reader hands it over.
type block struct {
	first     int
	ref, test []float32
	err       error
}

// analyzeRows runs analyzeRow over all rows, a block at a time, on
// opt.Workers goroutines, while another goroutine reads the next block.
// Each row's result lands in its own slot, and of several bad rows the
// lowest one is reported, so the outcome is the same for any number of
// workers and any block size.
func analyzeRows(ref, test *dump.Reader, targets []int, opt Options) ([]Position, error) {
	n, vocab := ref.Rows, ref.Vocab
	workers := opt.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	rows := min(n, max(workers, blockBytes/(4*vocab)))

	full, free := make(chan block, 1), make(chan block, 2)
	free <- block{}
	free <- block{}
	done := make(chan struct{})
	defer close(done)
	go func() {
		defer close(full)
		for first := 0; first < n; first += rows {
			var b block
			select {
			case b = <-free:
			case <-done:
				return
			}
			b.first = first
			if b.ref, b.err = ref.Next(rows, b.ref); b.err == nil {
				b.test, b.err = test.Next(rows, b.test)
			}
			full <- b
			if b.err != nil {
				return
			}
		}
	}()

	pos := make([]Position, n)
	for b := range full {
		if b.err != nil {
			return nil, fmt.Errorf("margins: %v", b.err)
		}
		if err := analyzeBlock(pos, b, vocab, targets, opt, workers); err != nil {
			return nil, err
		}
		free <- b
	}
	return pos, nil
}

// analyzeBlock analyzes the rows of b into their slots of pos.
func analyzeBlock(pos []Position, b block, vocab int, targets []int, opt Options, workers int) error {
	n := len(b.ref) / vocab
	errs := make([]error, n)
	k := max(opt.TopK, 2)
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			// failed is checked before a row is taken, never after, so
			// every row handed out is analyzed.
			for !failed.Load() {
				j := int(next.Add(1) - 1)
				if j >= n {
					return
				}
				i := b.first + j
				target := -1
				if targets != nil {
					target = targets[i]
				}
				row := b.ref[j*vocab : (j+1)*vocab]
				pos[i], errs[j] = analyzeRow(i, row, b.test[j*vocab:(j+1)*vocab], target, k, opt.TopK)
				if errs[j] != nil {
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
				return err
			}
		}
	}
	return nil
}
