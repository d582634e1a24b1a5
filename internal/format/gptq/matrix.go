package gptq

import (
	"encoding/binary"
	"fmt"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/safetensors"
)

// field is the bits-wide value at bit offset off of a little-endian
// stream of 32-bit words, word(k) the k-th: a 3-bit value may straddle
// two words.
func field(word func(k int) uint32, off, bits int) int {
	k, s := off/32, off%32
	v := uint64(word(k)) >> s
	if s+bits > 32 {
		v |= uint64(word(k+1)) << (32 - s)
	}
	return int(v & (1<<bits - 1))
}

// stored is one of a module's tensors, checked for dtype and shape.
type stored struct {
	name  string
	data  []byte
	shape []int
}

func (s stored) u32(k int) uint32 { return binary.LittleEndian.Uint32(s.data[4*k:]) }

// read fetches module+suffix and refuses a dtype not in dtypes or a rank
// other than rank, naming the tensor.
func read(t lookup.Tensors, name string, rank int, dtypes ...safetensors.DType) (stored, error) {
	b, info, err := t.Raw(name)
	if err != nil {
		return stored{}, err
	}
	ok := false
	for _, d := range dtypes {
		ok = ok || info.DType == d
	}
	if !ok {
		return stored{}, fmt.Errorf("gptq: %s: dtype %s, want %v", name, info.DType, dtypes)
	}
	if len(info.Shape) != rank {
		return stored{}, fmt.Errorf("gptq: %s: shape %v, want %d dimensions", name, info.Shape, rank)
	}
	n := info.DType.Size()
	for _, d := range info.Shape {
		n *= d
	}
	if len(b) != n {
		return stored{}, fmt.Errorf("gptq: %s: %d bytes for shape %v of %s", name, len(b), info.Shape, info.DType)
	}
	return stored{name, b, info.Shape}, nil
}

// Groups is how many groups a row of cols inputs has at groupSize.
func Groups(cols, groupSize int) int {
	if groupSize == -1 {
		return 1
	}
	return (cols + groupSize - 1) / groupSize
}

