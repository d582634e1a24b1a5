package session

import "slices"

// decoder is greedy decoding: the prompt, then each new token, until
// maxNew tokens are out or a stop id (kept in output) is emitted.
type decoder struct {
	prompt  []int
	maxNew  int
	stops   []int
	output  []int
	stopped bool
}

func newDecoder(prompt []int, maxNew int, stops []int) *decoder {
	return &decoder{prompt: prompt, maxNew: maxNew, stops: stops}
}

// next is the tokens to feed next; nil when decoding is done.
func (d *decoder) next() []int {
	switch {
	case d.maxNew <= 0 || d.stopped || len(d.output) == d.maxNew:
		return nil
	case len(d.output) == 0:
		return d.prompt
	}
	return d.output[len(d.output)-1:]
}

// feed appends the argmax of row, the logits after the tokens next gave.
func (d *decoder) feed(row []float32) {
	id := Argmax(row)
	d.output = append(d.output, id)
	d.stopped = slices.Contains(d.stops, id)
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
