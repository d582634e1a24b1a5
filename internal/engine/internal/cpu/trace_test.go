package cpu

import (
	"slices"
	"testing"
)

// A trace from the embeddings is teacher forcing, and a trace started at
// any layer from the residual stream a full trace saw entering it gives
// the same logits, bit for bit: the sweeps recompute only a suffix.
func TestTraceFromABoundary(t *testing.T) {
	for _, p := range architectures() {
		t.Run(p.Name, func(t *testing.T) {
			m := load(t, p)
			ids := sequence(19, m.Vocab)
			tf, _ := New(m, len(ids))
			want, err := tf.Forward(ids, true)
			if err != nil {
				t.Fatal(err)
			}
			s, _ := New(m, len(ids))
			var bounds [][]float32 // bounds[l]: entering layer l
			full, err := s.Trace(ids, 0, nil, func(l int, x []float32) {
				if l != len(bounds) {
					t.Fatalf("seen layer %d after %d", l, len(bounds)-1)
				}
				bounds = append(bounds, slices.Clone(x))
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(bounds) != m.NumLayers {
				t.Fatalf("seen %d layers of %d", len(bounds), m.NumLayers)
			}
			if s.Pos() != 0 {
				t.Errorf("a trace left %d tokens in the cache", s.Pos())
			}
			w := m.Vocab + m.Routes()
			for i, row := range want {
				if !slices.Equal(row, full[i*w:(i+1)*w]) {
					t.Fatalf("trace row %d differs from teacher forcing", i)
				}
			}
			full = slices.Clone(full)
			for from := 1; from <= m.NumLayers; from++ {
				got, err := s.Trace(ids, from, bounds[from-1], nil)
				if err != nil {
					t.Fatal(err)
				}
				for i := range ids {
					if !slices.Equal(got[i*w:i*w+m.Vocab], full[i*w:i*w+m.Vocab]) {
						t.Fatalf("from layer %d: row %d differs from the full trace", from, i)
					}
				}
			}
			if _, err := s.Trace(ids, 1, nil, nil); err == nil {
				t.Error("a trace from layer 1 without its residual stream ran")
			}
		})
	}
}
