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

// Decoder is greedy decoding as a state machine, for hosts that cannot
// block on a readback (a browser awaits it): Next says which tokens to feed,
// Feed takes the logit row computed for the last of them.
type Decoder struct {
	Result
	prompt []int
	maxNew int
	stops  []int
}

// NewDecoder starts a greedy decode of at most maxNew tokens after prompt,
// stopping after a stop id (which is kept in Output).
func NewDecoder(prompt []int, maxNew int, stops []int) *Decoder {
	return &Decoder{prompt: prompt, maxNew: maxNew, stops: stops}
}

// Next is the tokens to feed next: the prompt, then each new token; nil
// when decoding is done.
func (d *Decoder) Next() []int {
	switch {
	case d.maxNew <= 0 || d.Stopped || len(d.Output) == d.maxNew:
		return nil
	case len(d.Output) == 0:
		return d.prompt
	}
	return d.Output[len(d.Output)-1:]
}

// Feed appends the argmax of row, the logits after the tokens Next gave.
func (d *Decoder) Feed(row []float32) {
	next := Argmax(row)
	d.Output = append(d.Output, next)
	d.Rows = append(d.Rows, row)
	d.Stopped = slices.Contains(d.stops, next)
}

// Greedy runs a Decoder on f: feed prompt, then append the argmax token
// until maxNew tokens are out or a stop id is emitted.
func Greedy(f Forwarder, prompt []int, maxNew int, stops []int) (Result, error) {
	d := NewDecoder(prompt, maxNew, stops)
	for toks := d.Next(); toks != nil; toks = d.Next() {
		rows, err := f.Forward(toks, false)
		if err != nil {
			return d.Result, err
		}
		d.Feed(rows[len(rows)-1])
	}
	return d.Result, nil
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
