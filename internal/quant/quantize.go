package quant

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"
)

// f16 bit patterns the scale is clamped to.
const (
	minNormalF16 = 0x0400 // 2^-14
	maxFiniteF16 = 0x7BFF // 65504
)

// Quantize encodes W (rows, cols), row-major, into a blob as described in the
// package doc: W (rows, cols) -> blob of NewLayout(s, rows, cols).Bytes() bytes.
// A NaN or ±Inf weight is an error naming its row and column.
func Quantize(s Scheme, w []float32, rows, cols int) ([]byte, error) {
	l, err := NewLayout(s, rows, cols)
	if err != nil {
		return nil, err
	}
	if len(w) != rows*cols {
		return nil, fmt.Errorf("quant: shape (%d, %d) needs %d weights, got %d", rows, cols, rows*cols, len(w))
	}
	blob := make([]byte, l.Bytes())
	err = forRows(rows, func(r0, r1 int) error {
		for r := r0; r < r1; r++ {
			if err := l.quantizeRow(w[r*cols:(r+1)*cols], r, blob); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return blob, nil
}

// quantizeRow writes row r's quant and scale words into blob.
func (l Layout) quantizeRow(row []float32, r int, blob []byte) error {
	qmax := l.Scheme.QMax()
	quant := blob[l.quantOff(r):l.quantOff(r+1)]
	scales := blob[l.scaleOff(r):l.scaleOff(r+1)]
	var x [GroupSize]float32
	var q [GroupSize]int8
	for g := range l.Groups {
		// Copying into a zeroed array is the padding of the last group.
		x = [GroupSize]float32{}
		n := copy(x[:], row[g*GroupSize:])
		var amax float32
		for j, v := range x[:n] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("quant: non-finite weight %v at row %d, col %d", v, r, g*GroupSize+j)
			}
			amax = max(amax, abs32(v))
		}
		h := scaleBits(amax, qmax)
		binary.LittleEndian.PutUint16(scales[2*g:], h)
		quantizeGroup(&x, float16.Frombits(h).Float32(), qmax, &q)
		pack(l.Scheme, &q, quant[4*g*l.Scheme.Bits():])
	}
	return nil
}

// scaleBits returns the f16 scale for a group with the given amax (>= 0).
func scaleBits(amax float32, qmax int) uint16 {
	if amax == 0 {
		return 0
	}
	h := float16.Fromfloat32(amax / float32(qmax)).Bits()
	switch {
	case h > maxFiniteF16: // +Inf: amax/qmax beyond f16 range
		return maxFiniteF16
	case h < minNormalF16: // subnormal or 0; see the package doc
		return minNormalF16
	}
	return h
}

func quantizeGroup(x *[GroupSize]float32, s float32, qmax int, q *[GroupSize]int8) {
	if s == 0 {
		*q = [GroupSize]int8{}
		return
	}
	lim := float64(qmax)
	for j, v := range x {
		// math.Round rounds half away from zero; float64 keeps x/s exact
		// enough that this is the rounding of the true quotient.
		q[j] = int8(max(-lim, min(lim, math.Round(float64(v)/float64(s)))))
	}
}

// pack writes one group's 32 codes as s.Bits() little-endian words.
func pack(s Scheme, q *[GroupSize]int8, dst []byte) {
	le := binary.LittleEndian
	switch s {
	case Q8:
		for k := range 8 {
			le.PutUint32(dst[4*k:], uint32(uint8(q[4*k]))|uint32(uint8(q[4*k+1]))<<8|
				uint32(uint8(q[4*k+2]))<<16|uint32(uint8(q[4*k+3]))<<24)
		}
	case Q4:
		for k := range 4 {
			var w uint32
			for i := range 8 {
				w |= uint32(q[8*k+i]+8) << (4 * i)
			}
			le.PutUint32(dst[4*k:], w)
		}
	case Q6:
		for k := range 4 {
			var w uint32
			for i := range 8 {
				w |= uint32(q[8*k+i]+32) & 0xF << (4 * i)
			}
			le.PutUint32(dst[4*k:], w)
		}
		for k := range 2 {
			var w uint32
			for i := range 16 {
				w |= uint32(q[16*k+i]+32) >> 4 << (2 * i)
			}
			le.PutUint32(dst[16+4*k:], w)
		}
	}
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }
