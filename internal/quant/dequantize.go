package quant

import (
	"encoding/binary"
	"fmt"

	"github.com/x448/float16"
)

// Dequantize decodes a blob into dst, the reference for the GPU shader:
// blob of NewLayout(s, rows, cols) -> W (rows, cols) row-major in dst.
func Dequantize(s Scheme, blob []byte, rows, cols int, dst []float32) error {
	l, err := NewLayout(s, rows, cols)
	if err != nil {
		return err
	}
	if err := l.check(blob); err != nil {
		return err
	}
	if len(dst) != rows*cols {
		return fmt.Errorf("quant: shape (%d, %d) needs dst of %d, got %d", rows, cols, rows*cols, len(dst))
	}
	return forRows(rows, func(r0, r1 int) error {
		for r := r0; r < r1; r++ {
			l.dequantizeRow(blob, r, dst[r*cols:(r+1)*cols])
		}
		return nil
	})
}

// DequantizeRow decodes row r of blob into dst (Cols values), for callers
// that stream a tensor row by row instead of materialising it.
func (l Layout) DequantizeRow(blob []byte, r int, dst []float32) error {
	if err := l.check(blob); err != nil {
		return err
	}
	if r < 0 || r >= l.Rows {
		return fmt.Errorf("quant: row %d outside %d rows", r, l.Rows)
	}
	if len(dst) != l.Cols {
		return fmt.Errorf("quant: row of %d cols needs dst of %d, got %d", l.Cols, l.Cols, len(dst))
	}
	l.dequantizeRow(blob, r, dst)
	return nil
}

func (l Layout) dequantizeRow(blob []byte, r int, dst []float32) {
	quant := blob[l.quantOff(r):l.quantOff(r+1)]
	scales := blob[l.scaleOff(r):l.scaleOff(r+1)]
	var q [GroupSize]int8
	for g := range l.Groups {
		s := float16.Frombits(binary.LittleEndian.Uint16(scales[2*g:])).Float32()
		unpack(l.Scheme, quant[4*g*l.Scheme.Bits():], &q)
		out := dst[g*GroupSize:]
		for j := range min(GroupSize, len(out)) {
			out[j] = float32(q[j]) * s // the whole contract: one exact f32 multiply
		}
	}
}

// unpack reads one group's 32 codes; it is the CPU twin of the WGSL decoder
// and follows the same shifts and masks on u32 words.
func unpack(s Scheme, src []byte, q *[GroupSize]int8) {
	le := binary.LittleEndian
	switch s {
	case Q8:
		for k := range 8 {
			w := le.Uint32(src[4*k:])
			for i := range 4 {
				q[4*k+i] = int8(w >> (8 * i))
			}
		}
	case Q4:
		for k := range 4 {
			w := le.Uint32(src[4*k:])
			for i := range 8 {
				q[8*k+i] = int8(w>>(4*i)&0xF) - 8
			}
		}
	case Q6:
		hi := [2]uint32{le.Uint32(src[16:]), le.Uint32(src[20:])}
		for j := range GroupSize {
			lo := le.Uint32(src[4*(j/8):]) >> (4 * (j % 8)) & 0xF
			h := hi[j/16] >> (2 * (j % 16)) & 3
			q[j] = int8(lo|h<<4) - 32
		}
	}
}

// Codes calls fn with each group of row r of blob: its f16 scale's bits
// and its 32 codes (a short last group padded with zeros), the value of
// code j being float32(q[j]) * scale. A converter uses it to carry the
// very bits over to another format (llama.cpp's Q8_0 and Q4_0 share the
// contract).
func (l Layout) Codes(blob []byte, r int, fn func(g int, scale uint16, q *[GroupSize]int8)) error {
	if err := l.check(blob); err != nil {
		return err
	}
	if r < 0 || r >= l.Rows {
		return fmt.Errorf("quant: row %d outside %d rows", r, l.Rows)
	}
	quant := blob[l.quantOff(r):l.quantOff(r+1)]
	scales := blob[l.scaleOff(r):l.scaleOff(r+1)]
	var q [GroupSize]int8
	for g := range l.Groups {
		unpack(l.Scheme, quant[4*g*l.Scheme.Bits():], &q)
		fn(g, binary.LittleEndian.Uint16(scales[2*g:]), &q)
	}
	return nil
}
