// Package dump reads and writes the float-reference logit dump that existing
// capture scripts write: little-endian uint64 rows, uint64 vocab, then
// rows×vocab float32, row-major. Row i is the logit row computed just before
// output token i was appended.
//
// The same logits can also be a safetensors file (safetensors.go), which
// for a mixture of experts also holds the experts each row was routed to:
// the binary format has no room for them, and other tools read it exactly.
package dump

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strings"

	"logitscope/internal/format/routing"
	"logitscope/internal/format/safetensors"
	"logitscope/internal/sys/tempfile"
)

// HeaderSize is the byte length of the two uint64 fields.
const HeaderSize = 16

// maxElements bounds rows×vocab so that a lying header cannot make a reader
// allocate without limit: 2^32 float32 is 16 GiB, far above any real capture.
const maxElements = 1 << 32

// Logits is a dump in memory: Data (Rows, Vocab) row-major, and for a
// mixture of experts the Routes of the same rows (nil for a dense model,
// and for a binary dump, which cannot hold them).
type Logits struct {
	Rows, Vocab int
	Data        []float32
	Routes      *routing.Routes
}

// Row returns row i (Vocab,) without copying.
func (l *Logits) Row(i int) []float32 { return l.Data[i*l.Vocab : (i+1)*l.Vocab] }

// Write encodes l to w as a binary dump, which holds the logits only: a
// caller with Routes to keep writes safetensors (WriteTemp and WriteFile
// choose by the path).
func Write(w io.Writer, l *Logits) error {
	if l.Rows*l.Vocab != len(l.Data) {
		return fmt.Errorf("dump: %d rows × %d vocab does not match %d values", l.Rows, l.Vocab, len(l.Data))
	}
	rows := make([][]float32, l.Rows)
	for i := range rows {
		rows[i] = l.Row(i)
	}
	return WriteRows(w, l.Vocab, rows)
}

// WriteRows encodes rows (each vocab logits) to w as a binary dump, a row
// at a time: a capture that holds its rows apart is written without a
// second copy of them.
func WriteRows(w io.Writer, vocab int, rows [][]float32) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	var hdr [HeaderSize]byte
	binary.LittleEndian.PutUint64(hdr[0:], uint64(len(rows)))
	binary.LittleEndian.PutUint64(hdr[8:], uint64(vocab))
	if _, err := bw.Write(hdr[:]); err != nil {
		return err
	}
	var b [4]byte
	for i, row := range rows {
		if len(row) != vocab {
			return fmt.Errorf("dump: row %d has %d logits, not %d", i, len(row), vocab)
		}
		for _, v := range row {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			if _, err := bw.Write(b[:]); err != nil {
				return err
			}
		}
	}
	return bw.Flush()
}

// WriteFile writes path atomically: a temporary file in the same directory,
// renamed into place only when complete, so a failed or interrupted write
// leaves no half-written dump behind (package tempfile). A path ending in
// .safetensors gets safetensors (with l's Routes), any other the binary
// dump.
func WriteFile(path string, l *Logits) error {
	tmp, err := WriteTemp(path, l)
	if err != nil {
		return err
	}
	return tempfile.Rename(tempfile.Move{Temp: tmp, Path: path})
}

// WriteTemp writes l to a new temporary beside path and returns its name,
// for a caller that puts it in place together with other files
// (tempfile.Rename).
func WriteTemp(path string, l *Logits) (string, error) {
	if IsSafetensors(path) {
		return tempfile.Write(path, func(w io.Writer) error { return writeSafetensors(w, l, nil) })
	}
	return tempfile.Write(path, func(w io.Writer) error { return Write(w, l) })
}

// IsSafetensors says whether a dump's name makes it safetensors rather
// than the binary dump.
func IsSafetensors(name string) bool { return strings.HasSuffix(strings.ToLower(name), ".safetensors") }

// ParseHeader validates the header against the total byte size of the dump.
func ParseHeader(hdr []byte, size int64, name string) (rows, vocab int, err error) {
	if size < HeaderSize || len(hdr) < HeaderSize {
		return 0, 0, fmt.Errorf("%s: truncated dump: %d bytes, the header alone is %d", name, size, HeaderSize)
	}
	r := binary.LittleEndian.Uint64(hdr[0:])
	v := binary.LittleEndian.Uint64(hdr[8:])
	if v == 0 {
		return 0, 0, fmt.Errorf("%s: header says vocab 0", name)
	}
	if r > maxElements || v > maxElements || r*v > maxElements {
		return 0, 0, fmt.Errorf("%s: header says %d rows × %d vocab, too large to be a logit dump", name, r, v)
	}
	want := HeaderSize + int64(r*v)*4
	switch {
	case size < want:
		return 0, 0, fmt.Errorf("%s: truncated dump: header says %d rows × %d vocab (%d bytes), file has %d bytes", name, r, v, want, size)
	case size > want:
		return 0, 0, fmt.Errorf("%s: %d trailing bytes after %d rows × %d vocab", name, size-want, r, v)
	}
	return int(r), int(v), nil
}

// Read decodes a whole dump of size bytes from r; name is used in errors.
func Read(r io.Reader, size int64, name string) (*Logits, error) {
	var hdr [HeaderSize]byte
	if _, err := io.ReadFull(r, hdr[:min(int64(HeaderSize), size)]); err != nil {
		return nil, fmt.Errorf("%s: reading header: %w", name, err)
	}
	rows, vocab, err := ParseHeader(hdr[:], size, name)
	if err != nil {
		return nil, err
	}
	l := &Logits{Rows: rows, Vocab: vocab, Data: make([]float32, rows*vocab)}
	// A row at a time: the bytes of one row beside the floats, not of all.
	raw := make([]byte, 4*vocab)
	for i := range rows {
		if _, err := io.ReadFull(r, raw); err != nil {
			return nil, fmt.Errorf("%s: truncated dump at row %d: %w", name, i, err)
		}
		safetensors.DecodeFloat32(safetensors.F32, raw, l.Row(i))
	}
	return l, nil
}

// ReadFile reads and validates the dump at path.
func ReadFile(path string) (*Logits, error) {
	r, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.ReadAll()
}
