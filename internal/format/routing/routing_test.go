package routing

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestSplitRow(t *testing.T) {
	nan := float32(math.NaN())
	cases := []struct {
		name   string
		row    []float32
		vocab  int
		logits []float32
		ids    []int32
		err    string
	}{
		{"dense", []float32{1, -2, 3}, 3, []float32{1, -2, 3}, nil, ""},
		{"routes", []float32{1, -2, 3, 7, 0, 5, 2}, 3, []float32{1, -2, 3}, []int32{7, 0, 5, 2}, ""},
		{"one logit", []float32{9, 1}, 1, []float32{9}, []int32{1}, ""},
		{"short row", []float32{1, 2}, 3, nil, nil, "a row of 2 values cannot hold 3 logits"},
		{"no vocab", []float32{1, 2}, 0, nil, nil, "cannot hold 0 logits"},
		{"fraction", []float32{1, 2, 0.5}, 2, nil, nil, "value 0 after the 2 logits is 0.5, not an expert id"},
		{"negative", []float32{1, 2, 3, -1}, 2, nil, nil, "value 1 after the 2 logits is -1"},
		{"NaN", []float32{1, 2, nan}, 2, nil, nil, "is NaN"},
		{"infinite", []float32{1, float32(math.Inf(1))}, 1, nil, nil, "is +Inf"},
		{"too large", []float32{1, 1 << 24}, 1, nil, nil, "not an expert id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			logits, ids, err := SplitRow(c.row, c.vocab)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(logits, c.logits) || !reflect.DeepEqual(ids, c.ids) {
				t.Fatalf("got %v %v, want %v %v", logits, ids, c.logits, c.ids)
			}
			// The logits share the row; an append must not overwrite the
			// routes after them.
			if &logits[0] != &c.row[0] || cap(logits) != c.vocab {
				t.Fatalf("logits are not the row's first %d values, capped", c.vocab)
			}
		})
	}
}

func TestOf(t *testing.T) {
	cases := []struct {
		ref, test []int32
		want      Change
	}{
		{[]int32{3, 5}, []int32{3, 5}, Same},
		{[]int32{3, 5}, []int32{5, 3}, Order},
		{[]int32{3, 5}, []int32{3, 6}, Set},
		{[]int32{3, 5}, []int32{6, 3}, Set},
		{[]int32{1, 2, 3, 4}, []int32{4, 3, 2, 1}, Order},
		{[]int32{1, 2, 3, 4}, []int32{1, 2, 3, 9}, Set},
		{[]int32{7}, []int32{7}, Same},
	}
	for _, c := range cases {
		if got := Of(c.ref, c.test); got != c.want {
			t.Errorf("Of(%v, %v) = %s, want %s", c.ref, c.test, got, c.want)
		}
	}
}

func TestLayoutCheck(t *testing.T) {
	cases := []struct {
		name string
		l    Layout
		err  string
	}{
		{"ok", Layout{Layers: []int{0, 1, 5}, TopK: 2, Experts: 8}, ""},
		{"dense", Layout{}, "no sparse layers"},
		{"no top-k", Layout{Layers: []int{0}, TopK: 0, Experts: 8}, "top_k 0: want 1 to the 8 experts"},
		{"top-k above experts", Layout{Layers: []int{0}, TopK: 9, Experts: 8}, "top_k 9"},
		{"unordered", Layout{Layers: []int{1, 0}, TopK: 1, Experts: 2}, "layers [1 0]"},
		{"repeated", Layout{Layers: []int{1, 1}, TopK: 1, Experts: 2}, "layers [1 1]"},
		{"negative", Layout{Layers: []int{-1}, TopK: 1, Experts: 2}, "layers [-1]"},
		{"absurd", Layout{Layers: []int{0}, TopK: 1, Experts: MaxID + 1}, "more than"},
	}
	for _, c := range cases {
		err := c.l.Check("x.safetensors")
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "x.safetensors")) {
			t.Errorf("%s: err = %v, want %q naming the file", c.name, err, c.err)
		}
	}
}

func TestParseLayers(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"0,1,5", []int{0, 1, 5}, false},
		{"3", []int{3}, false},
		{"", nil, true},
		{"0,,1", nil, true},
		{"01", nil, true},
		{"+1", nil, true},
		{"0, 1", nil, true},
	} {
		got, err := ParseLayers(c.in)
		if (err != nil) != c.err || !c.err && !reflect.DeepEqual(got, c.want) {
			t.Errorf("ParseLayers(%q) = %v, %v", c.in, got, err)
		}
		if !c.err && FormatLayers(got) != c.in {
			t.Errorf("FormatLayers(%v) = %q, want %q", got, FormatLayers(got), c.in)
		}
	}
}

