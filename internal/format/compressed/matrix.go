package compressed

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/safetensors"
)

// maxElems bounds a tensor's element count, so that a hostile shape
// cannot overflow the byte count it is checked against.
const maxElems = 1 << 36

// tensors reads one module's tensors, naming them in errors.
type tensors struct {
	t      lookup.Tensors
	module string
}

// get is module.name, checked to be one of dtypes with as many bytes as
// its shape holds.
func (ts tensors) get(name string, dtypes ...safetensors.DType) ([]byte, safetensors.TensorInfo, error) {
	full := ts.module + "." + name
	raw, info, err := ts.t.Raw(full)
	if err != nil {
		return nil, info, fmt.Errorf("compressed: %s: %v", full, err)
	}
	ok := false
	for _, d := range dtypes {
		ok = ok || info.DType == d
	}
	if !ok {
		return nil, info, fmt.Errorf("compressed: %s: dtype %s, want %v", full, info.DType, dtypes)
	}
	n := 1
	for _, d := range info.Shape {
		if d < 0 || (d > 0 && n > maxElems/d) {
			return nil, info, fmt.Errorf("compressed: %s: shape %v", full, info.Shape)
		}
		n *= d
	}
	if len(raw) != n*info.DType.Size() {
		return nil, info, fmt.Errorf("compressed: %s: %d bytes for %s shape %v", full, len(raw), info.DType, info.Shape)
	}
	return raw, info, nil
}

// has says whether module.name is stored.
func (ts tensors) has(name string) bool {
	_, _, err := ts.t.Raw(ts.module + "." + name)
	return err == nil
}

// layout is where a strategy's scales sit for a (rows, cols) weight.
type layout struct {
	groups, groupSize int
	shape             []int // weight_scale's shape
	// at is the index into weight_scale of (row r, group g).
	at func(r, g int) int
}

func (w weights) layout(rows, cols int) layout {
	ceil := func(a, b int) int { return (a + b - 1) / b }
	switch w.strategy {
	case "tensor":
		return layout{1, cols, []int{1}, func(int, int) int { return 0 }}
	case "channel":
		return layout{1, cols, []int{rows, 1}, func(r, _ int) int { return r }}
	case "block":
		ng := ceil(cols, w.block[1])
		bh := w.block[0]
		return layout{ng, w.block[1], []int{ceil(rows, bh), ng}, func(r, g int) int { return r/bh*ng + g }}
	}
	ng := ceil(cols, w.groupSize)
	return layout{ng, w.groupSize, []int{rows, ng}, func(r, g int) int { return r*ng + g }}
}

// scaleShapeOK accepts the stored shape of weight_scale: per tensor any
// shape of one element ([], [1], [1, 1]), per channel (rows, 1) or (rows).
func scaleShapeOK(strategy string, got, want []int) bool {
	switch strategy {
	case "tensor":
		n := 1
		for _, d := range got {
			n *= d
		}
		return n == 1 && len(got) <= 2
	case "channel":
		return slices.Equal(got, want) || slices.Equal(got, want[:1])
	}
	return slices.Equal(got, want)
}

// Matrix transcodes module's stored tensors as its config group's format
// lays them out: Table[code] is the code's value (q for ints, E4M3 or
// E2M1 for floats), Scale the stored scale (NVFP4: f32(weight_scale) /
// weight_global_scale, in float32), Offset −s·z for asymmetric ints.
func (f *Format) Matrix(t lookup.Tensors, module string) (*lookup.Matrix, error) {
	g := f.scheme(module)
	if g == nil {
		return nil, fmt.Errorf("compressed: %s: ignored or matched by no config group's targets", module)
	}
	ts := tensors{t, module}
	var (
		m   *lookup.Matrix
		err error
	)
	switch g.format {
	case packQuantized:
		m, err = g.packed(ts)
	case intQuantized, naiveQuantized, floatQuantized:
		m, err = g.unpacked(ts)
	case nvfp4Packed:
		return g.nvfp4(ts)
	default:
		return nil, fmt.Errorf("compressed: %s: config_groups.%s: format %q stores float weights", module, g.name, g.format)
	}
	if err != nil {
		return nil, err
	}
	if err := g.scales(ts, m); err != nil {
		return nil, err
	}
	return m, nil
}

