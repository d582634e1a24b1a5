// Package routing holds what a mixture of experts routed each position to
// and compares two captures' routes: per position and sparse layer, did
// the test pick another set of experts than the reference, or the same set
// in another order?
//
// Every engine row is Vocab logits followed by the routes: for each sparse
// layer, in layer order, the TopK chosen expert ids as float32, most
// probable first (engine.Width, model.Geometry.Routes); for GLM-4.5's
// sigmoid router, largest choice score (score plus its correction bias)
// first, the order it picks them in. [SplitRow] is where
// a row becomes logits and routes, so that argmax, statistics and dumps
// see only the logits. A dense model's rows have no routes, and splitting
// leaves them as they are.
//
// The package has no dependencies beyond the standard library: the dump
// format, the engine's guest, the reports and the page (GOOS=js) all use it.
package routing

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxID bounds an expert id: float32 holds every integer below 2^24
// exactly, and no model has that many experts.
const MaxID = 1 << 24

// Layout says what a row's routes are: TopK expert ids (of Experts) for
// each of Layers, the model's layer numbers of its sparse layers in
// increasing order. The zero Layout is a dense model's: no routes.
type Layout struct {
	Layers  []int `json:"layers"`
	TopK    int   `json:"top_k"`
	Experts int   `json:"experts"`
}

// Width is how many values a row carries after its logits.
func (l Layout) Width() int { return len(l.Layers) * l.TopK }

// Check refuses a layout a reader could not label: layers must be
// distinct, increasing and non-negative, TopK between 1 and Experts, and
// Experts at most MaxID. what names the layout's source in the message.
func (l Layout) Check(what string) error {
	switch {
	case len(l.Layers) == 0:
		return fmt.Errorf("%s: no sparse layers", what)
	case l.TopK < 1 || l.TopK > l.Experts:
		return fmt.Errorf("%s: top_k %d: want 1 to the %d experts", what, l.TopK, l.Experts)
	case l.Experts > MaxID:
		return fmt.Errorf("%s: %d experts, more than %d", what, l.Experts, MaxID)
	}
	for i, layer := range l.Layers {
		if layer < 0 || i > 0 && layer <= l.Layers[i-1] {
			return fmt.Errorf("%s: layers %v: want distinct layer numbers ≥ 0 in increasing order", what, l.Layers)
		}
	}
	return nil
}

// Equal says whether two layouts label routes the same way.
func (l Layout) Equal(o Layout) bool {
	if l.TopK != o.TopK || l.Experts != o.Experts || len(l.Layers) != len(o.Layers) {
		return false
	}
	for i := range l.Layers {
		if l.Layers[i] != o.Layers[i] {
			return false
		}
	}
	return true
}

// String describes l for people: "layers 0,1: top-2 of 8 experts".
func (l Layout) String() string {
	return "layers " + FormatLayers(l.Layers) + ": top-" + strconv.Itoa(l.TopK) + " of " + strconv.Itoa(l.Experts) + " experts"
}

// FormatLayers writes layer numbers as "0,1,5", the way dumps store them.
func FormatLayers(layers []int) string {
	s := make([]string, len(layers))
	for i, l := range layers {
		s[i] = strconv.Itoa(l)
	}
	return strings.Join(s, ",")
}

// ParseLayers reads what FormatLayers wrote.
func ParseLayers(s string) ([]int, error) {
	if s == "" {
		return nil, fmt.Errorf("no layer numbers")
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || strconv.Itoa(n) != f {
			return nil, fmt.Errorf("layer %q is not a decimal number", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// Routes are a capture's routes: IDs (Rows, Layout.Width()) row-major, each
// row its sparse layers' TopK experts in layer order, most probable first.
type Routes struct {
	Layout
	Rows int
	IDs  []int32
}

// Row is row i's ids (Width,), without copying.
func (r *Routes) Row(i int) []int32 {
	w := r.Width()
	return r.IDs[i*w : (i+1)*w]
}

// At is row i's TopK experts at sparse layer j (the j-th of Layers).
func (r *Routes) At(i, j int) []int32 {
	row := r.Row(i)
	return row[j*r.TopK : (j+1)*r.TopK]
}

// Check verifies that r's ids fit its layout: Rows × Width of them, each
// an expert below Experts, and no expert twice in one layer's choice.
// what names the routes' source in the message.
func (r *Routes) Check(what string) error {
	if err := r.Layout.Check(what); err != nil {
		return err
	}
	if r.Rows < 0 || len(r.IDs) != r.Rows*r.Width() {
		return fmt.Errorf("%s: %d route ids for %d rows of %d", what, len(r.IDs), r.Rows, r.Width())
	}
	for i := 0; i < r.Rows; i++ {
		for j, layer := range r.Layers {
			ids := r.At(i, j)
			for k, id := range ids {
				if id < 0 || int(id) >= r.Experts {
					return fmt.Errorf("%s: row %d, layer %d: expert %d is outside the %d experts", what, i, layer, id, r.Experts)
				}
				for _, prev := range ids[:k] {
					if prev == id {
						return fmt.Errorf("%s: row %d, layer %d: expert %d chosen twice", what, i, layer, id)
					}
				}
			}
		}
	}
	return nil
}

// SplitRow splits an engine row into its vocab logits (sharing row's
// memory, capped so that an append cannot reach the routes) and its route
// ids. A row of exactly vocab values is a dense model's: no ids, and the
// logits are the row itself.
func SplitRow(row []float32, vocab int) ([]float32, []int32, error) {
	if vocab < 1 || len(row) < vocab {
		return nil, nil, fmt.Errorf("a row of %d values cannot hold %d logits", len(row), vocab)
	}
	tail := row[vocab:]
	if len(tail) == 0 {
		return row[:vocab:vocab], nil, nil
	}
	ids := make([]int32, len(tail))
	for i, v := range tail {
		// The engines write small integers; anything else is a row that
		// is not what the engine contract says, and must not be read as
		// an expert (NaN fails both comparisons).
		if !(v >= 0 && v < MaxID) || v != float32(int32(v)) {
			return nil, nil, fmt.Errorf("value %d after the %d logits is %v, not an expert id", i, vocab, v)
		}
		ids[i] = int32(v)
	}
	return row[:vocab:vocab], ids, nil
}

// SplitRows splits engine rows with SplitRow: their logits, and their
// routes (nil for a dense model's rows, which stay as they are). Rows must
// all carry routes or none.
func SplitRows(rows [][]float32, vocab int) ([][]float32, [][]int32, error) {
	logits := make([][]float32, len(rows))
	var routes [][]int32
	for i, row := range rows {
		l, ids, err := SplitRow(row, vocab)
		if err != nil {
			return nil, nil, fmt.Errorf("row %d: %v", i, err)
		}
		logits[i] = l
		if ids != nil {
			if routes == nil {
				routes = make([][]int32, len(rows))
			}
			routes[i] = ids
		} else if routes != nil {
			return nil, nil, fmt.Errorf("row %d has no routes, the rows before it have", i)
		}
	}
	return logits, routes, nil
}
