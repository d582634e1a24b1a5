package session

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// chain predicts (last token + 1) mod vocab, one-hot; it records resets
// and feeds so that the steps a request takes can be checked.
type chain struct {
	vocab int
	log   []string
	pos   int
}

func (c *chain) Reset() { c.pos = 0; c.log = append(c.log, "reset") }

func (c *chain) Forward(tokens []int, all bool) ([][]float32, error) {
	c.log = append(c.log, strings.Repeat("t", len(tokens)))
	var rows [][]float32
	for _, t := range tokens {
		row := make([]float32, c.vocab)
		row[(t+1)%c.vocab] = 1
		rows = append(rows, row)
	}
	c.pos += len(tokens)
	if !all {
		rows = rows[len(rows)-1:]
	}
	return rows, nil
}

func TestDrive(t *testing.T) {
	cases := []struct {
		name    string
		req     Request
		log     []string
		output  []int
		targets []int
		argmax  []int
		stopped bool
		rows    int
	}{
		{"greedy", Request{Mode: Greedy, PromptIDs: []int{1, 2, 3}, MaxNew: 3},
			[]string{"reset", "ttt", "t", "t"}, []int{4, 5, 6}, nil, nil, false, 3},
		{"greedy stop", Request{Mode: Greedy, PromptIDs: []int{1}, MaxNew: 5, Stops: []int{3}},
			[]string{"reset", "t", "t"}, []int{2, 3}, nil, nil, true, 2},
		{"forced", Request{Mode: Forced, PromptIDs: []int{1, 2}, Outputs: []int{3, 9, 5}, Stops: []int{5}},
			[]string{"reset", "tttt"}, []int{3, 9, 5}, nil, []int{3, 4, 0}, true, 3},
		{"panel", Request{Mode: Panel, Windows: [][]int{{1, 2, 3}, {7, 8}}},
			[]string{"reset", "ttt", "reset", "tt"}, nil, []int{2, 3, 8}, nil, false, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := &chain{vocab: 10}
			res, err := Drive(e, c.req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(e.log, c.log) || !reflect.DeepEqual(res.Output, c.output) ||
				!reflect.DeepEqual(res.Targets, c.targets) || !reflect.DeepEqual(res.Argmax, c.argmax) ||
				res.Stopped != c.stopped || len(res.Rows) != c.rows {
				t.Fatalf("log %v output %v targets %v argmax %v stopped %v rows %d", e.log, res.Output, res.Targets, res.Argmax, res.Stopped, len(res.Rows))
			}
			if c.req.Capacity() < e.pos {
				t.Fatalf("capacity %d, the run needed %d", c.req.Capacity(), e.pos)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	for _, c := range []struct {
		req  Request
		want string
	}{
		{Request{Mode: "beam"}, `unknown request mode "beam"`},
		{Request{Mode: Greedy}, "without prompt ids"},
		{Request{Mode: Panel, Windows: [][]int{{1, 2}, {3}}}, "panel window 2 has 1 tokens"},
	} {
		if _, err := New(c.req); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v", c.req, err)
		}
	}
	r, _ := New(Request{Mode: Panel, Windows: [][]int{{1, 2}}})
	if err := r.Feed(make([][]float32, 2)); err == nil || !strings.Contains(err.Error(), "fed 2 rows, the step keeps 1") {
		t.Errorf("short feed: %v", err)
	}
}

// The kept rows of each step, and a streaming host that advances without
// handing rows back.
func TestKeepAndAdvance(t *testing.T) {
	r, _ := New(Request{Mode: Forced, PromptIDs: []int{1, 2, 3}, Outputs: []int{4, 5}})
	if st, _ := r.Next(); st.Keep != [2]int{2, 4} || len(st.Tokens) != 4 {
		t.Fatalf("forced step %+v", st)
	}
	r, _ = New(Request{Mode: Panel, Windows: [][]int{{1, 2, 3}, {4, 5}}})
	for i, want := range [][2]int{{0, 2}, {0, 1}} {
		st, ok := r.Next()
		if !ok || st.Keep != want {
			t.Fatalf("window %d: %+v", i, st)
		}
		if err := r.Advance(); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := r.Next(); ok || !reflect.DeepEqual(r.Result().Targets, []int{2, 3, 5}) || r.Result().Rows != nil {
		t.Fatalf("after streaming: %+v", r.Result())
	}
	if err := r.Advance(); err == nil {
		t.Fatal("advanced past the end")
	}
	g, _ := New(Request{Mode: Greedy, PromptIDs: []int{1, 2}, MaxNew: 1})
	if st, _ := g.Next(); st.Keep != [2]int{1, 2} {
		t.Fatalf("greedy step %+v", st)
	}
	if err := g.Advance(); err == nil {
		t.Fatal("a greedy step advanced without its row")
	}
}

func ExampleWindows() {
	fmt.Println(Windows([]int{1, 2, 3, 4, 5, 6, 7, 8}, 3))
	fmt.Println(Windows([]int{1, 2, 3, 4}, 3)) // [4] alone predicts nothing
	// Output:
	// [[1 2 3] [4 5 6] [7 8]]
	// [[1 2 3]]
}