// intTable is the value of each offset-binary code: code − 2^(bits−1).
func intTable(lookupBits, bits int) []float32 {
	t := make([]float32, 1<<lookupBits)
	for c := range t {
		t[c] = float32(c - 1<<(bits-1))
	}
	return t
}

// packed reads pack-quantized codes: 32/b per int32 along the input dim,
// code i of a word at bits b·i, stored +2^(b−1).
func (g *group) packed(ts tensors) (*lookup.Matrix, error) {
	b := g.w.bits
	pf := 32 / b
	rawShape, info, err := ts.get("weight_shape", safetensors.I64, safetensors.I32)
	if err != nil {
		return nil, err
	}
	if len(info.Shape) != 1 || info.Shape[0] != 2 {
		return nil, fmt.Errorf("compressed: %s.weight_shape: shape %v, want [2]", ts.module, info.Shape)
	}
	dims := [2]int64{}
	for i := range dims {
		if info.DType == safetensors.I64 {
			dims[i] = int64(binary.LittleEndian.Uint64(rawShape[8*i:]))
		} else {
			dims[i] = int64(int32(binary.LittleEndian.Uint32(rawShape[4*i:])))
		}
	}
	if dims[0] <= 0 || dims[1] <= 0 || dims[0] > 1<<30 || dims[1] > 1<<30 {
		return nil, fmt.Errorf("compressed: %s.weight_shape: %v, want two positive dims", ts.module, dims)
	}
	rows, cols := int(dims[0]), int(dims[1])
	words := (cols + pf - 1) / pf
	raw, info, err := ts.get("weight_packed", safetensors.I32)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(info.Shape, []int{rows, words}) {
		return nil, fmt.Errorf("compressed: %s.weight_packed: shape %v, want [%d %d] for weight_shape (%d, %d) at %d bits", ts.module, info.Shape, rows, words, rows, cols, b)
	}
	lb := 8
	if b <= 4 {
		lb = 4
	}
	m := &lookup.Matrix{Rows: rows, Cols: cols, Bits: lb, Table: intTable(lb, b)}
	m.Codes = make([]byte, rows*m.RowBytes())
	if b == lb {
		// At 4 and 8 bits the words' little-endian bytes are lookup's
		// codes already (low nibble first); a padding nibble past Cols is
		// never read.
		rb := m.RowBytes()
		for r := range rows {
			copy(m.Codes[r*rb:(r+1)*rb], raw[4*r*words:])
		}
		return m, nil
	}
	mask := uint32(1)<<b - 1
	for r := range rows {
		for c := range cols {
			w := binary.LittleEndian.Uint32(raw[4*(r*words+c/pf):])
			setCode(m, r, c, byte(w>>(b*(c%pf))&mask))
		}
	}
	return m, nil
}

// setCode stores code q of weight (r, c) in lookup's layout.
func setCode(m *lookup.Matrix, r, c int, q byte) {
	if m.Bits == 8 {
		m.Codes[r*m.Cols+c] = q
		return
	}
	m.Codes[r*m.RowBytes()+c/2] |= q << (4 * (c % 2))
}

// unpacked reads int-quantized / naive-quantized I8 codes or
// float-quantized E4M3 bytes, one per weight.
func (g *group) unpacked(ts tensors) (*lookup.Matrix, error) {
	want := safetensors.I8
	if g.w.float {
		want = safetensors.F8E4M3
	}
	raw, info, err := ts.get("weight", want)
	if err != nil {
		return nil, err
	}
	if len(info.Shape) != 2 || info.Shape[0] <= 0 || info.Shape[1] <= 0 {
		return nil, fmt.Errorf("compressed: %s.weight: shape %v, want (out, in)", ts.module, info.Shape)
	}
	m := &lookup.Matrix{Rows: info.Shape[0], Cols: info.Shape[1], Bits: 8}
	m.Codes = make([]byte, len(raw))
	if g.w.float {
		for i, b := range raw {
			if isNaNE4M3(b) {
				return nil, fmt.Errorf("compressed: %s.weight: NaN (E4M3 byte %#02x) at (%d, %d)", ts.module, b, i/m.Cols, i%m.Cols)
			}
		}
		copy(m.Codes, raw)
		m.Table = append([]float32(nil), E4M3[:]...)
		return m, nil
	}
	m.Table = intTable(8, 8)
	for i, b := range raw {
		m.Codes[i] = b + 128 // int8 v to offset binary v+128
	}
	return m, nil
}

