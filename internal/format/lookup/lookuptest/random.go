// Random lookup matrices for the engine's tests and benchmarks: every part
// of the form exercised (4 and 8 bits, groups by size or by a scattered
// GIdx, offsets or none) with values of a trained model's size.

package lookuptest

import (
	"math/rand/v2"

	"logitscope/internal/format/lookup"
)

// Shape is how a random matrix is quantized.
type Shape struct {
	Bits int
	// GroupSize is the columns of a group; -1 is one group per row.
	GroupSize int
	// GIdx scatters the columns over the groups (GPTQ's act-order): each
	// group holds GroupSize columns, not in runs.
	GIdx bool
	// Offset adds an offset per group (MLX's bias, GPTQ's −s·z).
	Offset bool
	// Grid makes the table an integer grid centred on zero, table[q] =
	// q − 2^(bits−1), as GPTQ's, MLX's and int8's are, instead of random.
	Grid bool
}

// Random is a (rows, cols) matrix of shape s, random codes and table,
// scales and offsets such that weights are of about 0.02.
func Random(rng *rand.Rand, rows, cols int, s Shape) *lookup.Matrix {
	gs := s.GroupSize
	if gs <= 0 {
		gs = cols
	}
	m := &lookup.Matrix{Rows: rows, Cols: cols, Bits: s.Bits, GroupSize: gs, Groups: (cols + gs - 1) / gs}
	m.Codes = make([]byte, rows*m.RowBytes())
	for i := range m.Codes {
		m.Codes[i] = byte(rng.Uint32())
	}
	if s.Bits == 4 && cols%2 == 1 { // the last byte's high nibble is padding
		for r := range rows {
			m.Codes[(r+1)*m.RowBytes()-1] &= 15
		}
	}
	m.Table = make([]float32, 1<<s.Bits)
	for i := range m.Table {
		m.Table[i] = float32(rng.NormFloat64())
		if s.Grid {
			m.Table[i] = float32(i - len(m.Table)/2)
		}
	}
	m.Scale = make([]float32, rows*m.Groups)
	for i := range m.Scale {
		m.Scale[i] = float32(0.01 + 0.01*rng.Float64())
	}
	if s.Offset {
		m.Offset = make([]float32, rows*m.Groups)
		for i := range m.Offset {
			m.Offset[i] = float32(0.01 * rng.NormFloat64())
		}
	}
	if s.GIdx {
		m.GIdx = make([]int32, cols)
		for i, c := range rng.Perm(cols) {
			m.GIdx[c] = int32(i / gs)
		}
	}
	if err := m.Check(); err != nil {
		panic(err)
	}
	return m
}
