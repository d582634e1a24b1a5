package dump

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"unsafe"

	"logitscope/internal/format/routing"
	"logitscope/internal/format/safetensors"
)

// Reader reads a capture's logit rows in order, a block at a time, from a
// binary dump, a safetensors file or memory: what it holds is the caller's
// block, never the capture, so a 20,000-row capture of a 151,936-token
// vocabulary (12 GB) is read in the memory of a few rows.
type Reader struct {
	Name        string
	Rows, Vocab int
	// Routes are a mixture of experts' routes (rows × layers × top-k ids,
	// small beside the logits), read whole; nil when the capture has none.
	Routes *routing.Routes
	// Meta is a safetensors file's string metadata; nil for a binary dump.
	Meta map[string]string

	next  int
	rows  func(first int, dst []float32) ([]float32, error)
	close func() error
	// sum hashes a binary dump's bytes as Next reads them, in order, so
	// that a receipt's check needs no second read of the file; nil unless
	// Hash asked for it (header is the dump's first bytes, for it).
	sum    hash.Hash
	header []byte
}

// Open opens the dump at path for reading row by row: safetensors when the
// name ends in .safetensors, else the binary dump. Its header (and a
// safetensors file's routes) are read and checked now, the rows by Next.
func Open(path string) (*Reader, error) {
	if IsSafetensors(path) {
		f, err := safetensors.Open(path)
		if err != nil {
			return nil, err
		}
		r, err := SafetensorsReader(f, path)
		if err != nil {
			f.Close()
			return nil, err
		}
		r.close = f.Close
		return r, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err == nil {
		var r *Reader
		if r, err = NewReader(f, st.Size(), path); err == nil {
			r.close = f.Close
			return r, nil
		}
	}
	f.Close()
	return nil, err
}

// NewReader reads the binary dump of size bytes at r row by row; name is
// used in errors. Closing the Reader does not close r.
func NewReader(r io.ReaderAt, size int64, name string) (*Reader, error) {
	var hdr [HeaderSize]byte
	n, err := r.ReadAt(hdr[:min(int64(HeaderSize), size)], 0)
	if n < len(hdr) && size >= HeaderSize {
		return nil, fmt.Errorf("%s: reading header: %w", name, err)
	}
	rows, vocab, err := ParseHeader(hdr[:], size, name)
	if err != nil {
		return nil, err
	}
	d := &Reader{Name: name, Rows: rows, Vocab: vocab, header: hdr[:]}
	d.rows = func(first int, dst []float32) ([]float32, error) {
		// The file's float32s are read straight into dst: little-endian,
		// as the host's (littleEndian), so no pass decodes them.
		b := bytesOf(dst)
		if !littleEndian {
			b = make([]byte, 4*len(dst))
		}
		if n, err := r.ReadAt(b, HeaderSize+4*int64(first)*int64(vocab)); n < len(b) {
			return nil, fmt.Errorf("%s: truncated dump at row %d: %v", name, first+n/(4*vocab), err)
		}
		if d.sum != nil {
			d.sum.Write(b)
		}
		if !littleEndian {
			safetensors.DecodeFloat32(safetensors.F32, b, dst)
		}
		return dst, nil
	}
	return d, nil
}

// littleEndian says whether the host stores a float32 as the dump does.
var littleEndian = func() bool { x := uint16(1); return *(*byte)(unsafe.Pointer(&x)) == 1 }()

// bytesOf is f's memory as bytes.
func bytesOf(f []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 4*len(f))
}

// Hash makes Next hash a binary dump's bytes as it reads them, for
// SHA256: call it before the first Next. A dump without a receipt to
// check is not hashed: the hash cost a third of report's time.
func (r *Reader) Hash() {
	if r.header != nil && r.next == 0 && r.sum == nil {
		r.sum = sha256.New()
		r.sum.Write(r.header)
	}
}

// SHA256 is the hex sha256 of a binary dump's file, once Next has read
// every row after Hash; ok is false before, without Hash, and for other
// sources.
func (r *Reader) SHA256() (sum string, ok bool) {
	if r.sum == nil || r.next < r.Rows {
		return "", false
	}
	return hex.EncodeToString(r.sum.Sum(nil)), true
}

// SafetensorsReader reads the logits tensor of an open safetensors file
// row by row (and its routes whole); closing the Reader does not close f.
func SafetensorsReader(f *safetensors.File, name string) (*Reader, error) {
	rows, vocab, err := logitsShape(f, name)
	if err != nil {
		return nil, err
	}
	r := &Reader{Name: name, Rows: rows, Vocab: vocab, Meta: f.Metadata}
	if _, ok := f.Info(RoutesTensor); ok {
		if r.Routes, err = readRoutes(f, name, rows); err != nil {
			return nil, err
		}
	}
	r.rows = func(first int, dst []float32) ([]float32, error) {
		return dst, f.ReadFloat32At(LogitsTensor, first*vocab, dst)
	}
	return r, nil
}

// Concat is a Reader of rows rows of vocab that read fills, first on:
// captures kept in several files (package logitdir). close, if not nil,
// is what Close does.
func Concat(name string, rows, vocab int, routes *routing.Routes, close func() error, read func(first int, dst []float32) error) *Reader {
	return &Reader{Name: name, Rows: rows, Vocab: vocab, Routes: routes, close: close,
		rows: func(first int, dst []float32) ([]float32, error) { return dst, read(first, dst) }}
}

// Reader reads l's rows in place: Next returns slices of l.Data, and
// copies nothing.
func (l *Logits) Reader(name string) *Reader {
	return &Reader{Name: name, Rows: l.Rows, Vocab: l.Vocab, Routes: l.Routes,
		rows: func(first int, dst []float32) ([]float32, error) {
			return l.Data[first*l.Vocab : first*l.Vocab+len(dst)], nil
		}}
}

// Next reads the next n rows (fewer at the end) and returns them, (rows,
// Vocab) row-major: in dst when it has room for them (else in a new slice,
// which the caller can pass again), or in place for a capture in memory.
// After the last row it returns nil and io.EOF.
func (r *Reader) Next(n int, dst []float32) ([]float32, error) {
	if r.next >= r.Rows {
		return nil, io.EOF
	}
	if n < 1 {
		return nil, fmt.Errorf("%s: reading %d rows", r.Name, n)
	}
	n = min(n, r.Rows-r.next)
	if cap(dst) < n*r.Vocab {
		dst = make([]float32, n*r.Vocab)
	}
	rows, err := r.rows(r.next, dst[:n*r.Vocab])
	if err != nil {
		return nil, err
	}
	r.next += n
	return rows, nil
}

// ReadAll reads the remaining rows into memory.
func (r *Reader) ReadAll() (*Logits, error) {
	l := &Logits{Rows: r.Rows - r.next, Vocab: r.Vocab, Routes: r.Routes, Data: []float32{}}
	if l.Rows == 0 {
		return l, nil
	}
	var err error
	l.Data, err = r.Next(l.Rows, make([]float32, l.Rows*l.Vocab))
	return l, err
}

// Close releases the file, if the Reader opened one.
func (r *Reader) Close() error {
	if r.close == nil {
		return nil
	}
	c := r.close
	r.close = nil
	return c()
}
