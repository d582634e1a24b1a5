package gpuengine

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"logitscope/internal/engine/internal/acts"
	"logitscope/internal/format/lookup"
	"logitscope/internal/gpu"
	"logitscope/internal/model"
	"logitscope/shaders"
)

// LookupHeaderWords is the words of a lookup blob's header (lookup.wgsl).
const LookupHeaderWords = 10

// LookupBlobBytes is the bytes of rows rows of m as lookup.wgsl reads
// them (LookupBlob): header, codes (rows padded to whole words), scales,
// offsets, table, group indices.
func LookupBlobBytes(m *lookup.Matrix, rows int) int64 {
	words := LookupHeaderWords + rows*lookupRowWords(m) + rows*m.Groups + 1<<m.Bits
	if m.Offset != nil {
		words += rows * m.Groups
	}
	if m.GIdx != nil {
		words += m.Cols
	}
	return 4 * int64(words)
}

func lookupRowWords(m *lookup.Matrix) int { return (m.RowBytes() + 3) / 4 }

// LookupBlob lays out rows [row0, row0+rows) of m as lookup.wgsl reads
// them, little-endian u32 words: the header (LookupHeaderWords: bits,
// cols, rows, groups, group size or 0 where GIdx sets the groups, words
// of codes a row, then the words where the scales, offsets (0: none),
// table and group indices (0: none) begin), each row's codes as m stores
// them padded with zeros to whole words, the rows' scales (rows, groups)
// as f32, their offsets likewise, the table (1<<bits f32), GIdx (cols
// u32).
func LookupBlob(m *lookup.Matrix, row0, rows int) []byte {
	rw, g := lookupRowWords(m), m.Groups
	scaleAt := LookupHeaderWords + rows*rw
	offsetAt, next := 0, scaleAt+rows*g
	if m.Offset != nil {
		offsetAt, next = next, next+rows*g
	}
	tableAt, gidxAt := next, 0
	if m.GIdx != nil {
		gidxAt = tableAt + 1<<m.Bits
	}
	gs := m.GroupSize
	if m.GIdx != nil {
		gs = 0
	}
	out := make([]byte, LookupBlobBytes(m, rows))
	put := func(at int, v uint32) { binary.LittleEndian.PutUint32(out[4*at:], v) }
	for i, v := range []int{m.Bits, m.Cols, rows, g, gs, rw, scaleAt, offsetAt, tableAt, gidxAt} {
		put(i, uint32(v))
	}
	rb := m.RowBytes()
	for r := range rows {
		copy(out[4*(LookupHeaderWords+r*rw):], m.Codes[(row0+r)*rb:(row0+r+1)*rb])
	}
	floats := func(at int, v []float32) {
		for i, x := range v {
			put(at+i, math.Float32bits(x))
		}
	}
	floats(scaleAt, m.Scale[row0*g:(row0+rows)*g])
	if m.Offset != nil {
		floats(offsetAt, m.Offset[row0*g:(row0+rows)*g])
	}
	floats(tableAt, m.Table)
	for c, gi := range m.GIdx {
		put(gidxAt+c, uint32(gi))
	}
	return out
}

// LookupPieces splits lookup matrix m into pieces of whole rows whose
// blobs are at most maxBytes each, their products rounding activations
// as mode says (acts' names). The kernels decode groups of 32 whole
// columns: m's columns must be a multiple of 32.
func LookupPieces(name string, m *lookup.Matrix, mode string, maxBytes int64) ([]Piece, error) {
	if err := m.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := acts.Check(mode); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if m.Cols%32 != 0 {
		return nil, fmt.Errorf("%s: the GPU reads lookup matrices of whole groups of 32 columns, not %d", name, m.Cols)
	}
	maxBytes = min(maxBytes, maxAddressed)
	per := m.Rows
	for per > 0 && LookupBlobBytes(m, per) > maxBytes {
		per = int((maxBytes - LookupBlobBytes(m, 0)) / (LookupBlobBytes(m, 1) - LookupBlobBytes(m, 0)))
	}
	if per <= 0 {
		return nil, fmt.Errorf("%s: a row of a %d-bit lookup matrix with %d columns is over the device's %d-byte binding limit", name, m.Bits, m.Cols, maxBytes)
	}
	var out []Piece
	for a := 0; a < m.Rows; a += per {
		b := min(m.Rows, a+per)
		out = append(out, Piece{Row0: a, Rows: b - a, Cols: m.Cols, Format: shaders.Lookup, File: name,
			Length: LookupBlobBytes(m, b-a), Lookup: m, Acts: mode})
	}
	return out, nil
}