// scales fills m's groups, Scale, Offset and GIdx from weight_scale,
// weight_zero_point and weight_g_idx.
func (g *group) scales(ts tensors, m *lookup.Matrix) error {
	lay := g.w.layout(m.Rows, m.Cols)
	m.Groups, m.GroupSize = lay.groups, lay.groupSize
	raw, info, err := ts.get("weight_scale", safetensors.F32, safetensors.F16, safetensors.BF16)
	if err != nil {
		return err
	}
	if !scaleShapeOK(g.w.strategy, info.Shape, lay.shape) {
		return fmt.Errorf("compressed: %s.weight_scale: shape %v, want %v for strategy %q of (%d, %d)", ts.module, info.Shape, lay.shape, g.w.strategy, m.Rows, m.Cols)
	}
	s := make([]float32, info.NumElements())
	if err := safetensors.DecodeFloat32(info.DType, raw, s); err != nil {
		return fmt.Errorf("compressed: %s.weight_scale: %v", ts.module, err)
	}
	var z []float32
	if !g.w.symmetric {
		// s·q + (−s·z) is s·(q − z) exactly only when s has few mantissa
		// bits (F16/BF16: at most 11 + 9 bits); an F32 scale would round twice.
		if info.DType == safetensors.F32 {
			return fmt.Errorf("compressed: %s.weight_scale: F32 scales with zero points cannot be transcoded exactly (want F16 or BF16)", ts.module)
		}
		if z, err = g.zeros(ts, m.Rows, lay); err != nil {
			return err
		}
		m.Offset = make([]float32, m.Rows*m.Groups)
	}
	m.Scale = make([]float32, m.Rows*m.Groups)
	for r := range m.Rows {
		for gi := range m.Groups {
			i := lay.at(r, gi)
			m.Scale[r*m.Groups+gi] = s[i]
			if z != nil {
				m.Offset[r*m.Groups+gi] = -s[i] * z[i]
			}
		}
	}
	if g.w.strategy == "group" {
		return g.gidx(ts, m)
	}
	return nil
}

// zeros reads an asymmetric zero point in weight_scale's layout: packed
// along the output dim (I32, offset binary) for pack-quantized group or
// channel strategies, else I8 as stored.
func (g *group) zeros(ts tensors, rows int, lay layout) ([]float32, error) {
	n := 1
	for _, d := range lay.shape {
		n *= d
	}
	z := make([]float32, n)
	if g.format == packQuantized && (g.w.strategy == "group" || g.w.strategy == "channel") {
		b := g.w.bits
		pf := 32 / b
		cols := lay.shape[1]
		want := []int{(rows + pf - 1) / pf, cols}
		raw, info, err := ts.get("weight_zero_point", safetensors.I32)
		if err != nil {
			return nil, err
		}
		if !slices.Equal(info.Shape, want) {
			return nil, fmt.Errorf("compressed: %s.weight_zero_point: shape %v, want %v (packed along the output dim)", ts.module, info.Shape, want)
		}
		for r := range rows {
			for j := range cols {
				w := binary.LittleEndian.Uint32(raw[4*(r/pf*cols+j):])
				z[r*cols+j] = float32(int(w>>(b*(r%pf))&(1<<b-1)) - 1<<(b-1))
			}
		}
		return z, nil
	}
	raw, info, err := ts.get("weight_zero_point", safetensors.I8)
	if err != nil {
		return nil, err
	}
	if !scaleShapeOK(g.w.strategy, info.Shape, lay.shape) {
		return nil, fmt.Errorf("compressed: %s.weight_zero_point: shape %v, want %v", ts.module, info.Shape, lay.shape)
	}
	for i, b := range raw {
		z[i] = float32(int8(b))
	}
	return z, nil
}

