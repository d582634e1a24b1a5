package generate

import (
	"fmt"
	"math"
	"reflect"
	"testing"
)

// chain is a Forwarder whose next token is always (last fed token + 1) mod
// its vocabulary: the rows are one-hot at that token.
type chain struct {
	vocab int
	fed   []int
}

func (c *chain) Forward(tokens []int, all bool) ([][]float32, error) {
	c.fed = append(c.fed, tokens...)
	var rows [][]float32
	for _, t := range tokens {
		row := make([]float32, c.vocab)
		row[(t+1)%c.vocab] = 1
		rows = append(rows, row)
	}
	if !all {
		rows = rows[len(rows)-1:]
	}
	return rows, nil
}

func TestGreedy(t *testing.T) {
	cases := []struct {
		name    string
		prompt  []int
		maxNew  int
		stops   []int
		out     []int
		stopped bool
	}{
		{"runs to max-new", []int{0, 1}, 3, nil, []int{2, 3, 4}, false},
		{"stop id kept in output", []int{5}, 8, []int{8}, []int{6, 7, 8}, true},
		{"stop on the first token", []int{5}, 8, []int{6}, []int{6}, true},
		{"stop on the last allowed token", []int{5}, 2, []int{7}, []int{6, 7}, true},
		{"max-new 0", []int{5}, 0, nil, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := &chain{vocab: 10}
			r, err := Greedy(f, c.prompt, c.maxNew, c.stops)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.Output, c.out) || r.Stopped != c.stopped || len(r.Rows) != len(r.Output) {
				t.Fatalf("got %v stopped %v rows %d", r.Output, r.Stopped, len(r.Rows))
			}
			// Row i is the one the token was chosen from.
			for i, row := range r.Rows {
				if Argmax(row) != r.Output[i] {
					t.Fatalf("row %d does not pick output %d", i, r.Output[i])
				}
			}
			// The last output token is never fed: its row is not needed.
			if len(c.out) > 0 && len(f.fed) != len(c.prompt)+len(c.out)-1 {
				t.Fatalf("fed %v", f.fed)
			}
		})
	}
}

func ExampleArgmax() {
	nan := float32(math.NaN())
	fmt.Println(Argmax([]float32{1, 3, 3, 2}), Argmax([]float32{nan, 1, 0}), Argmax([]float32{-1}))
	// Output: 1 1 0
}
