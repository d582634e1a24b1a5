// Package gguf reads and writes llama.cpp's GGUF container: a header, typed
// metadata key/value pairs, tensor infos (name, dims, ggml type, offset),
// then the tensor data, each tensor aligned. It knows nothing of models:
// which keys and tensors a model needs is its readers' business.
//
// Reading validates every count, length, offset and size against the file
// before using it (see read.go), and is at least as strict as llama.cpp's
// gguf.cpp, so that a file that opens here also opens there, with one
// exception: arrays of arrays, which the spec allows, gguf-py reads and
// llama.cpp refuses, are read. Only little-endian files of version 2 or 3
// (the same layout) are read.
package gguf

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
	"strings"

	"logitscope/internal/format/ggml"
)

// IsFileName says whether name names a GGUF file: it ends in .gguf, in any
// case, as llama.cpp writes them and the hub lists them.
func IsFileName(name string) bool { return strings.HasSuffix(strings.ToLower(name), ".gguf") }

// AlignmentKey is the metadata key that sets the alignment of the data
// section and of every tensor in it (a UINT32, 32 when absent).
const AlignmentKey = "general.alignment"

const (
	defaultAlignment = 32
	maxDims          = 4 // GGML_MAX_DIMS
	// maxNameLen is the longest tensor name llama.cpp loads: GGML_MAX_NAME
	// is 64 bytes with the terminating NUL.
	maxNameLen = 63
	// maxStringLen and maxArrayLen are llama.cpp's and gguf-py's limits
	// (GGUF_MAX_STRING_LENGTH, GGUF_MAX_ARRAY_ELEMENTS).
	maxStringLen = 1 << 30
	maxArrayLen  = 1 << 30
	// maxDepth bounds the levels of arrays in one value (an array of arrays
	// is 2). The spec sets no limit, gguf-py recurses without one and
	// llama.cpp refuses any nesting; 8 is far beyond any use and keeps a
	// crafted file from recursing deeply.
	maxDepth = 8
	// maxNested bounds the arrays inside arrays of a whole file: each costs
	// some 80 bytes of memory for its 12 in the file, so 300 MB of empty
	// ones took 2.17 GB. llama.cpp reads none; 65,536 is far beyond any
	// use.
	maxNested = 1 << 16
	// The smallest a pair and a tensor info can be: a key of one byte (an
	// empty one is refused) and a UINT8; an empty name and one dim. Counts
	// are checked against them.
	minKVSize         = 8 + 1 + 4 + 1
	minTensorInfoSize = 8 + 4 + 8 + 4 + 8
)

// KV is one metadata pair.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo locates one tensor.
type TensorInfo struct {
	Name   string
	Dims   []uint64 // ggml order: Dims[0] is the row length
	Type   ggml.Type
	Offset int64 // absolute offset in the file
	Size   int64 // stored bytes
}

// Shape is Dims in Hugging Face (row-major) order: a matrix of rows rows
// of cols weights has Dims [cols, rows] and Shape [rows, cols].
func (t TensorInfo) Shape() []int {
	s := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		s[len(s)-1-i] = int(d)
	}
	return s
}

// File is a parsed, validated GGUF file's header: its metadata and where
// its tensors are. KV and Tensors are in file order; treat them as read
// only (Tensor's index is built from them at Parse). Its methods are safe
// for concurrent use.
type File struct {
	Path       string
	Version    uint32
	Alignment  int64
	DataOffset int64 // where the data section starts
	KV         []KV
	Tensors    []TensorInfo

	r      io.ReaderAt // Parse's reader; nil after Open, which closes its file
	byName map[string]int
}

// Open parses path's header, metadata and tensor infos; it does not read
// tensor data, and does not keep the file open: ReadTensor reopens it.
func Open(path string) (*File, error) {
	osf, err := os.Open(path)
	if err != nil {
		return nil, pathError(err)
	}
	defer osf.Close()
	st, err := osf.Stat()
	if err != nil {
		return nil, pathError(err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: %s: not a regular file", path)
	}
	f, err := Parse(osf, st.Size(), path)
	if err != nil {
		return nil, err
	}
	f.r = nil
	return f, nil
}

// Parse parses the GGUF file readable from r (size bytes); name is used in
// errors and becomes Path. ReadTensor reads from r.
func Parse(r io.ReaderAt, size int64, name string) (*File, error) {
	f, err := parse(r, size)
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: %v", name, err)
	}
	f.Path, f.r = name, r
	return f, nil
}

// Tensor finds a tensor by name.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.byName[name]
	if !ok {
		return TensorInfo{}, false
	}
	t := f.Tensors[i]
	t.Dims = slices.Clone(t.Dims) // the file's view stays the file's
	return t, true
}

// ReadTensor reads t's stored bytes. t must be one of f's tensors.
func (f *File) ReadTensor(t TensorInfo) ([]byte, error) {
	i, ok := f.byName[t.Name]
	if !ok || f.Tensors[i].Offset != t.Offset || f.Tensors[i].Size != t.Size {
		return nil, fmt.Errorf("gguf: %s: tensor %q at offset %d (%d bytes) is not one of this file's", f.Path, t.Name, t.Offset, t.Size)
	}
	r := f.r
	if r == nil {
		osf, err := os.Open(f.Path)
		if err != nil {
			return nil, pathError(err)
		}
		defer osf.Close()
		r = osf
	}
	buf := make([]byte, t.Size)
	if err := readFullAt(r, buf, t.Offset); err != nil {
		return nil, fmt.Errorf("gguf: %s: reading tensor %q: %v", f.Path, t.Name, err)
	}
	return buf, nil
}

// Has reports whether key is present.
func (f *File) Has(key string) bool {
	_, ok := f.lookup(key)
	return ok
}

