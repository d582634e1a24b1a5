package session

import (
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"logitscope/internal/engine"
)

// succ predicts (last token + 1) mod vocab, one-hot; it records resets
// and submissions so that the chunks a request takes can be checked. With
// routes, each row carries that many "expert ids" after its logits, all
// larger than any logit: token t was routed to t+5, t+6, ….
type succ struct {
	vocab, chunk int
	routes       int
	log          []string
	pos          int
	rows         []float32
}

func (c *succ) Name() string { return "succ" }
func (c *succ) Vocab() int   { return c.vocab }
func (c *succ) Routes() int  { return c.routes }
func (c *succ) Chunk() int   { return c.chunk }
func (c *succ) Close()       {}
func (c *succ) Reset()       { c.pos = 0; c.log = append(c.log, "reset") }

func (c *succ) Submit(tokens []int, want engine.Want) (engine.Region, error) {
	c.log = append(c.log, strings.Repeat("t", len(tokens))+map[engine.Want]string{engine.None: "", engine.Last: "1", engine.All: "*"}[want])
	c.pos += len(tokens)
	if want == engine.Last {
		tokens = tokens[len(tokens)-1:]
	}
	c.rows = c.rows[:0]
	for _, t := range tokens {
		row := make([]float32, c.vocab+c.routes)
		row[(t+1)%c.vocab] = 1
		for j := range c.routes {
			row[c.vocab+j] = float32(t + 5 + j)
		}
		c.rows = append(c.rows, row...)
	}
	if want == engine.None {
		return engine.Region{}, nil
	}
	return engine.Region{Rows: len(tokens), Host: c.rows}, nil
}

func (c *succ) Read(r engine.Region) ([][]float32, error) {
	var out [][]float32
	w := c.vocab + c.routes
	for i := range r.Rows {
		out = append(out, append([]float32(nil), r.Host[i*w:(i+1)*w]...))
	}
	return out, nil
}

