// Package safetensors reads and writes the safetensors format: an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype,
// shape and [begin, end) byte range inside the data section, then the data.
//
// Reading validates the header the way the reference Rust implementation
// does (see header.go), so a file that opens here also opens in Hugging
// Face tooling and vice versa.
package safetensors

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// DType is a safetensors element type as spelled in the header.
type DType string

const (
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
	I8   DType = "I8"
	U8   DType = "U8"
	I32  DType = "I32"

	// The remaining byte-sized dtypes of the reference implementation. They
	// are accepted so that checkpoints carrying an odd buffer (an I64
	// position_ids, an F64 constant) still open; only ReadRaw reads them.
	BOOL   DType = "BOOL"
	F8E4M3 DType = "F8_E4M3"
	F8E5M2 DType = "F8_E5M2"
	I16    DType = "I16"
	U16    DType = "U16"
	U32    DType = "U32"
	F64    DType = "F64"
	I64    DType = "I64"
	U64    DType = "U64"
)

// Size is the element size in bytes (0 for an unknown dtype).
func (d DType) Size() int {
	switch d {
	case BOOL, U8, I8, F8E4M3, F8E5M2:
		return 1
	case F16, BF16, I16, U16:
		return 2
	case F32, I32, U32:
		return 4
	case F64, I64, U64:
		return 8
	}
	return 0
}

// IsFloat reports whether ReadFloat32 and DecodeFloat32 can decode d.
func (d DType) IsFloat() bool { return d == F32 || d == F16 || d == BF16 }

// TensorInfo locates one tensor. Offset is absolute within the file.
type TensorInfo struct {
	Name   string
	DType  DType
	Shape  []int
	Offset int64
	Length int64
}

// NumElements is the product of Shape (1 for a scalar).
func (t TensorInfo) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is an opened, validated safetensors file. Its read methods are safe
// for concurrent use.
type File struct {
	Path     string
	Metadata map[string]string // never nil

	r       io.ReaderAt
	closer  io.Closer // nil when the caller owns r (NewFile)
	tensors map[string]TensorInfo
	order   []string // names in data-offset order
}

// Open opens and validates path.
func Open(path string) (*File, error) {
	osf, err := os.Open(path)
	if err != nil {
		return nil, pathError(err)
	}
	st, err := osf.Stat()
	if err != nil {
		osf.Close()
		return nil, pathError(err)
	}
	if !st.Mode().IsRegular() {
		osf.Close()
		return nil, fmt.Errorf("safetensors: %s: not a regular file", path)
	}
	f, err := NewFile(osf, st.Size(), path)
	if err != nil {
		osf.Close()
		return nil, err
	}
	f.closer = osf
	return f, nil
}

// NewFile validates the safetensors bytes readable from r (size bytes); name
// is used in error messages. Close does not close r.
func NewFile(r io.ReaderAt, size int64, name string) (*File, error) {
	tensors, meta, err := readHeader(r, size)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %s: %v", name, err)
	}
	f := &File{
		Path:     name,
		Metadata: meta,
		r:        r,
		tensors:  make(map[string]TensorInfo, len(tensors)),
		order:    make([]string, len(tensors)),
	}
	for i, t := range tensors {
		f.tensors[t.Name] = t
		f.order[i] = t.Name
	}
	return f, nil
}

// Names lists the tensors in data-offset order.
func (f *File) Names() []string { return append([]string(nil), f.order...) }

// Tensors describes every tensor in data-offset order.
func (f *File) Tensors() []TensorInfo {
	out := make([]TensorInfo, len(f.order))
	for i, name := range f.order {
		out[i], _ = f.Info(name)
	}
	return out
}

// Info describes one tensor.
func (f *File) Info(name string) (TensorInfo, bool) {
	t, ok := f.tensors[name]
	if !ok {
		return TensorInfo{}, false
	}
	// Copy the shape so callers cannot corrupt the file's view of it.
	t.Shape = append([]int{}, t.Shape...)
	return t, true
}

func (f *File) lookup(name string) (TensorInfo, error) {
	t, ok := f.tensors[name]
	if !ok {
		return t, fmt.Errorf("safetensors: %s: no tensor %q", f.Path, name)
	}
	return t, nil
}

// ReadRaw returns the tensor's bytes as stored.
func (f *File) ReadRaw(name string) ([]byte, error) {
	t, err := f.lookup(name)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, t.Length)
	if err := readFullAt(f.r, buf, t.Offset); err != nil {
		return nil, fmt.Errorf("safetensors: %s: reading tensor %q: %v", f.Path, name, err)
	}
	return buf, nil
}

// readChunk bounds the scratch buffer of ReadFloat32 so that decoding a
// large embedding does not hold the raw bytes and the floats at once.
const readChunk = 1 << 20

func (f *File) floatTensor(name string) (TensorInfo, error) {
	t, err := f.lookup(name)
	if err == nil && !t.DType.IsFloat() {
		err = fmt.Errorf("safetensors: %s: tensor %q is %s; only F32, F16 and BF16 decode to float32", f.Path, name, t.DType)
	}
	return t, err
}

// ReadFloat32 decodes an F32, F16 or BF16 tensor to float32.
func (f *File) ReadFloat32(name string) ([]float32, error) {
	t, err := f.floatTensor(name)
	if err != nil {
		return nil, err
	}
	dst := make([]float32, t.NumElements())
	if err := f.ReadFloat32At(name, 0, dst); err != nil {
		return nil, err
	}
	return dst, nil
}

// ReadFloat32At decodes elements [off, off+len(dst)) of an F32, F16 or
// BF16 tensor, in its row-major order, into dst: a reader of a large
// tensor holds the part it works on, not the tensor.
func (f *File) ReadFloat32At(name string, off int, dst []float32) error {
	t, err := f.floatTensor(name)
	if err != nil {
		return err
	}
	if off < 0 || off+len(dst) > t.NumElements() {
		return fmt.Errorf("safetensors: %s: elements [%d, %d) of tensor %q, which has %d", f.Path, off, off+len(dst), name, t.NumElements())
	}
	size := t.DType.Size()
	step := readChunk / size
	buf := make([]byte, min(len(dst), step)*size)
	for i := 0; i < len(dst); i += step {
		n := min(step, len(dst)-i)
		b := buf[:n*size]
		if err := readFullAt(f.r, b, t.Offset+int64((off+i)*size)); err != nil {
			return fmt.Errorf("safetensors: %s: reading tensor %q: %v", f.Path, name, err)
		}
		decodeFloat32(t.DType, b, dst[i:i+n])
	}
	return nil
}

// Close releases the file. It is safe to call more than once.
func (f *File) Close() error {
	c := f.closer
	f.closer = nil
	if c == nil {
		return nil
	}
	return c.Close()
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

// pathError words an os error as "safetensors: PATH: problem", dropping the
// syscall name that means nothing to a user.
func pathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("safetensors: %s: %w", pe.Path, pe.Err)
	}
	return fmt.Errorf("safetensors: %w", err)
}
