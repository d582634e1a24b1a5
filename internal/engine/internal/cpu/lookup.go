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
	zeros := make([]float32, m.Groups) // the offsets of a matrix that has none
	for r := a; r < b; r++ {
		lookupRow(m, p.Row0+r, dst[(r-a)*k:(r-a+1)*k], zeros)
	}
}

// lookupRow is m.Row(r, dst), a group at a time where the groups are runs
// of columns: by lookupRowAsm where the CPU has it, else in Go, a 4-bit
// group's sixteen values computed once into a table, each as Row
// computes it. zeros (m.Groups of them) stand in for a matrix's missing
// offsets.
func lookupRow(m *lookup.Matrix, r int, dst, zeros []float32) {
	if m.GIdx != nil {
		m.Row(r, dst)
		return
	}
	codes := m.Codes[r*m.RowBytes() : (r+1)*m.RowBytes()]
	scales, offsets := m.Scale[r*m.Groups:(r+1)*m.Groups], zeros
	if m.Offset != nil {
		offsets = m.Offset[r*m.Groups : (r+1)*m.Groups]
	}
	if lookupRowAsm != nil && lookupRowAsm(m.Bits, m.GroupSize, m.Table, codes, scales, offsets, dst[:m.Cols]) {
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