// lookup scans: a file has tens of keys, and a map would go stale if a
// caller appended to KV.
func (f *File) lookup(key string) (Value, bool) {
	for _, kv := range f.KV {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return Value{}, false
}

// get finds key, or words its absence.
func (f *File) get(key string) (Value, error) {
	v, ok := f.lookup(key)
	if !ok {
		return v, fmt.Errorf("gguf: %s: no key %q", f.Path, key)
	}
	return v, nil
}

func (f *File) wrongType(key string, v Value, want string) error {
	return fmt.Errorf("gguf: %s: key %q is %s, not %s", f.Path, key, describe(v), want)
}

// describe names v's type for an error: "UINT32 7", "ARRAY of STRING".
func describe(v Value) string {
	switch t := v.Type(); t {
	case Array:
		return fmt.Sprintf("ARRAY of %v", v.ElemType())
	case String:
		return "STRING " + quoteShort(v.x.(string))
	default:
		return fmt.Sprintf("%v %v", t, v)
	}
}

// String reads a STRING.
func (f *File) String(key string) (string, error) {
	v, err := f.get(key)
	if err != nil {
		return "", err
	}
	s, ok := v.x.(string)
	if !ok {
		return "", f.wrongType(key, v, "a string")
	}
	return s, nil
}

// Uint reads any unsigned integer, or a signed one that is not negative:
// writers disagree on signedness for counts (gguf-py writes Python ints as
// the type the converter chose).
func (f *File) Uint(key string) (uint64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	if u, ok := asUint(v.x); ok {
		return u, nil
	}
	if i, ok := asInt(v.x); ok && i >= 0 {
		return uint64(i), nil
	}
	return 0, f.wrongType(key, v, "a non-negative integer")
}

// Int reads any integer that fits int64.
func (f *File) Int(key string) (int64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	if i, ok := asInt(v.x); ok {
		return i, nil
	}
	if u, ok := asUint(v.x); ok && u <= math.MaxInt64 {
		return int64(u), nil
	}
	return 0, f.wrongType(key, v, "an integer within int64")
}

// Float reads a FLOAT32 or FLOAT64, or an integer (a rope_freq_base may be
// written as either).
func (f *File) Float(key string) (float64, error) {
	v, err := f.get(key)
	if err != nil {
		return 0, err
	}
	switch x := v.x.(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	}
	if i, ok := asInt(v.x); ok {
		return float64(i), nil
	}
	if u, ok := asUint(v.x); ok {
		return float64(u), nil
	}
	return 0, f.wrongType(key, v, "a number")
}

// Bool reads a BOOL.
func (f *File) Bool(key string) (bool, error) {
	v, err := f.get(key)
	if err != nil {
		return false, err
	}
	b, ok := v.x.(bool)
	if !ok {
		return false, f.wrongType(key, v, "a bool")
	}
	return b, nil
}

// Strings reads an ARRAY of STRING (a copy of the slice, sharing the
// strings).
func (f *File) Strings(key string) ([]string, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	s, ok := v.x.([]string)
	if !ok {
		return nil, f.wrongType(key, v, "an array of strings")
	}
	return slices.Clone(s), nil
}

// Float32s reads an ARRAY of FLOAT32 (a copy).
func (f *File) Float32s(key string) ([]float32, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	s, ok := v.x.([]float32)
	if !ok {
		return nil, f.wrongType(key, v, "an array of FLOAT32")
	}
	return slices.Clone(s), nil
}

// Int32s reads an ARRAY of any integer type whose every element fits
// int32 (token types are INT32, but a UINT8 array means the same).
func (f *File) Int32s(key string) ([]int32, error) {
	v, err := f.get(key)
	if err != nil {
		return nil, err
	}
	var out []int32
	bad := -1
	switch s := v.x.(type) {
	case []uint8:
		out, bad = toInt32s(s)
	case []int8:
		out, bad = toInt32s(s)
	case []uint16:
		out, bad = toInt32s(s)
	case []int16:
		out, bad = toInt32s(s)
	case []uint32:
		out, bad = toInt32s(s)
	case []int32:
		out = slices.Clone(s)
	case []uint64:
		out, bad = toInt32s(s)
	case []int64:
		out, bad = toInt32s(s)
	default:
		return nil, f.wrongType(key, v, "an array of integers")
	}
	if bad >= 0 {
		return nil, fmt.Errorf("gguf: %s: key %q is %s whose element %d does not fit int32", f.Path, key, describe(v), bad)
	}
	return out, nil
}

// toInt32s converts s, or returns the index of an element outside int32.
func toInt32s[T uint8 | int8 | uint16 | int16 | uint32 | uint64 | int64](s []T) ([]int32, int) {
	out := make([]int32, len(s))
	for i, x := range s {
		// A uint64 above MaxInt64 turns negative in int64: the sign test
		// catches it.
		if v := int64(x); v < math.MinInt32 || v > math.MaxInt32 || (v >= 0) != (x >= 0) {
			return nil, i
		}
		out[i] = int32(x)
	}
	return out, -1
}

func asUint(x any) (uint64, bool) {
	switch x := x.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	}
	return 0, false
}

func asInt(x any) (int64, bool) {
	switch x := x.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	}
	return 0, false
}

// readFullAt fills buf from r at off; unlike a bare ReadAt it treats a short
// read as an error and a full read that also reports io.EOF as success.
func readFullAt(r io.ReaderAt, buf []byte, off int64) error {
	n, err := r.ReadAt(buf, off)
	if n == len(buf) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// pathError words an os error as "gguf: PATH: problem", dropping the
// syscall name that means nothing to a user.
func pathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("gguf: %s: %w", pe.Path, pe.Err)
	}
	return fmt.Errorf("gguf: %w", err)
}