// Matrix transcodes module's qweight, qzeros, scales and g_idx into a
// lookup.Matrix (Out rows, In columns) whose Row is s·(q−z) exactly.
func (f *Format) Matrix(t lookup.Tensors, module string) (*lookup.Matrix, error) {
	bits := f.c.Bits
	qw, err := read(t, module+".qweight", 2, safetensors.I32)
	if err != nil {
		return nil, err
	}
	// GPTQ's scales are fp16 even in a bf16 model, which Matrix's
	// exactness relies on.
	sc, err := read(t, module+".scales", 2, safetensors.F16)
	if err != nil {
		return nil, err
	}
	// Packed along In: each column of qweight is one output's stream.
	cols, rows := qw.shape[0]*32/bits, qw.shape[1]
	if qw.shape[0]*32%bits != 0 || rows == 0 || cols == 0 {
		return nil, fmt.Errorf("gptq: %s: shape %v does not hold whole %d-bit values", qw.name, qw.shape, bits)
	}
	groups := Groups(cols, f.c.GroupSize)
	if sc.shape[0] != groups || sc.shape[1] != rows {
		return nil, fmt.Errorf("gptq: %s: shape %v, want (%d, %d) for %d inputs in groups of %d and %d outputs", sc.name, sc.shape, groups, rows, cols, f.c.GroupSize, rows)
	}
	var gidx []int32
	if _, _, err := t.Raw(module + ".g_idx"); err == nil {
		// Optional: old AutoGPTQ files without act-order may lack it.
		gi, err := read(t, module+".g_idx", 1, safetensors.I32)
		if err != nil {
			return nil, err
		}
		if gi.shape[0] != cols {
			return nil, fmt.Errorf("gptq: %s: shape %v, want (%d) for qweight's %d inputs", gi.name, gi.shape, cols, cols)
		}
		gidx = make([]int32, cols)
		for c := range gidx {
			gidx[c] = int32(gi.u32(c))
			if gidx[c] < 0 || int(gidx[c]) >= groups {
				return nil, fmt.Errorf("gptq: %s: input %d in group %d, want 0 to %d", gi.name, c, gidx[c], groups-1)
			}
		}
	}
	qz, err := read(t, module+".qzeros", 2, safetensors.I32)
	if err != nil {
		return nil, err
	}
	if zw := (rows*bits + 31) / 32; qz.shape[0] != groups || qz.shape[1] != zw {
		return nil, fmt.Errorf("gptq: %s: shape %v, want (%d, %d) for %d groups of %d outputs at %d bits", qz.name, qz.shape, groups, zw, groups, rows, bits)
	}

	m := &lookup.Matrix{Rows: rows, Cols: cols, Bits: 4, Groups: groups, GroupSize: f.c.GroupSize}
	if bits == 8 {
		m.Bits = 8
	}
	if m.GroupSize == -1 {
		m.GroupSize = cols
	}
	if gidx != nil && !monotonic(gidx, m.GroupSize) {
		m.GIdx = gidx
	}
	m.Table = make([]float32, 1<<m.Bits)
	for q := range m.Table {
		m.Table[q] = float32(q)
	}
	m.Codes = make([]byte, rows*m.RowBytes())
	unpackCodes(m, qw, bits)
	m.Scale = make([]float32, rows*groups)
	m.Offset = make([]float32, rows*groups)
	zw := qz.shape[1]
	for g := range groups {
		word := func(k int) uint32 { return qz.u32(g*zw + k) }
		for r := range rows {
			z := field(word, r*bits, bits)
			if !f.c.V2 {
				if z == f.c.maxq() {
					// z−1 = maxq is a zero point of 0 wrapped around: AutoGPTQ
					// decodes it as 2^bits, GPTQModel carries it into the next
					// output's zero. No one answer is the file's.
					return nil, fmt.Errorf("gptq: %s: group %d, output %d stores %d, a v1 zero point of 0 that the tools decode differently (checkpoint_format gptq stores zero-1)", qz.name, g, r, z)
				}
				z++
			}
			s := scale(sc, g*rows+r)
			// s·q and s·z are exact in float32 (an fp16 or bf16 scale
			// times a code of at most 8 bits), so Row's one rounding of
			// s·q + (−s·z) is s·(q−z) rounded once.
			m.Scale[r*groups+g] = s
			m.Offset[r*groups+g] = -(s * float32(z))
		}
	}
	if err := m.Check(); err != nil {
		return nil, fmt.Errorf("gptq: %s: %w", module, err)
	}
	return m, nil
}

// unpackCodes fills m's codes from qweight (In·bits/32, Out): a block of
// bits/gcd(bits, 32) word rows holds whole values (one word of 8 4-bit
// codes; three words of 32 3-bit ones), read for every output at once,
// row by row of qweight, as it lies in memory.
func unpackCodes(m *lookup.Matrix, qw stored, bits int) {
	rows, rowBytes := m.Rows, m.RowBytes()
	wpb := bits / gcd(bits, 32) // words per block
	vpb := 32 * wpb / bits      // values per block
	mask := uint64(1)<<bits - 1
	for b := range qw.shape[0] / wpb {
		for r := range rows {
			row := m.Codes[r*rowBytes:]
			var acc uint64
			n, k := 0, 0
			for j := range vpb {
				if n < bits {
					acc |= uint64(qw.u32((b*wpb+k)*rows+r)) << n
					k++
					n += 32
				}
				c := b*vpb + j
				if m.Bits == 8 {
					row[c] = byte(acc)
				} else {
					row[c/2] |= byte(acc&mask) << (4 * (c % 2))
				}
				acc >>= bits
				n -= bits
			}
		}
	}
}

// scale is the i-th fp16 value of scales.
func scale(sc stored, i int) float32 {
	return safetensors.FromF16(binary.LittleEndian.Uint16(sc.data[2*i:]))
}

// monotonic says whether gidx is plain grouping, column c in c/size: the
// matrix then needs no per-column index.
func monotonic(gidx []int32, size int) bool {
	for c, g := range gidx {
		if int(g) != c/size {
			return false
		}
	}
	return true
}
