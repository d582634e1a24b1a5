package model

import (
	"fmt"

	"logitscope/internal/format/exl3"
	"logitscope/internal/format/ggml"
	"logitscope/internal/format/lookup"
	"logitscope/internal/quant"
)

// Format is how a stored matrix's rows are laid out: one of package
// quant's schemes (q8, q6, q4), exllamav3's EXL3 (EXL3.K > 0), a hub
// quantization's lookup matrix (Lookup not nil), or else a ggml type: F32,
// F16 and BF16 for float rows (a checkpoint's own bf16, f16 or f32 bytes
// are these too) or one of llama.cpp's block types.
type Format struct {
	Scheme quant.Scheme
	Type   ggml.Type
	EXL3   exl3.Format
	// Lookup is the whole matrix of a lookup piece, which holds its rows
	// [Row0, Row0+Rows) in place of Data: the codes stay in the matrix's
	// own memory, decoded a block of rows at a time by the products.
	Lookup *lookup.Matrix
	// Acts is how the products with a lookup matrix round their
	// activations first (package acts' names: "int8", "fp8", "fp4"); ""
	// keeps them float32.
	Acts string
}

func (f Format) String() string {
	switch {
	case f.Lookup != nil:
		s := fmt.Sprintf("lookup %d-bit", f.Lookup.Bits)
		if f.Acts != "" {
			s += " a-" + f.Acts
		}
		return s
	case f.Scheme != "":
		return string(f.Scheme)
	case f.EXL3.K != 0:
		return f.EXL3.String()
	}
	return f.Type.String()
}

// Piece is rows [Row0, Row0+Rows) of a matrix of Cols columns, stored in
// one Format: the quant blob of those rows (quant.NewLayout(Scheme, Rows,
// Cols): all their codes, then all their scales), the rows' ggml blocks
// one row after another, or an EXL3 layer's blob (exl3.Format.Bytes: the
// whole matrix in one piece, its rows the layer's outputs, padded inside
// the blob to multiples of 128); a lookup piece has no Data, its rows
// being those of Format.Lookup.
type Piece struct {
	Row0, Rows int
	Format     Format
	Data       []byte
}

// CheckPieces refuses pieces that do not tile m's rows in order or whose
// bytes do not hold their rows, naming the matrix.
func (m *Matrix) CheckPieces(name string) error {
	row := 0
	for _, p := range m.Pieces {
		if p.Row0 != row || p.Rows <= 0 {
			return fmt.Errorf("%s: a piece holds rows [%d, %d), want them from %d", name, p.Row0, p.Row0+p.Rows, row)
		}
		if l := p.Format.Lookup; l != nil {
			if l.Rows != m.Rows || l.Cols != m.Cols || p.Data != nil {
				return fmt.Errorf("%s: a lookup piece of a (%d, %d) matrix in one of (%d, %d)", name, l.Rows, l.Cols, m.Rows, m.Cols)
			}
			if err := l.Check(); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			row += p.Rows
			continue
		}
		if p.Format.EXL3.K != 0 && len(m.Pieces) != 1 {
			return fmt.Errorf("%s: an %v piece in %d: an EXL3 layer is one piece (its Hadamards mix 128 rows)", name, p.Format, len(m.Pieces))
		}
		want, err := p.Format.bytes(p.Rows, m.Cols)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if int64(len(p.Data)) != want {
			return fmt.Errorf("%s: %d %v rows of %d columns are %d bytes, have %d", name, p.Rows, p.Format, m.Cols, want, len(p.Data))
		}
		row += p.Rows
	}
	if row != m.Rows {
		return fmt.Errorf("%s: the pieces hold %d of %d rows", name, row, m.Rows)
	}
	return nil
}

// bytes is the size of rows stored rows of cols columns.
func (f Format) bytes(rows, cols int) (int64, error) {
	if f.Scheme != "" {
		l, err := quant.NewLayout(f.Scheme, rows, cols)
		return int64(l.Bytes()), err
	}
	if f.EXL3.K != 0 {
		return f.EXL3.Bytes(cols, rows), nil
	}
	rb, err := f.Type.RowBytes(cols)
	return int64(rows) * rb, err
}
