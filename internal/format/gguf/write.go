package gguf

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"unicode/utf8"

	"logitscope/internal/format/ggml"
)

// Tensor is one tensor to write.
type Tensor struct {
	Name string
	Dims []uint64 // ggml order: Dims[0] is the row length
	Type ggml.Type
	Data []byte // exactly the size Dims and Type imply
}

// Write writes a version 3 GGUF file in the layout llama.cpp's gguf_write
// produces: header, pairs and tensor infos in the order given, padding to
// the alignment, then each tensor's data followed by padding to the
// alignment.
//
// alignment 0 means 32. General.alignment is added (after kv) only when
// the alignment is not 32; if kv holds it, it must agree. Everything is
// validated before the first byte is written, so that a refused input
// leaves w untouched.
func Write(w io.Writer, kv []KV, tensors []Tensor, alignment int) error {
	header, align, err := buildHeader(kv, tensors, alignment)
	if err != nil {
		return fmt.Errorf("gguf: write: %v", err)
	}
	pad := make([]byte, align)
	if _, err := w.Write(header); err != nil {
		return fmt.Errorf("gguf: write: %v", err)
	}
	for _, t := range tensors {
		if _, err := w.Write(t.Data); err != nil {
			return fmt.Errorf("gguf: write: tensor %q: %v", t.Name, err)
		}
		if _, err := w.Write(pad[:alignUp(uint64(len(t.Data)), align)-uint64(len(t.Data))]); err != nil {
			return fmt.Errorf("gguf: write: tensor %q: %v", t.Name, err)
		}
	}
	return nil
}

// buildHeader validates the input and returns everything before the
// first tensor's data, padding included, and the alignment.
func buildHeader(kv []KV, tensors []Tensor, alignment int) ([]byte, uint64, error) {
	if alignment == 0 {
		alignment = defaultAlignment
	}
	if alignment < 0 || alignment > math.MaxUint32 || alignment&(alignment-1) != 0 {
		return nil, 0, fmt.Errorf("alignment %d is not a power of two below 2^32", alignment)
	}
	align := uint64(alignment)
	seen := make(map[string]bool, len(kv)+1)
	for _, p := range kv {
		switch {
		case p.Key == "":
			return nil, 0, fmt.Errorf("empty key")
		case !utf8.ValidString(p.Key):
			return nil, 0, fmt.Errorf("key %q is not valid UTF-8", p.Key)
		case seen[p.Key]:
			return nil, 0, fmt.Errorf("key %q given twice", p.Key)
		case p.Key == AlignmentKey && p.Value.x != uint32(alignment):
			return nil, 0, fmt.Errorf("key %q is %s but the alignment is UINT32 %d", p.Key, describe(p.Value), alignment)
		}
		seen[p.Key] = true
		if err := p.Value.check(0); err != nil {
			return nil, 0, fmt.Errorf("key %q: %v", p.Key, err)
		}
	}
	if alignment != defaultAlignment && !seen[AlignmentKey] {
		kv = append(kv[:len(kv):len(kv)], KV{AlignmentKey, Uint32Value(uint32(alignment))})
	}

	b := append([]byte("GGUF"), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b[4:], 3)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(tensors)))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(kv)))
	for _, p := range kv {
		b = appendString(b, p.Key)
		b = binary.LittleEndian.AppendUint32(b, uint32(p.Value.Type()))
		b = appendPayload(b, p.Value)
	}
	names := make(map[string]bool, len(tensors))
	var off uint64 // relative to the data section
	for i, t := range tensors {
		if err := checkName(t.Name); err != nil {
			return nil, 0, fmt.Errorf("tensor %d %q: %v", i, t.Name, err)
		}
		if names[t.Name] {
			return nil, 0, fmt.Errorf("tensor %d %q: name given twice", i, t.Name)
		}
		names[t.Name] = true
		if len(t.Dims) < 1 || len(t.Dims) > maxDims {
			return nil, 0, fmt.Errorf("tensor %d %q: %d dims, not 1..%d", i, t.Name, len(t.Dims), maxDims)
		}
		size, err := tensorSize(t.Dims, t.Type)
		if err != nil {
			return nil, 0, fmt.Errorf("tensor %d %q: %v", i, t.Name, err)
		}
		if int64(len(t.Data)) != size {
			return nil, 0, fmt.Errorf("tensor %d %q: %d bytes of data but dims %v of %v take %d", i, t.Name, len(t.Data), t.Dims, t.Type, size)
		}
		b = appendString(b, t.Name)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(t.Dims)))
		for _, d := range t.Dims {
			b = binary.LittleEndian.AppendUint64(b, d)
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(t.Type))
		b = binary.LittleEndian.AppendUint64(b, off)
		// The data is in memory, so the sum stays far below 2^63.
		off = alignUp(off+uint64(size), align)
	}
	b = append(b, make([]byte, alignUp(uint64(len(b)), align)-uint64(len(b)))...)
	return b, align, nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.LittleEndian.AppendUint64(b, uint64(len(s))), s...)
}

// appendPayload appends v without its type: an array as its element type,
// length and elements, each element of an array of arrays likewise.
func appendPayload(b []byte, v Value) []byte {
	le := binary.LittleEndian
	switch x := v.x.(type) {
	case uint8:
		return append(b, x)
	case int8:
		return append(b, byte(x))
	case uint16:
		return le.AppendUint16(b, x)
	case int16:
		return le.AppendUint16(b, uint16(x))
	case uint32:
		return le.AppendUint32(b, x)
	case int32:
		return le.AppendUint32(b, uint32(x))
	case float32:
		return le.AppendUint32(b, math.Float32bits(x))
	case bool:
		return append(b, boolByte(x))
	case string:
		return appendString(b, x)
	case uint64:
		return le.AppendUint64(b, x)
	case int64:
		return le.AppendUint64(b, uint64(x))
	case float64:
		return le.AppendUint64(b, math.Float64bits(x))
	}
	b = le.AppendUint32(b, uint32(v.ElemType()))
	b = le.AppendUint64(b, uint64(v.Len()))
	switch x := v.x.(type) {
	case []uint8:
		return append(b, x...)
	case []int8:
		for _, e := range x {
			b = append(b, byte(e))
		}
	case []uint16:
		for _, e := range x {
			b = le.AppendUint16(b, e)
		}
	case []int16:
		for _, e := range x {
			b = le.AppendUint16(b, uint16(e))
		}
	case []uint32:
		for _, e := range x {
			b = le.AppendUint32(b, e)
		}
	case []int32:
		for _, e := range x {
			b = le.AppendUint32(b, uint32(e))
		}
	case []float32:
		for _, e := range x {
			b = le.AppendUint32(b, math.Float32bits(e))
		}
	case []bool:
		for _, e := range x {
			b = append(b, boolByte(e))
		}
	case []string:
		for _, e := range x {
			b = appendString(b, e)
		}
	case []uint64:
		for _, e := range x {
			b = le.AppendUint64(b, e)
		}
	case []int64:
		for _, e := range x {
			b = le.AppendUint64(b, uint64(e))
		}
	case []float64:
		for _, e := range x {
			b = le.AppendUint64(b, math.Float64bits(e))
		}
	case []Value:
		for _, e := range x {
			b = appendPayload(b, e)
		}
	}
	return b
}

func boolByte(x bool) byte {
	if x {
		return 1
	}
	return 0
}