func routes(l Layout, rows ...[]int32) *Routes {
	r := &Routes{Layout: l, Rows: len(rows)}
	for _, row := range rows {
		r.IDs = append(r.IDs, row...)
	}
	return r
}

func TestCompare(t *testing.T) {
	l := Layout{Layers: []int{1, 3}, TopK: 2, Experts: 8}
	ref := routes(l,
		[]int32{0, 1, 2, 3}, // row 0: same
		[]int32{0, 1, 2, 3}, // row 1: layer 1 reordered
		[]int32{0, 1, 2, 3}, // row 2: layer 3 swaps one expert
		[]int32{0, 1, 2, 3}, // row 3: both layers swap, one also reorders
	)
	test := routes(l,
		[]int32{0, 1, 2, 3},
		[]int32{1, 0, 2, 3},
		[]int32{0, 1, 2, 7},
		[]int32{5, 6, 7, 2},
	)
	rep, err := Compare(ref, test, []bool{false, true, true, false})
	if err != nil {
		t.Fatal(err)
	}
	var changes []Change
	for _, p := range rep.Positions {
		changes = append(changes, p.Change)
	}
	if want := []Change{Same, Order, Set, Set}; !reflect.DeepEqual(changes, want) {
		t.Errorf("changes %v, want %v", changes, want)
	}
	p := rep.Positions[3]
	if !reflect.DeepEqual(p.SetLayers, []int{1, 3}) || p.OrderLayers != nil {
		t.Errorf("position 3: set layers %v, order layers %v", p.SetLayers, p.OrderLayers)
	}
	if p := rep.Positions[1]; p.SetLayers != nil || !reflect.DeepEqual(p.OrderLayers, []int{1}) {
		t.Errorf("position 1: set layers %v, order layers %v", p.SetLayers, p.OrderLayers)
	}
	if !reflect.DeepEqual(rep.Positions[2].Test, [][]int{{0, 1}, {2, 7}}) {
		t.Errorf("position 2's test experts %v", rep.Positions[2].Test)
	}
	want := Summary{Positions: 4, SetChanged: 2, OrderOnly: 1, FirstSetChange: 2, Slots: 16, Swapped: 4,
		Flips: 2, FlipsAtSetChange: 1, Layers: []LayerSummary{
			{Layer: 1, SetChanged: 1, OrderOnly: 1, Swapped: 2},
			{Layer: 3, SetChanged: 2, Swapped: 2},
		}}
	if !reflect.DeepEqual(rep.Summary, want) {
		t.Errorf("summary\n got %+v\nwant %+v", rep.Summary, want)
	}
	if rep.Summary.FlipsAtSetChange > rep.Summary.Flips {
		t.Error("more flips at set changes than flips")
	}
}

func TestCompareErrors(t *testing.T) {
	l := Layout{Layers: []int{0}, TopK: 2, Experts: 4}
	ok := routes(l, []int32{0, 1})
	cases := []struct {
		name      string
		ref, test *Routes
		flips     []bool
		err       string
	}{
		{"nil", ok, nil, nil, "nil routes"},
		{"layout", ok, routes(Layout{Layers: []int{1}, TopK: 2, Experts: 4}, []int32{0, 1}), nil,
			"the reference routes layers 0: top-2 of 4 experts, the test layers 1: top-2 of 4 experts"},
		{"rows", ok, routes(l, []int32{0, 1}, []int32{0, 1}), nil, "1 rows of routes, the test 2"},
		{"expert range", ok, routes(l, []int32{0, 4}), nil, "test: row 0, layer 0: expert 4 is outside the 4 experts"},
		{"twice", routes(l, []int32{2, 2}), ok, nil, "reference: row 0, layer 0: expert 2 chosen twice"},
		{"short ids", &Routes{Layout: l, Rows: 1, IDs: []int32{1}}, ok, nil, "1 route ids for 1 rows of 2"},
		{"flips", ok, ok, []bool{true, false}, "2 flips for 1 rows"},
	}
	for _, c := range cases {
		if _, err := Compare(c.ref, c.test, c.flips); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.err)
		}
	}
}
