package routing

import (
	"errors"
	"fmt"
)

// Change is how the test's routing at a layer (or a position) differs
// from the reference's.
type Change string

const (
	Same  Change = "same"  // the same experts in the same order
	Order Change = "order" // the same set of experts, ranked differently
	Set   Change = "set"   // at least one expert the reference did not pick
)

// Of compares one layer's choices, each most probable first. Sets are
// compared whatever the order: an expert's output is weighted by its
// probability, so a swap of rank changes weights, not which experts run;
// another set runs another expert.
func Of(ref, test []int32) Change {
	same := len(ref) == len(test)
	for i := 0; same && i < len(ref); i++ {
		same = ref[i] == test[i]
	}
	if same {
		return Same
	}
	if swapped(ref, test) > 0 || len(ref) != len(test) {
		return Set
	}
	return Order
}

// swapped counts the experts of test that ref does not hold. TopK is
// small (8 for Qwen3-MoE): a quadratic scan beats a set.
func swapped(ref, test []int32) int {
	n := 0
	for _, t := range test {
		found := false
		for _, r := range ref {
			if r == t {
				found = true
				break
			}
		}
		if !found {
			n++
		}
	}
	return n
}

// Report is the result of [Compare].
type Report struct {
	Layout
	Summary   Summary    `json:"summary"`
	Positions []Position `json:"positions"`
}

// Position is one row's routing on both sides.
type Position struct {
	// Change is the position's largest change over its layers: set if any
	// layer's set changed, else order if any layer's order did, else same.
	Change Change `json:"change"`
	// Ref and Test are, per sparse layer (Layout.Layers), the TopK experts
	// each side chose, most probable first.
	Ref  [][]int `json:"ref"`
	Test [][]int `json:"test"`
	// SetLayers and OrderLayers are the layer numbers whose set changed,
	// and those whose set held but whose order changed.
	SetLayers   []int `json:"set_layers,omitempty"`
	OrderLayers []int `json:"order_layers,omitempty"`
}

// Summary counts the changes.
type Summary struct {
	Positions int `json:"positions"`
	// SetChanged counts positions where at least one layer routed to
	// another set of experts; OrderOnly those where every layer kept its
	// set but at least one ranked it differently.
	SetChanged int `json:"set_changed"`
	OrderOnly  int `json:"order_only"`
	// FirstSetChange is the first position with a set change, −1 if none.
	FirstSetChange int `json:"first_set_change"`
	// Slots is positions × layers × TopK, every expert choice the
	// reference made; Swapped how many of them the test filled with an
	// expert the reference did not pick at that position and layer.
	Slots   int `json:"slots"`
	Swapped int `json:"swapped"`
	// Flips is how many argmax flips the caller gave, FlipsAtSetChange how
	// many of them fell on positions with a set change.
	Flips            int `json:"flips"`
	FlipsAtSetChange int `json:"flips_at_set_change"`
	// Layers breaks the counts down per sparse layer, in Layout order.
	Layers []LayerSummary `json:"layers"`
}

// LayerSummary is one sparse layer's share of the changes.
type LayerSummary struct {
	Layer      int `json:"layer"`
	SetChanged int `json:"set_changed"`
	OrderOnly  int `json:"order_only"`
	Swapped    int `json:"swapped"`
}

// Compare compares the test's routes with the reference's, position by
// position and layer by layer. flips, when not nil, marks the positions
// whose argmax flipped (one per row), for Summary.FlipsAtSetChange.
func Compare(ref, test *Routes, flips []bool) (*Report, error) {
	if ref == nil || test == nil {
		return nil, errors.New("routing: nil routes")
	}
	if !ref.Layout.Equal(test.Layout) {
		return nil, fmt.Errorf("routing: the reference routes %s, the test %s", ref.Layout, test.Layout)
	}
	if ref.Rows != test.Rows {
		return nil, fmt.Errorf("routing: the reference has %d rows of routes, the test %d", ref.Rows, test.Rows)
	}
	for _, s := range []struct {
		name string
		r    *Routes
	}{{"reference", ref}, {"test", test}} {
		if err := s.r.Check("routing: " + s.name); err != nil {
			return nil, err
		}
	}
	if flips != nil && len(flips) != ref.Rows {
		return nil, fmt.Errorf("routing: %d flips for %d rows", len(flips), ref.Rows)
	}
	rep := &Report{Layout: ref.Layout, Positions: make([]Position, ref.Rows)}
	for i := range rep.Positions {
		a, b := make([][]int, len(ref.Layers)), make([][]int, len(ref.Layers))
		for j := range ref.Layers {
			a[j], b[j] = ints(ref.At(i, j)), ints(test.At(i, j))
		}
		rep.Positions[i] = NewPosition(ref.Layout, a, b)
	}
	rep.Summary = Summarize(rep.Layout, rep.Positions, flips)
	return rep, nil
}

// NewPosition compares one row's choices: ref and test hold, per sparse
// layer of l, each side's experts, most probable first.
func NewPosition(l Layout, ref, test [][]int) Position {
	p := Position{Ref: ref, Test: test}
	for j, layer := range l.Layers {
		switch Of(int32s(ref[j]), int32s(test[j])) {
		case Set:
			p.SetLayers = append(p.SetLayers, layer)
		case Order:
			p.OrderLayers = append(p.OrderLayers, layer)
		}
	}
	switch {
	case len(p.SetLayers) > 0:
		p.Change = Set
	case len(p.OrderLayers) > 0:
		p.Change = Order
	default:
		p.Change = Same
	}
	return p
}

// Summarize counts the changes of positions laid out as l (each with a
// list per layer); flips as in [Compare]. It reads each position's Ref and
// Test, not its Change: a reader checking a stored report recomputes the
// summary with it.
func Summarize(l Layout, pos []Position, flips []bool) Summary {
	s := Summary{Positions: len(pos), FirstSetChange: -1, Layers: make([]LayerSummary, len(l.Layers))}
	for j, layer := range l.Layers {
		s.Layers[j].Layer = layer
	}
	for i := range pos {
		p := &pos[i]
		set, order := false, false
		for j := range l.Layers {
			a, b := int32s(p.Ref[j]), int32s(p.Test[j])
			n := swapped(a, b)
			s.Slots += len(a)
			s.Swapped += n
			s.Layers[j].Swapped += n
			switch Of(a, b) {
			case Set:
				set = true
				s.Layers[j].SetChanged++
			case Order:
				order = true
				s.Layers[j].OrderOnly++
			}
		}
		switch {
		case set:
			s.SetChanged++
			if s.FirstSetChange < 0 {
				s.FirstSetChange = i
			}
		case order:
			s.OrderOnly++
		}
		if flips != nil && flips[i] {
			s.Flips++
			if set {
				s.FlipsAtSetChange++
			}
		}
	}
	return s
}

func ints(v []int32) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

func int32s(v []int) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}