func TestDrive(t *testing.T) {
	cases := []struct {
		name    string
		chunk   int
		req     Request
		log     []string
		output  []int
		targets []int
		argmax  []int
		stopped bool
		rows    int
	}{
		{"greedy", 32, Request{Mode: Greedy, PromptIDs: []int{1, 2, 3}, MaxNew: 3},
			[]string{"reset", "ttt1", "t1", "t1"}, []int{4, 5, 6}, nil, nil, false, 3},
		{"greedy stop", 32, Request{Mode: Greedy, PromptIDs: []int{1}, MaxNew: 5, Stops: []int{3}},
			[]string{"reset", "t1", "t1"}, []int{2, 3}, nil, nil, true, 2},
		{"forced", 32, Request{Mode: Forced, PromptIDs: []int{1, 2}, Outputs: []int{3, 9, 5}, Stops: []int{5}},
			[]string{"reset", "tttt*"}, []int{3, 9, 5}, nil, []int{3, 4, 0}, true, 3},
		{"panel", 32, Request{Mode: Panel, Windows: [][]int{{1, 2, 3}, {7, 8}}},
			[]string{"reset", "ttt*", "reset", "tt*"}, nil, []int{2, 3, 8}, nil, false, 3},
		// Chunks of 2: a prefill's early chunks want no row, a forced
		// sequence's rows start mid-chunk, and a window's last token alone
		// predicts past the window, so it is never submitted.
		{"greedy chunked", 2, Request{Mode: Greedy, PromptIDs: []int{1, 2, 3, 4, 5}, MaxNew: 2},
			[]string{"reset", "tt", "tt", "t1", "t1"}, []int{6, 7}, nil, nil, false, 2},
		{"forced chunked", 2, Request{Mode: Forced, PromptIDs: []int{1, 2, 3}, Outputs: []int{4, 5, 6}},
			[]string{"reset", "tt", "tt*", "t1"}, []int{4, 5, 6}, nil, []int{4, 5, 6}, false, 3},
		{"panel chunked", 2, Request{Mode: Panel, Windows: [][]int{{1, 2, 3}, {4, 5, 6, 7}}},
			[]string{"reset", "tt*", "reset", "tt*", "tt*"}, nil, []int{2, 3, 5, 6, 7}, nil, false, 5},
	}
	// Every case again with routes after the logits: greedy decoding and
	// argmax never take an expert id for a token.
	for _, routes := range []int{0, 2} {
		for _, c := range cases {
			t.Run(fmt.Sprintf("%s/routes%d", c.name, routes), func(t *testing.T) {
				e := &succ{vocab: 10, chunk: c.chunk, routes: routes}
				ran := 0
				res, err := DriveTracked(e, c.req, func(n int) { ran += n })
				if err != nil {
					t.Fatal(err)
				}
				// What progress is told: every token submitted, no more
				// than the request's Tokens.
				if submitted := strings.Count(strings.ReplaceAll(strings.Join(e.log, ""), "reset", ""), "t"); ran != submitted || ran > c.req.Tokens() {
					t.Errorf("told %d tokens, the engine ran %d, Tokens() = %d", ran, submitted, c.req.Tokens())
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
}

// A mixture of experts' rows carry routes after the logits: argmax (greedy
// decoding, forced agreement) and the result's rows see only the logits,
// the routes come out beside them, and a dense model's rows are the
// engine's rows unchanged.
func TestDriveSplitsRoutes(t *testing.T) {
	for _, c := range []struct {
		name string
		req  Request
	}{
		{"greedy", Request{Mode: Greedy, PromptIDs: []int{1, 2, 3}, MaxNew: 3}},
		{"forced", Request{Mode: Forced, PromptIDs: []int{1, 2}, Outputs: []int{3, 4, 5}}},
		{"panel", Request{Mode: Panel, Windows: [][]int{{1, 2, 3}, {7, 8}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dense, err := Drive(&succ{vocab: 10, chunk: 2}, c.req)
			if err != nil {
				t.Fatal(err)
			}
			moe, err := Drive(&succ{vocab: 10, chunk: 2, routes: 4}, c.req)
			if err != nil {
				t.Fatal(err)
			}
			if dense.Routes != nil {
				t.Errorf("a dense model's result has routes %v", dense.Routes)
			}
			if !reflect.DeepEqual(moe.Rows, dense.Rows) || !reflect.DeepEqual(moe.Output, dense.Output) ||
				!reflect.DeepEqual(moe.Argmax, dense.Argmax) || !reflect.DeepEqual(moe.Targets, dense.Targets) {
				t.Fatalf("with routes: rows %v output %v argmax %v targets %v\nwithout: rows %v output %v argmax %v targets %v",
					moe.Rows, moe.Output, moe.Argmax, moe.Targets, dense.Rows, dense.Output, dense.Argmax, dense.Targets)
			}
			if len(moe.Routes) != len(moe.Rows) {
				t.Fatalf("%d routes for %d rows", len(moe.Routes), len(moe.Rows))
			}
			for i, ids := range moe.Routes {
				// Row i predicts token (t+1) mod 10 after token t, which
				// was routed to t+5 … t+8.
				tok := int32(Argmax(moe.Rows[i])+9) % 10
				if want := []int32{tok + 5, tok + 6, tok + 7, tok + 8}; !reflect.DeepEqual(ids, want) {
					t.Errorf("row %d: routes %v, want %v", i, ids, want)
				}
				if len(moe.Rows[i]) != 10 {
					t.Errorf("row %d has %d values, want the 10 logits", i, len(moe.Rows[i]))
				}
			}
		})
	}
	// A row that is not logits and expert ids is refused.
	r, _ := New(Request{Mode: Panel, Windows: [][]int{{1, 2}}}, 32, 2)
	r.Next()
	if err := r.Feed([][]float32{{0, 1, 0.5}}); err == nil || !strings.Contains(err.Error(), "value 0 after the 2 logits is 0.5, not an expert id") {
		t.Errorf("a row with a fractional route: %v", err)
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
		if _, err := New(c.req, 32, 10); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v", c.req, err)
		}
	}
	r, _ := New(Request{Mode: Panel, Windows: [][]int{{1, 2}}}, 32, 10)
	if err := r.Feed(nil); err == nil || !strings.Contains(err.Error(), "no chunk pending") {
		t.Errorf("feed before next: %v", err)
	}
	r.Next()
	if err := r.Feed(make([][]float32, 2)); err == nil || !strings.Contains(err.Error(), "fed 2 rows, the chunk keeps 1") {
		t.Errorf("short feed: %v", err)
	}
}

// The kept rows of each chunk, and a streaming host that feeds forced and
// panel chunks without rows (it keeps them itself): the result has the
// targets but no rows.
func TestKeepAndStream(t *testing.T) {
	r, _ := New(Request{Mode: Forced, PromptIDs: []int{1, 2, 3}, Outputs: []int{4, 5}}, 32, 10)
	if c, _ := r.Next(); c.Keep != [2]int{2, 4} || len(c.Tokens) != 4 || c.Want != engine.All || !c.Reset {
		t.Fatalf("forced chunk %+v", c)
	}
	r, _ = New(Request{Mode: Panel, Windows: [][]int{{1, 2, 3}, {4, 5}}, StreamRows: true}, 32, 10)
	for i, want := range [][2]int{{0, 2}, {0, 1}} {
		c, ok := r.Next()
		if !ok || c.Keep != want {
			t.Fatalf("window %d: %+v", i, c)
		}
		if err := r.Feed(nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := r.Next(); ok || !reflect.DeepEqual(r.Result().Targets, []int{2, 3, 5}) || r.Result().Rows != nil {
		t.Fatalf("after streaming: %+v", r.Result())
	}
	g, _ := New(Request{Mode: Greedy, PromptIDs: []int{1, 2}, MaxNew: 1, StreamRows: true}, 32, 10)
	if c, _ := g.Next(); c.Keep != [2]int{0, 1} || c.Want != engine.Last {
		t.Fatalf("greedy chunk %+v", c)
	}
	if err := g.Feed(nil); err == nil {
		t.Fatal("a greedy chunk was fed without its row")
	}
}

// Forward splits like a request and keeps every row, or the last.
func TestForward(t *testing.T) {
	e := &succ{vocab: 10, chunk: 2}
	rows, err := Forward(e, []int{1, 2, 3, 4, 5}, true)
	if err != nil || len(rows) != 5 || Argmax(rows[4]) != 6 {
		t.Fatalf("all: %d rows, %v", len(rows), err)
	}
	rows, err = Forward(e, []int{1, 2, 3}, false)
	if err != nil || len(rows) != 1 || Argmax(rows[0]) != 4 {
		t.Fatalf("last: %d rows, %v", len(rows), err)
	}
	if want := []string{"tt*", "tt*", "t1", "tt", "t1"}; !reflect.DeepEqual(e.log, want) {
		t.Fatalf("log %v, want %v", e.log, want)
	}
}

func ExampleWindows() {
	fmt.Println(Windows([]int{1, 2, 3, 4, 5, 6, 7, 8}, 3, nil))
	fmt.Println(Windows([]int{1, 2, 3, 4}, 3, nil)) // [4] alone predicts nothing
	// With a BOS (0), every token of the text is predicted once.
	fmt.Println(Windows([]int{1, 2, 3, 4, 5}, 3, []int{0}))
	// Output:
	// [[1 2 3] [4 5 6] [7 8]]
	// [[1 2 3]]
	// [[0 1 2] [0 3 4] [0 5]]
}

func ExampleArgmax() {
	nan := float32(math.NaN())
	fmt.Println(Argmax([]float32{1, 3, 3, 2}), Argmax([]float32{nan, 1, 0}), Argmax([]float32{-1}))
	// Output: 1 1 0
}