// QuantizedSource uploads a hub quantization's weights: each matrix that
// q looks up as lookup pieces (their products rounding activations as
// acts(name) says), every other matrix as float32 from q.Float32, held in
// memory.
func QuantizedSource(q model.Quantized, acts func(name string) string) Source {
	return quantSource{q, acts}
}

type quantSource struct {
	q    model.Quantized
	acts func(string) string
}

func (s quantSource) Matrix(name string, maxBytes int64) ([]Piece, error) {
	m, err := s.q.Lookup(name)
	if err != nil {
		return nil, err
	}
	if m != nil {
		return LookupPieces(name, m, s.acts(name), maxBytes)
	}
	v, shape, err := s.q.Float32(name)
	if err != nil {
		return nil, err
	}
	if len(shape) != 2 || shape[0]*shape[1] != len(v) {
		return nil, fmt.Errorf("%s: shape %v, not a matrix", name, shape)
	}
	rows, cols := shape[0], shape[1]
	// The floats' own bytes (every target is little-endian), not a copy:
	// the CPU engine keeps them as its float32 rows.
	data := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
	per := max(1, int(min(maxBytes, maxAddressed)/int64(4*cols)))
	var out []Piece
	for a := 0; a < rows; a += per {
		b := min(rows, a+per)
		out = append(out, Piece{Row0: a, Rows: b - a, Cols: cols, Format: shaders.F32, File: name,
			Length: int64(4 * (b - a) * cols), Data: data[4*a*cols : 4*b*cols]})
	}
	return out, nil
}

func (s quantSource) Vector(name string) ([]float32, error) {
	v, _, err := s.q.Float32(name)
	return v, err
}

// bytes is a piece held in memory (Data, or a lookup piece's blob), or
// nil for one in a file.
func (p Piece) bytes() []byte {
	if p.Lookup != nil {
		return LookupBlob(p.Lookup, p.Row0, p.Rows)
	}
	return p.Data
}

// actsModes numbers acts' names as acts.wgsl's mode.
var actsModes = map[string]uint32{acts.Int8: 1, acts.FP8: 2, acts.FP4: 3}

// actsOp rounds rows(s) rows of cols activations of x from xOff into
// e.actsX (row r at r*cols) as mode says (acts.wgsl), for a product with
// a lookup matrix whose activations are quantized.
func (e *State) actsOp(name, mode string, x gpu.Buffer, xOff func(step) int, cols int, rows func(step) int) pending {
	return pending{
		op: op{
			name: name + ".acts", family: "acts " + mode, pipe: e.kernel("acts", shaders.Acts(), "main"),
			dims:   func(s step) (uint32, uint32, uint32) { return uint32(rows(s)), 1, 1 },
			params: func(s step) []uint32 { return []uint32{actsModes[mode], uint32(cols), uint32(xOff(s)), 0} },
		},
		bindings: []gpu.Binding{{Binding: 0, Buffer: x}, {Binding: 1, Buffer: e.actsX}},
		paramsAt: 4,
	}
}

// actsScratch makes e.actsX once, as large as the rounded X of any
// product of the model: a chunk's rows (times TopK for experts) by the
// widest matrix's columns.
func (e *State) actsScratch() error {
	if e.actsX != 0 {
		return nil
	}
	g := e.g
	dense := max(g.Dim, g.Heads*g.HeadDim, g.Intermediate, g.SharedIntermediate)
	var err error
	e.actsX, err = e.buffer("acts-x", int64(e.chunk)*int64(max(dense, g.TopK*max(g.Dim, g.ExpertIntermediate)))*4)
	return err
}
