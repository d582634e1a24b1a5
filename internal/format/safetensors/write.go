package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"
)

// Tensor is one tensor to write.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// Write writes a safetensors file: deterministic bytes for the same input
// (tensors sorted by name, header padded with spaces to a multiple of 8).
//
// The header is compact JSON with every object's keys sorted: tensor names
// and "__metadata__" at the top level, data_offsets/dtype/shape within an
// entry. "__metadata__" appears only when metadata is non-empty.
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	if err := write(w, tensors, metadata); err != nil {
		return fmt.Errorf("safetensors: write: %v", err)
	}
	return nil
}

// WriteFile writes path atomically (temporary file in the same directory, then rename).
func WriteFile(path string, tensors []Tensor, metadata map[string]string) error {
	// Validate first so that bad input never even creates a temporary file.
	if _, _, err := buildHeader(tensors, metadata); err != nil {
		return fmt.Errorf("safetensors: %s: %v", path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	err = write(tmp, tensors, metadata)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		// CreateTemp makes the file private; a weights file is not secret.
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("safetensors: %s: %v", path, err)
	}
	return nil
}

func write(w io.Writer, tensors []Tensor, metadata map[string]string) error {
	header, sorted, err := buildHeader(tensors, metadata)
	if err != nil {
		return err
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(header)))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return err
	}
	if _, err := w.Write(header); err != nil {
		return err
	}
	for _, t := range sorted {
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
	}
	return nil
}

// headerEntry's field order is alphabetical so that its JSON keys come out
// sorted, like the map keys around it.
type headerEntry struct {
	DataOffsets [2]int64 `json:"data_offsets"`
	DType       DType    `json:"dtype"`
	Shape       []int    `json:"shape"`
}

// buildHeader validates tensors and returns the padded header bytes and the
// tensors in the order their data must follow.
func buildHeader(tensors []Tensor, metadata map[string]string) ([]byte, []Tensor, error) {
	sorted := slices.Clone(tensors)
	slices.SortFunc(sorted, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	entries := make(map[string]any, len(sorted)+1)
	var offset int64
	for i, t := range sorted {
		if i > 0 && sorted[i-1].Name == t.Name {
			return nil, nil, fmt.Errorf("tensor %q given twice", t.Name)
		}
		n, err := checkTensor(t)
		if err != nil {
			return nil, nil, err
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{} // a scalar's shape is [], not null
		}
		entries[t.Name] = headerEntry{DataOffsets: [2]int64{offset, offset + n}, DType: t.DType, Shape: shape}
		offset += n
	}
	if len(metadata) > 0 {
		for k, v := range metadata {
			if !utf8.ValidString(k) || !utf8.ValidString(v) {
				return nil, nil, fmt.Errorf("metadata %q: key or value is not valid UTF-8", k)
			}
		}
		entries[metadataKey] = metadata
	}

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // keep "<", ">" and "&" in metadata readable
	if err := enc.Encode(entries); err != nil {
		return nil, nil, err
	}
	header := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	// Pad so the data section starts 8-byte aligned, as the reference writer
	// does; readers that mmap the file can then view F32/I64 data in place.
	for len(header)%8 != 0 {
		header = append(header, ' ')
	}
	return header, sorted, nil
}

// checkTensor validates one tensor to write and returns its byte length.
func checkTensor(t Tensor) (int64, error) {
	// An empty name is odd but legal, and the reader accepts it; refusing it
	// here would make some valid files impossible to rewrite.
	switch {
	case t.Name == metadataKey:
		return 0, fmt.Errorf("tensor name %q is reserved for metadata", t.Name)
	case !utf8.ValidString(t.Name):
		return 0, fmt.Errorf("tensor %q: name is not valid UTF-8", t.Name)
	case t.DType.Size() == 0:
		return 0, fmt.Errorf("tensor %q: unknown dtype %q", t.Name, t.DType)
	}
	n := uint64(t.DType.Size())
	for i, d := range t.Shape {
		if d < 0 {
			return 0, fmt.Errorf("tensor %q: shape[%d] is negative: %d", t.Name, i, d)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("tensor %q: shape %v is too large", t.Name, t.Shape)
		}
		n = lo
	}
	if uint64(len(t.Data)) != n {
		return 0, fmt.Errorf("tensor %q: %d bytes of data but shape %v of %s needs %d",
			t.Name, len(t.Data), t.Shape, t.DType, n)
	}
	return int64(n), nil
}
