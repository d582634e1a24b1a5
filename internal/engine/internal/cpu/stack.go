package cpu

import "logitscope/internal/model"

// stack reads matrices of the same columns as one (Σ rows, cols), their
// rows one after another: their pieces, not copies of their weights, and
// their biases in one slice (nil when none has one). One product with
// the stack is one job for the crew where the parts were several: a
// decode step's k and v projections, too small to share alone, go with
// q, and up with gate. Each row has its own order, so every part's rows
// get the bits they get alone. ok is false where a part is float32 (its
// rows are no pieces), EXL3 (its product rotates its own inputs) or a
// lookup matrix (its pieces name rows of their own matrix), only
// some parts have a bias, or only some take 8-bit activations (each part
// keeps its own arithmetic).
func stack(ws []*model.Matrix, bs [][]float32) (st *model.Matrix, b []float32, ok bool) {
	st = &model.Matrix{Cols: ws[0].Cols}
	biased, a8 := bs[0] != nil, takesA8(ws[0])
	for i, w := range ws {
		if w.Data != nil || len(w.Pieces) == 0 || exl3Piece(w) != nil || w.Pieces[0].Format.Lookup != nil || w.Cols != st.Cols || (bs[i] != nil) != biased || takesA8(w) != a8 {
			return nil, nil, false
		}
		for _, p := range w.Pieces {
			p.Row0 += st.Rows
			st.Pieces = append(st.Pieces, p)
		}
		st.Rows += w.Rows
		if biased {
			b = append(b, bs[i]...)
		}
	}
	return st, b, true
}

// stacked is what stack gave.
type stacked struct {
	W  *model.Matrix
	b  []float32
	ok bool
}

// stack is the package's stack, made once per first part and kept: the
// same layers are stacked at every step, and the biases copied each time.
// Use forgets them: another mix may change any part of a layer.
func (s *State) stack(ws []*model.Matrix, bs [][]float32) (*model.Matrix, []float32, bool) {
	st, hit := s.stacks[ws[0]]
	if !hit {
		st.W, st.b, st.ok = stack(ws, bs)
		s.stacks[ws[0]] = st
	}
	return st.W, st.b, st.ok
}

// unstack copies y (T, Σ widths), the product with a stack, into each
// out (T, width) of its parts.
func unstack(y []float32, T int, outs ...[]float32) {
	n := len(y) / T
	for t := range T {
		c := t * n
		for _, o := range outs {
			w := len(o) / T
			c += copy(o[t*w:(t+1)*w], y[c:c+w])
		}
	}
}
