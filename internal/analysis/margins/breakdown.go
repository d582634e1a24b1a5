package margins

import (
	"fmt"
	"io"
	"maps"
	"slices"

	"logitscope/internal/format/chain"
)

// Group is a run of consecutive positions (a panel window's prediction
// positions) and its labels by key: "domain": "code", "role": "eval". An
// empty label leaves the group out of that key's table.
type Group struct {
	Positions int
	Labels    map[string]string
}

// BreakdownKeys are the keys a panel's windows carry, in the order the
// tables are written.
var BreakdownKeys = []string{"domain", "role"}

// Breakdown is a summary per key and label: "domain" → "code" → summary.
type Breakdown map[string]map[string]*Summary

// PanelGroups are a panel receipt's windows as groups, in panel order:
// the rows of a capture of that panel, window after window.
func PanelGroups(p *chain.Panel) []Group {
	gs := make([]Group, len(p.Windows))
	for i, w := range p.Windows {
		gs[i] = Group{Positions: w.PredictionPositions, Labels: map[string]string{"domain": w.Domain, "role": w.Role}}
	}
	return gs
}

// BreakdownOf summarizes r's positions by every label of groups, which
// tile r's positions in order. It is nil when no group has a label.
func (r *Report) BreakdownOf(groups []Group) (Breakdown, error) {
	idx := map[string]map[string][]int{}
	at := 0
	for _, g := range groups {
		for key, label := range g.Labels {
			if label == "" {
				continue
			}
			if idx[key] == nil {
				idx[key] = map[string][]int{}
			}
			for p := at; p < at+g.Positions; p++ {
				idx[key][label] = append(idx[key][label], p)
			}
		}
		at += g.Positions
	}
	if at != len(r.Positions) {
		return nil, fmt.Errorf("margins: the windows hold %d prediction positions, the report %d", at, len(r.Positions))
	}
	if len(idx) == 0 {
		return nil, nil
	}
	b := Breakdown{}
	for key, labels := range idx {
		b[key] = map[string]*Summary{}
		for label, positions := range labels {
			s, err := r.SummaryOf(positions)
			if err != nil {
				return nil, err
			}
			b[key][label] = &s
		}
	}
	return b, nil
}

// WriteText writes a table per key (BreakdownKeys first, then any other
// in name order): positions, mean KLD, its 99th percentile, same top-1,
// flips, and of those the close and clear calls.
func (b Breakdown) WriteText(w io.Writer) error {
	for _, key := range b.Keys() {
		labels := b[key]
		if len(labels) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n====== By %s ======\n", key)
		fmt.Fprintf(w, "%-20s %9s %12s %12s %10s %6s %6s %6s\n", key, "positions", "mean KLD", "KLD 99%", "same top", "flips", "close", "clear")
		for _, label := range slices.Sorted(maps.Keys(labels)) {
			s := labels[label]
			if _, err := fmt.Fprintf(w, "%-20s %9d %12.6f %12.6f %9.3f%% %6d %6d %6d\n",
				label, s.Positions, s.KLD.Value, s.KLDQuant.P99, 100*s.SameTop.Value, s.Flips, s.CloseFlips, s.ClearFlips); err != nil {
				return err
			}
		}
	}
	return nil
}

// Keys are the keys in the order the report shows them: BreakdownKeys,
// then any other by name (some may have no labels).
func (b Breakdown) Keys() []string {
	keys := slices.Clone(BreakdownKeys)
	for _, k := range slices.Sorted(maps.Keys(b)) {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}
