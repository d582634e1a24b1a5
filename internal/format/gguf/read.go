package gguf

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strings"
	"unicode/utf8"

	"logitscope/internal/format/ggml"
)

// bufSize is the read buffer over the header. Strings up to this length
// are read straight out of it into one allocation.
const bufSize = 64 << 10

// decoder reads the header sequentially. Every read first checks that the
// file holds the bytes, so an error from below means a failing or lying
// reader, never a short file.
type decoder struct {
	r      *bufio.Reader
	pos    int64 // bytes consumed
	size   int64 // file size
	nested int   // arrays read inside arrays so far (maxNested)
}

func (d *decoder) left() int64 { return d.size - d.pos }

// next returns the next n ≤ bufSize bytes, valid until the next read.
func (d *decoder) next(n int) ([]byte, error) {
	if int64(n) > d.left() {
		return nil, fmt.Errorf("truncated: %d bytes needed at offset %d, the file is %d bytes", n, d.pos, d.size)
	}
	b, err := d.r.Peek(n)
	if err != nil {
		return nil, fmt.Errorf("reading at offset %d: %v", d.pos, eofIsUnexpected(err))
	}
	d.r.Discard(n) // cannot fail: Peek buffered n bytes
	d.pos += int64(n)
	return b, nil
}

func (d *decoder) u32() (uint32, error) {
	b, err := d.next(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (d *decoder) u64() (uint64, error) {
	b, err := d.next(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// str reads a gguf string: a uint64 length, then the bytes.
func (d *decoder) str() (string, error) {
	n, err := d.u64()
	if err != nil {
		return "", fmt.Errorf("string length: %v", err)
	}
	switch {
	case n > maxStringLen:
		return "", fmt.Errorf("string length %d exceeds the %d-byte limit", n, maxStringLen)
	case n > uint64(d.left()):
		return "", fmt.Errorf("string length %d exceeds the %d bytes left in the file at offset %d", n, d.left(), d.pos)
	case n <= bufSize:
		b, err := d.next(int(n))
		return string(b), err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		return "", fmt.Errorf("reading at offset %d: %v", d.pos, eofIsUnexpected(err))
	}
	d.pos += int64(n)
	return string(b), nil
}

func eofIsUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parse reads and validates the header, metadata and tensor infos of the
// size-byte file r. Errors are one line and name the field at fault; the
// caller adds the file.
func parse(r io.ReaderAt, size int64) (*File, error) {
	d := &decoder{r: bufio.NewReaderSize(io.NewSectionReader(r, 0, size), bufSize), size: size}
	if size < 4 {
		return nil, fmt.Errorf("file is %d bytes, too short for a GGUF header", size)
	}
	magic, err := d.next(4)
	if err != nil {
		return nil, fmt.Errorf("magic: %v", err)
	}
	if string(magic) != "GGUF" {
		return nil, fmt.Errorf("not a GGUF file: magic is %q, not \"GGUF\"", magic)
	}
	f := &File{Alignment: defaultAlignment}
	if f.Version, err = d.u32(); err != nil {
		return nil, fmt.Errorf("version: %v", err)
	}
	if err := checkVersion(f.Version); err != nil {
		return nil, err
	}
	nTensors, err := d.u64()
	if err != nil {
		return nil, fmt.Errorf("tensor_count: %v", err)
	}
	nKV, err := d.u64()
	if err != nil {
		return nil, fmt.Errorf("kv_count: %v", err)
	}
	if err := plausible("kv_count", nKV, "key/value pair", minKVSize, d.left()); err != nil {
		return nil, err
	}
	if err := plausible("tensor_count", nTensors, "tensor info", minTensorInfoSize, d.left()); err != nil {
		return nil, err
	}

	// Capacities are capped: a count checked against a large file can
	// still be far beyond what the file holds before its tensor data.
	f.KV = make([]KV, 0, min(nKV, 1<<10))
	keys := make(map[string]int, min(nKV, 1<<10))
	for i := range int(nKV) {
		kv, err := readKV(d, i, keys)
		if err != nil {
			return nil, err
		}
		keys[kv.Key] = i
		f.KV = append(f.KV, kv)
	}
	if err := f.setAlignment(); err != nil {
		return nil, err
	}

	if err := plausible("tensor_count", nTensors, "tensor info", minTensorInfoSize, d.left()); err != nil {
		return nil, err
	}
	f.Tensors = make([]TensorInfo, 0, min(nTensors, 1<<12))
	f.byName = make(map[string]int, min(nTensors, 1<<12))
	rel := make([]uint64, 0, min(nTensors, 1<<12)) // offsets as stored, relative to the data section
	for i := range int(nTensors) {
		t, off, err := readTensorInfo(d, i, f.byName)
		if err != nil {
			return nil, err
		}
		f.byName[t.Name] = i
		f.Tensors = append(f.Tensors, t)
		rel = append(rel, off)
	}

	// Like llama.cpp, the data section starts at the alignment only when
	// there is data: a file without tensors need not carry the padding.
	f.DataOffset = d.pos
	align := uint64(f.Alignment)
	if nTensors > 0 {
		f.DataOffset = int64(alignUp(uint64(d.pos), align))
		if f.DataOffset > size {
			return nil, fmt.Errorf("the data section starts at %d (tensor infos end at %d, padded to the alignment %d), past the end of the %d-byte file",
				f.DataOffset, d.pos, f.Alignment, size)
		}
	}
	if err := f.place(rel, size); err != nil {
		return nil, err
	}
	return f, nil
}

// checkVersion accepts versions 2 and 3, whose little-endian layouts are
// the same (version 3 added big-endian files, told apart only by the
// version's byte order).
func checkVersion(v uint32) error {
	switch {
	case v == 2 || v == 3:
		return nil
	case v&0xffff == 0 && v != 0:
		return fmt.Errorf("version reads as %#08x, a byte-swapped %d: this is a big-endian GGUF file; only little-endian files are supported",
			v, bits.ReverseBytes32(v))
	case v == 1:
		return fmt.Errorf("version 1 is not supported (its counts and lengths are 32-bit); only versions 2 and 3 are read: convert the model again with a current llama.cpp")
	}
	return fmt.Errorf("version %d is not supported; only versions 2 and 3 are read", v)
}

// plausible refuses a count that the rest of the file could not hold at
// minSize bytes an item: a 40-byte file claiming 2^60 tensors fails here,
// before anything is sized from it.
func plausible(field string, n uint64, item string, minSize int, left int64) error {
	if n > uint64(left)/uint64(minSize) {
		return fmt.Errorf("%s %d is implausible: a %s takes at least %d bytes and %d bytes are left in the file", field, n, item, minSize, left)
	}
	return nil
}

// readKV reads pair i. keys maps the keys read so far to their index.
func readKV(d *decoder, i int, keys map[string]int) (KV, error) {
	key, err := d.str()
	if err != nil {
		return KV{}, fmt.Errorf("key %d: %v", i, err)
	}
	// llama.cpp refuses empty keys; gguf-py decodes keys as UTF-8 and
	// fails on anything else. Keys are identifiers, not text from a model.
	switch {
	case key == "":
		return KV{}, fmt.Errorf("key %d is empty", i)
	case !utf8.ValidString(key):
		return KV{}, fmt.Errorf("key %d %q is not valid UTF-8", i, key)
	}
	fail := func(format string, args ...any) (KV, error) {
		return KV{}, fmt.Errorf("key %d %q: %s", i, key, fmt.Sprintf(format, args...))
	}
	if j, dup := keys[key]; dup {
		return fail("appears twice (first as key %d)", j)
	}
	t, err := d.u32()
	if err != nil {
		return fail("value type: %v", err)
	}
	if ValueType(t).size() == 0 && ValueType(t) != String && ValueType(t) != Array {
		return fail("value type %d is unknown", t)
	}
	v, err := readValue(d, ValueType(t), 0)
	if err != nil {
		return fail("%v", err)
	}
	return KV{key, v}, nil
}

// readValue reads a value of type t inside `enclosing` arrays. String
// values are not checked for UTF-8: vocabularies hold byte pieces that are
// not valid alone, and llama.cpp reads them as bytes.
func readValue(d *decoder, t ValueType, enclosing int) (Value, error) {
	switch t {
	case String:
		s, err := d.str()
		return Value{s}, err
	case Array:
		return readArray(d, enclosing)
	}
	b, err := d.next(t.size())
	if err != nil {
		return Value{}, err
	}
	switch t {
	case Uint8:
		return Value{b[0]}, nil
	case Int8:
		return Value{int8(b[0])}, nil
	case Uint16:
		return Value{binary.LittleEndian.Uint16(b)}, nil
	case Int16:
		return Value{int16(binary.LittleEndian.Uint16(b))}, nil
	case Uint32:
		return Value{binary.LittleEndian.Uint32(b)}, nil
	case Int32:
		return Value{int32(binary.LittleEndian.Uint32(b))}, nil
	case Float32:
		return Value{math.Float32frombits(binary.LittleEndian.Uint32(b))}, nil
	case Bool:
		bl, err := readBool(b[0])
		return Value{bl}, err
	case Uint64:
		return Value{binary.LittleEndian.Uint64(b)}, nil
	case Int64:
		return Value{int64(binary.LittleEndian.Uint64(b))}, nil
	case Float64:
		return Value{math.Float64frombits(binary.LittleEndian.Uint64(b))}, nil
	}
	panic("unreachable: readKV and readArray pass known types only")
}

// readBool accepts only the 0 and 1 every writer stores; llama.cpp reads
// any nonzero byte as true, but another byte means a corrupt file, and
// rewriting it would change it.
func readBool(b byte) (bool, error) {
	if b > 1 {
		return false, fmt.Errorf("BOOL byte is %d, neither 0 nor 1", b)
	}
	return b == 1, nil
}

// readArray reads an array's element type, count and elements.
func readArray(d *decoder, enclosing int) (Value, error) {
	et, err := d.u32()
	if err != nil {
		return Value{}, fmt.Errorf("array element type: %v", err)
	}
	elem := ValueType(et)
	minSize := elem.size()
	switch elem {
	case String:
		minSize = 8
	case Array:
		minSize = 4 + 8
		if enclosing+2 > maxDepth {
			return Value{}, fmt.Errorf("arrays nested more than %d deep", maxDepth)
		}
	}
	if minSize == 0 {
		return Value{}, fmt.Errorf("array element type %d is unknown", et)
	}
	n, err := d.u64()
	if err != nil {
		return Value{}, fmt.Errorf("array length: %v", err)
	}
	if n > maxArrayLen {
		return Value{}, fmt.Errorf("array length %d exceeds the %d-element limit", n, maxArrayLen)
	}
	if n > uint64(d.left())/uint64(minSize) {
		return Value{}, fmt.Errorf("array of %d %v elements needs at least %d bytes each but %d bytes are left in the file", n, elem, minSize, d.left())
	}
	switch elem {
	case Uint8:
		return fixed(d, n, 1, func(b []byte) uint8 { return b[0] })
	case Int8:
		return fixed(d, n, 1, func(b []byte) int8 { return int8(b[0]) })
	case Uint16:
		return fixed(d, n, 2, binary.LittleEndian.Uint16)
	case Int16:
		return fixed(d, n, 2, func(b []byte) int16 { return int16(binary.LittleEndian.Uint16(b)) })
	case Uint32:
		return fixed(d, n, 4, binary.LittleEndian.Uint32)
	case Int32:
		return fixed(d, n, 4, func(b []byte) int32 { return int32(binary.LittleEndian.Uint32(b)) })
	case Float32:
		return fixed(d, n, 4, func(b []byte) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(b)) })
	case Uint64:
		return fixed(d, n, 8, binary.LittleEndian.Uint64)
	case Int64:
		return fixed(d, n, 8, func(b []byte) int64 { return int64(binary.LittleEndian.Uint64(b)) })
	case Float64:
		return fixed(d, n, 8, func(b []byte) float64 { return math.Float64frombits(binary.LittleEndian.Uint64(b)) })
	case Bool:
		v, err := fixed(d, n, 1, func(b []byte) uint8 { return b[0] })
		if err != nil {
			return v, err
		}
		raw := v.x.([]uint8)
		out := make([]bool, len(raw))
		for i, b := range raw {
			if out[i], err = readBool(b); err != nil {
				return Value{}, fmt.Errorf("element %d: %v", i, err)
			}
		}
		return Value{out}, nil
	case String:
		out := make([]string, 0, min(n, 1<<16))
		for i := range n {
			s, err := d.str()
			if err != nil {
				return Value{}, fmt.Errorf("element %d: %v", i, err)
			}
			out = append(out, s)
		}
		return Value{out}, nil
	}
	if d.nested += int(n); d.nested > maxNested {
		return Value{}, fmt.Errorf("more than %d arrays inside arrays in the file (llama.cpp reads none)", maxNested)
	}
	out := make([]Value, 0, min(n, 1<<10))
	for i := range n {
		v, err := readArray(d, enclosing+1)
		if err != nil {
			return Value{}, fmt.Errorf("element %d: %v", i, err)
		}
		out = append(out, v)
	}
	return Value{out}, nil
}

// fixed reads n elements of size bytes each, a buffer at a time. n has
// been checked against the file.
func fixed[T any](d *decoder, n uint64, size int, decode func([]byte) T) (Value, error) {
	out := make([]T, 0, min(n, 1<<16))
	for left := int(n); left > 0; {
		k := min(left, bufSize/size)
		b, err := d.next(k * size)
		if err != nil {
			return Value{}, err
		}
		for j := range k {
			out = append(out, decode(b[j*size:]))
		}
		left -= k
	}
	return Value{out}, nil
}

// setAlignment reads general.alignment: a UINT32 and a power of two, as
// llama.cpp and gguf-py require.
func (f *File) setAlignment() error {
	v, ok := f.lookup(AlignmentKey)
	if !ok {
		return nil
	}
	a, ok := v.x.(uint32)
	if !ok {
		return fmt.Errorf("key %q is %s, not UINT32", AlignmentKey, describe(v))
	}
	if a == 0 || a&(a-1) != 0 {
		return fmt.Errorf("key %q is %d, not a power of two", AlignmentKey, a)
	}
	f.Alignment = int64(a)
	return nil
}

// readTensorInfo reads and checks tensor info i; its offset, relative to
// the data section, is checked by place. byName maps the names read so far
// to their index.
func readTensorInfo(d *decoder, i int, byName map[string]int) (TensorInfo, uint64, error) {
	name, err := d.str()
	if err != nil {
		return TensorInfo{}, 0, fmt.Errorf("tensor %d: name: %v", i, err)
	}
	t := TensorInfo{Name: name}
	fail := func(format string, args ...any) (TensorInfo, uint64, error) {
		return TensorInfo{}, 0, fmt.Errorf("tensor %d %q: %s", i, name, fmt.Sprintf(format, args...))
	}
	if err := checkName(name); err != nil {
		return fail("%v", err)
	}
	if j, dup := byName[name]; dup {
		return fail("name appears twice (first as tensor %d)", j)
	}
	nDims, err := d.u32()
	if err != nil {
		return fail("n_dims: %v", err)
	}
	if nDims < 1 || nDims > maxDims {
		return fail("n_dims %d is not in 1..%d", nDims, maxDims)
	}
	t.Dims = make([]uint64, nDims)
	for j := range t.Dims {
		if t.Dims[j], err = d.u64(); err != nil {
			return fail("dims[%d]: %v", j, err)
		}
	}
	typ, err := d.u32()
	if err != nil {
		return fail("type: %v", err)
	}
	t.Type = ggml.Type(typ)
	if t.Size, err = tensorSize(t.Dims, t.Type); err != nil {
		return fail("%v", err)
	}
	off, err := d.u64()
	if err != nil {
		return fail("offset: %v", err)
	}
	return t, off, nil
}

// checkName holds tensor names to what llama.cpp loads (at most 63 bytes)
// and gguf-py decodes (UTF-8).
func checkName(name string) error {
	if len(name) > maxNameLen {
		return fmt.Errorf("name is %d bytes, longer than the %d llama.cpp allows", len(name), maxNameLen)
	}
	if !utf8.ValidString(name) {
		return fmt.Errorf("name is not valid UTF-8")
	}
	return nil
}

// tensorSize checks dims and type and returns the stored size. Every dim
// must be at least 1: llama.cpp accepts empty tensors, but no model has
// one, and refusing them keeps every tensor's bytes distinct.
func tensorSize(dims []uint64, typ ggml.Type) (int64, error) {
	bs := typ.BlockSize()
	if bs == 0 {
		name := typ.String() // "IQ4_XS", or "type 99" for a number ggml does not name
		if !strings.HasPrefix(name, "type ") {
			name = "type " + name
		}
		return 0, fmt.Errorf("%s is not supported (supported: %s)", name, supported())
	}
	numel := uint64(1)
	for j, n := range dims {
		if n == 0 {
			return 0, fmt.Errorf("dims[%d] is 0", j)
		}
		hi, lo := bits.Mul64(numel, n)
		if hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("dims %v hold more than 2^63-1 elements", dims)
		}
		numel = lo
	}
	if dims[0]%uint64(bs) != 0 {
		return 0, fmt.Errorf("dims[0] %d is not a multiple of %v's %d-weight block", dims[0], typ, bs)
	}
	// numel/bs blocks, exactly, since the row is whole blocks.
	hi, lo := bits.Mul64(numel/uint64(bs), uint64(typ.BlockBytes()))
	if hi != 0 || lo > math.MaxInt64 {
		return 0, fmt.Errorf("dims %v of %v take more than 2^63-1 bytes", dims, typ)
	}
	return int64(lo), nil
}

// supported lists the types with a layout, for errors.
func supported() string {
	names := make([]string, 0, 32)
	for _, t := range ggml.Types() {
		names = append(names, t.String())
	}
	return strings.Join(names, ", ")
}

// place checks the tensors' offsets (rel, relative to the data section)
// and makes them absolute. The rule is llama.cpp's: in the order of the
// tensor infos, each tensor starts at the end of the one before rounded up
// to the alignment, the first at 0. The spec only asks for aligned offsets,
// but llama.cpp refuses anything else, so every GGUF in use is laid out
// this way; a gap or an overlap means a hand-patched or corrupt file. The
// last tensor's data must end inside the file; the padding after it may be
// missing, as llama.cpp's loader allows.
func (f *File) place(rel []uint64, size int64) error {
	dataLen := uint64(size - f.DataOffset)
	align := uint64(f.Alignment)
	var end uint64 // where the previous tensor's data ends
	for i := range f.Tensors {
		t := &f.Tensors[i]
		off := rel[i]
		fail := func(format string, args ...any) error {
			return fmt.Errorf("tensor %d %q: %s", i, t.Name, fmt.Sprintf(format, args...))
		}
		if off%align != 0 {
			return fail("offset %d is not a multiple of the alignment %d", off, align)
		}
		if off > dataLen {
			return fail("offset %d is beyond the end of the file (the data section at %d holds %d bytes)", off, f.DataOffset, dataLen)
		}
		if i > 0 && off < end {
			p := f.Tensors[i-1]
			pOff := uint64(p.Offset - f.DataOffset)
			if off < pOff {
				return fail("offset %d comes before tensor %d %q's (%d): tensor data must follow the order of the tensor infos, as llama.cpp requires", off, i-1, p.Name, pOff)
			}
			return fail("offset %d overlaps tensor %d %q, which spans [%d, %d)", off, i-1, p.Name, pOff, end)
		}
		if want := alignUp(end, align); off != want {
			if i == 0 {
				return fail("offset %d leaves %d unused bytes at the start of the data section; the first tensor starts at 0, as llama.cpp requires", off, off)
			}
			return fail("offset %d leaves %d unused bytes after tensor %d %q (which ends at %d); llama.cpp requires each tensor at the previous one's end rounded up to the alignment, %d",
				off, off-end, i-1, f.Tensors[i-1].Name, end, want)
		}
		if uint64(t.Size) > dataLen-off {
			return fail("data [%d, %d) runs past the end of the file: the data section at %d holds %d bytes", off, off+uint64(t.Size), f.DataOffset, dataLen)
		}
		t.Offset = f.DataOffset + int64(off)
		end = off + uint64(t.Size)
	}
	return nil
}

// alignUp rounds n up to a multiple of align, a power of two. Offsets are
// below 2^63 and alignments at most 2^31, so the sum cannot wrap.
func alignUp(n, align uint64) uint64 { return (n + align - 1) &^ (align - 1) }
