package quant

import "fmt"

// Layout gives the sizes of a quantized (rows, cols) tensor; see the package
// doc for the bit layout. Word counts are in u32 words.
type Layout struct {
	Scheme           Scheme
	Rows, Cols       int
	Groups           int // per row: ceil(Cols/GroupSize)
	QuantWordsPerRow int // Groups * Scheme.Bits()
	ScaleWordsPerRow int // ceil(Groups/2)
}

// NewLayout validates the scheme and shape. rows may be 0 (an empty row range).
func NewLayout(s Scheme, rows, cols int) (Layout, error) {
	if err := s.valid(); err != nil {
		return Layout{}, err
	}
	if rows < 0 || cols <= 0 {
		return Layout{}, fmt.Errorf("quant: invalid shape (%d, %d)", rows, cols)
	}
	g := (cols + GroupSize - 1) / GroupSize
	return Layout{
		Scheme:           s,
		Rows:             rows,
		Cols:             cols,
		Groups:           g,
		QuantWordsPerRow: g * s.Bits(),
		ScaleWordsPerRow: (g + 1) / 2,
	}, nil
}

// RowBytes is the blob size one row contributes (quant plus scale words).
func (l Layout) RowBytes() int { return 4 * (l.QuantWordsPerRow + l.ScaleWordsPerRow) }

// QuantBytes is the size of the quant region; the scale region starts there.
func (l Layout) QuantBytes() int { return 4 * l.Rows * l.QuantWordsPerRow }

// Bytes is the size of the whole blob.
func (l Layout) Bytes() int { return l.Rows * l.RowBytes() }

// quantOff and scaleOff are byte offsets of row r's words in the blob.
func (l Layout) quantOff(r int) int { return 4 * r * l.QuantWordsPerRow }
func (l Layout) scaleOff(r int) int { return l.QuantBytes() + 4*r*l.ScaleWordsPerRow }

func (l Layout) check(blob []byte) error {
	if len(blob) != l.Bytes() {
		return fmt.Errorf("quant: %s blob for (%d, %d) must be %d bytes, got %d",
			l.Scheme, l.Rows, l.Cols, l.Bytes(), len(blob))
	}
	return nil
}

// SliceRows returns the blob of rows [a, b) alone, as Quantize would produce
// it for those rows: the two regions are not adjacent in the full blob, so
// this copies.
func (l Layout) SliceRows(blob []byte, a, b int) ([]byte, error) {
	if err := l.check(blob); err != nil {
		return nil, err
	}
	if a < 0 || b < a || b > l.Rows {
		return nil, fmt.Errorf("quant: row range [%d, %d) outside %d rows", a, b, l.Rows)
	}
	out := make([]byte, 0, (b-a)*l.RowBytes())
	out = append(out, blob[l.quantOff(a):l.quantOff(b)]...)
	out = append(out, blob[l.scaleOff(a):l.scaleOff(b)]...)
	return out, nil
}