// gidx reads weight_g_idx (actorder "group"). The reference sorts the
// columns by group and cuts them into runs of group_size, so each group
// must hold exactly group_size columns for column c's group to be
// g_idx[c]. A g_idx holding −1 is the unset placeholder: column order.
func (g *group) gidx(ts tensors, m *lookup.Matrix) error {
	if !ts.has("weight_g_idx") {
		if g.w.actorder == "group" {
			return fmt.Errorf("compressed: %s.weight_g_idx: missing, and config_groups.%s.weights.actorder is \"group\"", ts.module, g.name)
		}
		return nil
	}
	raw, info, err := ts.get("weight_g_idx", safetensors.I32)
	if err != nil {
		return err
	}
	if !slices.Equal(info.Shape, []int{m.Cols}) {
		return fmt.Errorf("compressed: %s.weight_g_idx: shape %v, want [%d]", ts.module, info.Shape, m.Cols)
	}
	idx := make([]int32, m.Cols)
	count := make([]int, m.Groups)
	for c := range idx {
		idx[c] = int32(binary.LittleEndian.Uint32(raw[4*c:]))
		if idx[c] == -1 {
			return nil
		}
		if idx[c] < 0 || int(idx[c]) >= m.Groups {
			return fmt.Errorf("compressed: %s.weight_g_idx: column %d in group %d of %d", ts.module, c, idx[c], m.Groups)
		}
		count[idx[c]]++
	}
	for gi, n := range count {
		if n != m.GroupSize && !(gi == m.Groups-1 && n == m.Cols-(m.Groups-1)*m.GroupSize) {
			return fmt.Errorf("compressed: %s.weight_g_idx: group %d has %d columns, want %d", ts.module, gi, n, m.GroupSize)
		}
	}
	m.GIdx = idx
	return nil
}

// nvfp4 reads nvfp4-pack-quantized: E2M1 nibbles (low first, which is
// lookup's order, so the bytes are the codes), E4M3 scales per 16 inputs
// and the global divisor.
func (g *group) nvfp4(ts tensors) (*lookup.Matrix, error) {
	raw, info, err := ts.get("weight_packed", safetensors.U8)
	if err != nil {
		return nil, err
	}
	if len(info.Shape) != 2 || info.Shape[0] <= 0 || info.Shape[1] <= 0 {
		return nil, fmt.Errorf("compressed: %s.weight_packed: shape %v, want (out, in/2)", ts.module, info.Shape)
	}
	rows, cols := info.Shape[0], 2*info.Shape[1]
	lay := g.w.layout(rows, cols)
	rawS, infoS, err := ts.get("weight_scale", safetensors.F8E4M3)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(infoS.Shape, lay.shape) {
		return nil, fmt.Errorf("compressed: %s.weight_scale: shape %v, want %v", ts.module, infoS.Shape, lay.shape)
	}
	rawG, infoG, err := ts.get("weight_global_scale", safetensors.F32, safetensors.F16, safetensors.BF16)
	if err != nil {
		return nil, err
	}
	if infoG.NumElements() != 1 {
		return nil, fmt.Errorf("compressed: %s.weight_global_scale: shape %v, want one value", ts.module, infoG.Shape)
	}
	var gs [1]float32
	if err := safetensors.DecodeFloat32(infoG.DType, rawG, gs[:]); err != nil {
		return nil, fmt.Errorf("compressed: %s.weight_global_scale: %v", ts.module, err)
	}
	if !(gs[0] > 0) || math.IsInf(float64(gs[0]), 0) {
		return nil, fmt.Errorf("compressed: %s.weight_global_scale: %v, want a positive finite divisor", ts.module, gs[0])
	}
	m := &lookup.Matrix{
		Rows: rows, Cols: cols, Bits: 4, Codes: append([]byte(nil), raw...),
		Table: append([]float32(nil), E2M1[:]...), Groups: lay.groups, GroupSize: lay.groupSize,
		Scale: make([]float32, len(rawS)),
	}
	for i, b := range rawS {
		if isNaNE4M3(b) {
			return nil, fmt.Errorf("compressed: %s.weight_scale: NaN (E4M3 byte %#02x) at %d", ts.module, b, i)
		}
		m.Scale[i] = E4M3[b] / gs[0] // float32, as scale.to(float32) / global_scale
	}
	return m, nil
}
