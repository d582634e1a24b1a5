package cpu

import (
	"slices"

	"logitscope/internal/engine/internal/acts"
	"logitscope/internal/format/lookup"
	"logitscope/internal/model"
)

// A hub quantization's lookup matrix (model.Format.Lookup) is multiplied
// like every stored format: matmulRows decodes a block of its rows into
// scratch (decodeLookup), then multiplies the block with the tokens; the
// matrix itself stays codes, a table and a scale and offset per group.

// decodeLookup decodes rows [a, b) of lookup piece p (k columns) into dst,
// row r at dst[(r-a)*k:], each weight as lookup.Matrix.Row computes it:
// float32(Table[q]·Scale) + Offset.
func decodeLookup(p *model.Piece, k, a, b int, dst []float32) {
	m := p.Format.Lookup
	d := rowDecoder{zeros: make([]float32, m.Groups)}
	d.base, d.affine = affineTable(m.Table)
	for r := a; r < b; r++ {
		d.row(m, p.Row0+r, dst[(r-a)*k:(r-a+1)*k])
	}
}

// rowDecoder is what decoding a lookup matrix's rows takes once: zeros
// (m.Groups of them) stand in for a matrix's missing offsets, and base
// and affine are affineTable's of its table.
type rowDecoder struct {
	zeros  []float32
	base   int32
	affine bool
}

// affineTable says whether table[q] = base + q for every code q, each an
// integer (an integer grid's table: GPTQ's, MLX's, int8), which a decoder
// may then compute rather than look up.
func affineTable(table []float32) (base int32, affine bool) {
	if len(table) == 0 || table[0] != float32(int32(table[0])) {
		return 0, false
	}
	base = int32(table[0])
	for q, v := range table {
		if v != float32(base+int32(q)) {
			return 0, false
		}
	}
	return base, true
}

// row is m.Row(r, dst), a group at a time where the groups are runs of
// columns: by lookupRowAsm where the CPU has it, else in Go, a 4-bit
// group's sixteen values computed once into a table, each as Row
// computes it.
func (d *rowDecoder) row(m *lookup.Matrix, r int, dst []float32) {
	if m.GIdx != nil {
		m.Row(r, dst)
		return
	}
	codes := m.Codes[r*m.RowBytes() : (r+1)*m.RowBytes()]
	scales, offsets := m.Scale[r*m.Groups:(r+1)*m.Groups], d.zeros
	if m.Offset != nil {
		offsets = m.Offset[r*m.Groups : (r+1)*m.Groups]
	}
	if lookupRowAsm != nil && lookupRowAsm(m.Bits, m.GroupSize, m.Table, d.base, d.affine, codes, scales, offsets, dst[:m.Cols]) {
		return
	}
	var t [16]float32
	for g, s := range scales {
		o := offsets[g]
		c0, c1 := g*m.GroupSize, min(m.Cols, (g+1)*m.GroupSize)
		if m.Bits == 8 {
			for c, q := range codes[c0:c1] {
				dst[c0+c] = float32(m.Table[q]*s) + o
			}
			continue
		}
		for q, v := range m.Table {
			t[q] = float32(v*s) + o
		}
		c := c0
		if c%2 == 1 { // a group starting mid-byte (odd group sizes)
			dst[c] = t[codes[c/2]>>4]
			c++
		}
		for ; c+1 < c1; c += 2 {
			b := codes[c/2]
			dst[c], dst[c+1] = t[b&15], t[b>>4]
		}
		if c < c1 {
			dst[c] = t[codes[c/2]&15]
		}
	}
}

// lookupActs is how W's products round their activations (acts' names),
// "" for none and for every matrix that is not a lookup matrix.
func lookupActs(W *model.Matrix) string {
	if len(W.Pieces) == 0 || W.Pieces[0].Format.Lookup == nil {
		return ""
	}
	return W.Pieces[0].Format.Acts
}

// roundActs is x (T, k) with each token's row rounded as mode says, in a
// copy: the caller's x is another product's input too.
func roundActs(mode string, x []float32, T, k int) []float32 {
	xr := slices.Clone(x[:T*k])
	acts.Rows(mode, xr, T, k)
	return xr
}
