package mlx

import (
	"fmt"
	"reflect"
	"sync"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/safetensors"
)

// Matrix transcodes a module's weight, scales and biases; an expert's are
// sliced out of its layer's switch_mlp stack. Codes of at most 4 bits
// become 4-bit lookup codes, wider ones 8-bit; the table is the identity,
// Scale the scales and Offset the biases, each decoded exactly.
func (f *Format) Matrix(t lookup.Tensors, module string) (*lookup.Matrix, error) {
	if f.err != nil {
		return nil, f.err
	}
	l, ok := f.layer(module)
	if !ok {
		return nil, fmt.Errorf("mlx: %s is left float by the config", module)
	}
	stem, e := stacked(module)
	w, err := f.read(t, stem+".weight")
	if err != nil {
		return nil, fmt.Errorf("mlx: %s: %v", module, err)
	}
	s, err := f.read(t, stem+".scales")
	if err != nil {
		return nil, fmt.Errorf("mlx: %s: %v", module, err)
	}
	b, err := f.read(t, stem+".biases")
	if err != nil {
		return nil, fmt.Errorf("mlx: %s: %v", module, err)
	}
	// W (out, in·bits/32) U32, scales and biases (out, in/group), with a
	// leading experts dimension under switch_mlp.
	dims := 2
	if e >= 0 {
		dims = 3
	}
	if len(w.Shape) != dims {
		return nil, fmt.Errorf("mlx: %s: shape %v, want %d dimensions", w.Name, w.Shape, dims)
	}
	rows, words := w.Shape[dims-2], w.Shape[dims-1]
	if err := w.Want(w.Shape, safetensors.U32); err != nil {
		return nil, fmt.Errorf("mlx: %v", err)
	}
	if len(s.Shape) != dims || !s.DType.IsFloat() {
		return nil, fmt.Errorf("mlx: %s: %s %v, want a float tensor of %d dimensions", s.Name, s.DType, s.Shape, dims)
	}
	groups := s.Shape[dims-1]
	cols := groups * l.GroupSize
	want := append(w.Shape[:dims-2:dims-2], rows, groups)
	if err := s.Want(want, s.DType); err != nil {
		return nil, fmt.Errorf("mlx: %v", err)
	}
	if err := b.Want(want, s.DType); err != nil {
		return nil, fmt.Errorf("mlx: %v (the scales' dtype and shape)", err)
	}
	if words*32 != cols*l.Bits || rows == 0 || cols == 0 {
		return nil, fmt.Errorf("mlx: %s: %d words a row for %d groups of %d at %s (%d bits a row), want %d", w.Name, words, groups, l.GroupSize, l, cols*l.Bits, cols*l.Bits/32)
	}
	if e >= 0 {
		if e >= w.Shape[0] {
			return nil, fmt.Errorf("mlx: %s: expert %d of %d", w.Name, e, w.Shape[0])
		}
		w.Data = expert(w.Data, w.Shape[0], e)
		s.Data = expert(s.Data, s.Shape[0], e)
		b.Data = expert(b.Data, b.Shape[0], e)
	}
	m := &lookup.Matrix{Rows: rows, Cols: cols, Bits: 8, Groups: groups, GroupSize: l.GroupSize}
	if l.Bits <= 4 {
		m.Bits = 4
	}
	m.Table = make([]float32, 1<<m.Bits)
	for i := range m.Table {
		m.Table[i] = float32(i)
	}
	if m.Scale, err = s.Floats(); err != nil {
		return nil, fmt.Errorf("mlx: %v", err)
	}
	if m.Offset, err = b.Floats(); err != nil {
		return nil, fmt.Errorf("mlx: %v", err)
	}
	m.Codes = make([]byte, rows*m.RowBytes())
	rowIn := words * 4
	for r := range rows {
		unpack(w.Data[r*rowIn:(r+1)*rowIn], l.Bits, m.Codes[r*m.RowBytes():(r+1)*m.RowBytes()], m.Bits, cols)
	}
	if err := m.Check(); err != nil {
		return nil, fmt.Errorf("mlx: %s: %v", module, err)
	}
	return m, nil
}

// expert is the e-th of n equal slices of a stacked tensor's bytes.
func expert(data []byte, n, e int) []byte {
	per := len(data) / n
	return data[e*per : (e+1)*per]
}

// unpack reads cols codes of bits each from one row's little-endian bit
// stream into lookup codes of to (4: low nibble first, or 8) bits.
func unpack(src []byte, bits int, dst []byte, to, cols int) {
	mask := uint32(1)<<bits - 1
	for c := range cols {
		p := c * bits
		var v uint32
		for i := 0; i < 2 && p/8+i < len(src); i++ {
			v |= uint32(src[p/8+i]) << (8 * i)
		}
		q := byte(v >> (p % 8) & mask)
		if to == 8 {
			dst[c] = q
		} else {
			dst[c/2] |= q << (4 * (c % 2))
		}
	}
}

// read fetches a tensor, keeping the last few stacked ones: a MoE's
// experts are each a slice of one switch_mlp tensor, which would otherwise
// be read once per expert.
func (f *Format) read(t lookup.Tensors, name string) (lookup.Stored, error) {
	if !reflect.TypeOf(t).Comparable() {
		return lookup.Read(t, name)
	}
	c := f.stacks
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range c.kept {
		if k.t == t && k.s.Name == name {
			return k.s, nil
		}
	}
	s, err := lookup.Read(t, name)
	if err != nil || len(s.Shape) != 3 {
		return s, err
	}
	c.kept = append(c.kept, kept{t, s})
	if len(c.kept) > 3*3 { // gate, up and down's weight, scales, biases
		c.kept = c.kept[1:]
	}
	return s, nil
}

// stacks keeps the switch_mlp tensors read last.
type stacks struct {
	mu   sync.Mutex
	kept []kept
}

type kept struct {
	t lookup.Tensors
	s lookup.Stored
}
