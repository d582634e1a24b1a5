package abi

import (
	"reflect"
	"strings"
	"testing"

	"logitscope/internal/format/routing"
)

// A host splits the rows it kept with what ls_result says: Vocab logits,
// then the routes' ids; a dense model's rows are its logits.
func TestResultSplitRow(t *testing.T) {
	moe := Result{Vocab: 3, Routes: &routing.Layout{Layers: []int{0, 2}, TopK: 2, Experts: 4}}
	cases := []struct {
		name   string
		res    Result
		row    []float32
		width  int
		logits []float32
		ids    []int32
		err    string
	}{
		{"dense", Result{Vocab: 3}, []float32{1, 2, 3}, 3, []float32{1, 2, 3}, nil, ""},
		{"moe", moe, []float32{1, 2, 3, 0, 3, 1, 2}, 7, []float32{1, 2, 3}, []int32{0, 3, 1, 2}, ""},
		{"dense row of another width", Result{Vocab: 3}, []float32{1, 2, 3, 4}, 3, nil, nil, "a row of 4 values; ls_result says 3 logits and 0 route ids"},
		{"moe row without routes", moe, []float32{1, 2, 3}, 7, nil, nil, "a row of 3 values; ls_result says 3 logits and 4 route ids"},
		{"no vocab", Result{}, []float32{1}, 0, nil, nil, "ls_result says 0 logits per row"},
		{"not an id", moe, []float32{1, 2, 3, 0, 3, 1, 2.5}, 7, nil, nil, "value 3 after the 3 logits is 2.5"},
	}
	for _, c := range cases {
		if w := c.res.Width(); w != c.width {
			t.Errorf("%s: width %d, want %d", c.name, w, c.width)
		}
		logits, ids, err := c.res.SplitRow(c.row)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err = %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(logits, c.logits) || !reflect.DeepEqual(ids, c.ids) {
			t.Errorf("%s: %v %v %v", c.name, logits, ids, err)
		}
	}
}
