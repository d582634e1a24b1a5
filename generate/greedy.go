// Package generate holds the decode policy: greedy decoding that keeps the
// full logit row computed before each output token.
package generate

import "slices"

// Forwarder appends tokens to a sequence and returns logit rows: one per
// token with all, else only the last (a KV-cache engine).
type Forwarder interface {
	Forward(tokens []int, all bool) ([][]float32, error)
}

// Result of a greedy decode. Rows[i] is the logit row computed just before
// Output[i] was appended, so len(Rows) == len(Output).
type Result struct {
	Output  []int
	Rows    [][]float32
	Stopped bool // the last output token is a stop id
}

// Greedy feeds prompt, then appends the argmax token until maxNew tokens
// are out or a stop id is emitted (the stop id is kept in Output).
func Greedy(f Forwarder, prompt []int, maxNew int, stops []int) (Result, error) {
	var r Result
	if maxNew <= 0 {
		return r, nil
	}
	rows, err := f.Forward(prompt, false)
	for err == nil {
		row := rows[len(rows)-1]
		next := Argmax(row)
		r.Output = append(r.Output, next)
		r.Rows = append(r.Rows, row)
		if slices.Contains(stops, next) {
			r.Stopped = true
			break
		}
		if len(r.Output) == maxNew {
			break
		}
		rows, err = f.Forward([]int{next}, false)
	}
	return r, err
}

// Argmax is the index of the largest value; ties go to the lowest index, as
// torch.argmax does. NaN never wins.
func Argmax(row []float32) int {
	best := 0
	for i, v := range row {
		if v > row[best] || row[best] != row[best] {
			best = i
		}
	}
	return best
}
