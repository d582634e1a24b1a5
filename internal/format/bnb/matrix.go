package bnb

import (
	"fmt"
	"slices"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/safetensors"
)

// Matrix transcodes a module's 4-bit weight. bnb's blocks run over the
// flattened weight, so when cols is not a multiple of the blocksize a
// block straddles rows; lookup groups are per row, so the matrix takes
// groups of gcd(cols, blocksize) columns, each inside one block (both ends
// of a group are multiples of the gcd, as is every block boundary), and
// gives each its block's absmax: exact for any shape, and one group per
// block when cols is a multiple of the blocksize, as in every real model.
// The absmax are decoded in float32 as bnb does: with double quantization
// nested_quant_map[q]·nested_absmax[b/nested_blocksize] + nested_offset.
func (f *Format) Matrix(t lookup.Tensors, module string) (*lookup.Matrix, error) {
	name := module + ".weight"
	st, err := readState(t, name)
	if err != nil {
		return nil, err
	}
	rows, cols := st.Shape[0], st.Shape[1]
	n := rows * cols
	blocks := (n + st.Blocksize - 1) / st.Blocksize
	w, err := lookup.Read(t, name)
	if err != nil {
		return nil, fmt.Errorf("bnb: %v", err)
	}
	if err := w.Want([]int{(n + 1) / 2, 1}, safetensors.U8); err != nil {
		return nil, fmt.Errorf("bnb: %v (for a %v weight)", err, st.Shape)
	}
	qm, err := lookup.Read(t, name+".quant_map")
	if err != nil {
		return nil, fmt.Errorf("bnb: %v", err)
	}
	// bnb's kernels decode with their own table, never the stored map, so
	// only its form is checked.
	if err := qm.Want([]int{16}, safetensors.F32); err != nil {
		return nil, fmt.Errorf("bnb: %v", err)
	}
	absmax, err := readAbsmax(t, name, st, blocks)
	if err != nil {
		return nil, err
	}
	g := gcd(cols, st.Blocksize)
	m := &lookup.Matrix{Rows: rows, Cols: cols, Bits: 4, Table: slices.Clone(table(st.QuantType)), Groups: cols / g, GroupSize: g}
	m.Scale = make([]float32, rows*m.Groups)
	for i := range m.Scale {
		m.Scale[i] = absmax[i*g/st.Blocksize] // group i starts at flat index i·g
	}
	// Codes: flat weight i is byte i/2's high nibble when i is even; the
	// lookup form is per row, low nibble first.
	m.Codes = make([]byte, rows*m.RowBytes())
	for r := range rows {
		dst := m.Codes[r*m.RowBytes():]
		for c := range cols {
			i := r*cols + c
			q := w.Data[i/2] >> (4 * (1 - i%2)) & 15
			dst[c/2] |= q << (4 * (c % 2))
		}
	}
	if err := m.Check(); err != nil {
		return nil, fmt.Errorf("bnb: %s: %v", module, err)
	}
	return m, nil
}

// readState finds the weight's packed quant state, __nf4 or __fp4, and
// checks the key against the JSON's quant_type.
func readState(t lookup.Tensors, name string) (State, error) {
	var firstErr error
	for _, q := range []string{"nf4", "fp4"} {
		key := name + ".quant_state.bitsandbytes__" + q
		s, err := lookup.Read(t, key)
		if err != nil {
			firstErr = cmp(firstErr, err)
			continue
		}
		if err := s.Want([]int{-1}, safetensors.U8); err != nil {
			return State{}, fmt.Errorf("bnb: %v", err)
		}
		st, err := ParseState(s.Data, key)
		if err != nil {
			return st, fmt.Errorf("bnb: %v", err)
		}
		if st.QuantType != q {
			return st, fmt.Errorf("bnb: %s: quant_type %q under a __%s key", key, st.QuantType, q)
		}
		return st, nil
	}
	return State{}, fmt.Errorf("bnb: %s has no quant state (%v)", name, firstErr)
}

func cmp(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// readAbsmax is the blocks' absmax in float32: stored F32, or double
// quantized as dequantize_blockwise computes it, code·absmax in float32,
// then + offset in float32.
func readAbsmax(t lookup.Tensors, name string, st State, blocks int) ([]float32, error) {
	a, err := lookup.Read(t, name+".absmax")
	if err != nil {
		return nil, fmt.Errorf("bnb: %v", err)
	}
	if !st.Nested() {
		if err := a.Want([]int{blocks}, safetensors.F32); err != nil {
			return nil, fmt.Errorf("bnb: %v (no nested_* in the quant state)", err)
		}
		return a.Floats()
	}
	if err := a.Want([]int{blocks}, safetensors.U8); err != nil {
		return nil, fmt.Errorf("bnb: %v (double quantized)", err)
	}
	nested := (blocks + st.NestedBlocksize - 1) / st.NestedBlocksize
	na, err := lookup.Read(t, name+".nested_absmax")
	if err != nil {
		return nil, fmt.Errorf("bnb: %v", err)
	}
	if err := na.Want([]int{nested}, safetensors.F32); err != nil {
		return nil, fmt.Errorf("bnb: %v", err)
	}
	nq, err := lookup.Read(t, name+".nested_quant_map")
	if err != nil {
		return nil, fmt.Errorf("bnb: %v", err)
	}
	if err := nq.Want([]int{256}, safetensors.F32); err != nil {
		return nil, fmt.Errorf("bnb: %v", err)
	}
	scale, _ := na.Floats() // Want checked the dtype and Read the length
	code, _ := nq.Floats()
	offset := float32(*st.NestedOffset) // torch.tensor(float(nested_offset)): float32
	out := make([]float32, blocks)
	for b, q := range a.Data {
		// The explicit float32 conversion keeps the product rounded on its
		// own, as torch computes it, whatever the compiler would fuse.
		out[b] = float32(code[q]*scale[b/st.NestedBlocksize]) + offset
	}
	return out, nil
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
