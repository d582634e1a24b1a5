package split

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// Check says why r is not a split Compare could have written: what a
// shared document carries (anyone can post one) is shown only when every
// index, choice and count agrees with its rows. Field names are r's JSON
// names, under "split.report.".
func (r *Report) Check() error {
	switch {
	case r.Positions != len(r.Rows):
		return fmt.Errorf("positions %d: %d rows", r.Positions, len(r.Rows))
	case r.Vocab < 1:
		return fmt.Errorf("vocab %d: want at least 1", r.Vocab)
	}
	for _, side := range []struct {
		name string
		s    Side
	}{{"file", r.File}, {"engine", r.Engine}, {"total", r.Total}} {
		name, s := side.name, side.s
		switch {
		case !finite(s.KLD.Value) || s.KLD.Value < 0 || s.KLD.Err != nil && (!finite(*s.KLD.Err) || *s.KLD.Err < 0):
			return fmt.Errorf("%s.kld_mean: not a mean KLD", name)
		case s.Flips < 0 || s.Flips > r.Positions:
			return fmt.Errorf("%s.flips %d: want 0 to %d", name, s.Flips, r.Positions)
		case !(s.SameTop >= 0 && s.SameTop <= 1):
			return fmt.Errorf("%s.same_top %v: want a share in [0, 1]", name, s.SameTop)
		}
	}
	counts := map[string]int{}
	var engineOnly []int
	for i, p := range r.Rows {
		switch {
		case p.Index != i:
			return fmt.Errorf("rows[%d].index %d", i, p.Index)
		case min(p.Ref, p.FileTop, p.EngineTop) < 0 || max(p.Ref, p.FileTop, p.EngineTop) >= r.Vocab:
			return fmt.Errorf("rows[%d]: a choice out of the vocab (%d)", i, r.Vocab)
		case p.Cause != CauseOf(p.Ref, p.FileTop, p.EngineTop):
			return fmt.Errorf("rows[%d].cause %q: its choices %d, %d, %d make it %q", i, p.Cause, p.Ref, p.FileTop, p.EngineTop, CauseOf(p.Ref, p.FileTop, p.EngineTop))
		case !finite(p.KLDFile) || !finite(p.KLDEngine) || !finite(p.KLDTotal) || !finite(p.EngineMargin):
			return fmt.Errorf("rows[%d]: a KLD or margin that is not a number", i)
		}
		if p.Cause != Same {
			counts[p.Cause]++
		}
		if p.Cause == Engine {
			engineOnly = append(engineOnly, i)
		}
	}
	for k, n := range r.ByCause {
		if !slices.Contains(Causes, k) {
			return fmt.Errorf("by_cause: %q is not a cause", k)
		}
		if n != counts[k] {
			return fmt.Errorf("by_cause[%s] %d: the rows have %d", k, n, counts[k])
		}
	}
	if !slices.Equal(r.EngineOnly, engineOnly) {
		return errors.New("engine_only: not the rows whose cause is the engine's")
	}
	return nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
