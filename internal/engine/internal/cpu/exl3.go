package cpu

import (
	"logitscope/internal/format/exl3"
	"logitscope/internal/model"
)

// exl3Piece is W's piece when W is an EXL3 layer, else nil.
func exl3Piece(W *model.Matrix) *model.Piece {
	if W.Data == nil && len(W.Pieces) == 1 && W.Pieces[0].Format.EXL3.K != 0 {
		return &W.Pieces[0]
	}
	return nil
}

// matmulEXL3: out (T, W.Rows) = x (T, W.Cols) @ Wᵀ + b for an EXL3 layer,
// W = (diag(suh)·H·Ŵ·H·diag(svh))ᵀ cut from the padded (in, on) to
// (Cols, Rows), computed as exllamav3 computes it, without W: each
// token's x, padded with zeros, scaled by suh and rotated, x' = H(x⊙suh)
// (in,); then x' @ Ŵ (on,) by matmul, whose blocks decode Ŵ's tiles
// (decodeRows); then rotated and scaled, H(y')⊙svh, cut to Rows. In
// float32 throughout, where exllamav3's kernels keep x' and y' in fp16.
func matmulEXL3(out, x []float32, W *model.Matrix, b []float32, T int) {
	p := exl3Piece(W)
	f := p.Format.EXL3
	in, on := exl3.Pad(W.Cols), exl3.Pad(W.Rows)
	suh, svh := f.Scales(p.Data, W.Cols, W.Rows)
	xp := make([]float32, T*in)
	for t := range T {
		row := xp[t*in : (t+1)*in]
		for i, v := range x[t*W.Cols : (t+1)*W.Cols] {
			row[i] = v * suh[i]
		}
		exl3.Hadamard32(row)
	}
	// Ŵᵀ (on, in): one piece of on rows, the trellis at the blob's start.
	inner := &model.Matrix{Rows: on, Cols: in, Pieces: []model.Piece{{Rows: on, Format: model.Format{EXL3: f}, Data: p.Data}}}
	yp := make([]float32, T*on)
	matmulRows(yp, xp, inner, nil, T)
	for t := range T {
		row := yp[t*on : (t+1)*on]
		exl3.Hadamard32(row)
		o := out[t*W.Rows : (t+1)*W.Rows]
		for i := range o {
			o[i] = row[i] * svh[i]
			if b != nil {
				o[i] += b[i]
			}
		}
	}
}

// decodeEXL3 decodes rows [a, z) of Ŵᵀ (on, k), both multiples of 16,
// the tiles' columns: the inner matrix matmulEXL3 multiplies.
func decodeEXL3(p *model.Piece, k, a, z int, dst []float32) {
	p.Format.EXL3.DecodeColumns(p.Data, k, p.Rows, a, z, dst)
}

// denseEXL3 is W (Rows, Cols) of an EXL3 layer, row-major: the exact
// reconstruction in float32, which the products, rotating the
// activations instead, agree with to float32 rounding, not bit for bit.
func denseEXL3(W *model.Matrix) []float32 {
	p := exl3Piece(W)
	w, err := p.Format.EXL3.Rows(p.Data, W.Cols, W.Rows)
	if err != nil {
		panic(err) // the blob's size was checked by model.CheckPieces
	}
	return w
}
