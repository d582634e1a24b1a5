package onnx

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Meta is what ReadMeta reads of a model: its producer_name and
// metadata_props.
type Meta struct {
	Producer string
	Props    map[string]string
}

// maxMetaString bounds a producer name or metadata string ReadMeta reads:
// they are short, and a corrupt length must not make it allocate gigabytes.
const maxMetaString = 1 << 20

// ReadMeta reads the producer and metadata_props of the ONNX model in r
// (size bytes), seeking past every other top-level field: the graph, which
// holds the weights, is never read, so a model of gigabytes costs a few
// small reads. name is the file's, for errors.
func ReadMeta(r io.ReadSeeker, size int64, name string) (Meta, error) {
	m := Meta{Props: map[string]string{}}
	br := bufio.NewReaderSize(r, 4096)
	var at int64 // the offset br reads next
	varint := func(what string) (uint64, error) {
		v, err := binary.ReadUvarint(br)
		if err != nil {
			return 0, fmt.Errorf("%s: offset %d: %s: %v", name, at, what, eofIsUnexpected(err))
		}
		at += int64(uvarintLen(v))
		return v, nil
	}
	for at < size {
		tag, err := varint("field tag")
		if err != nil {
			return Meta{}, err
		}
		field, wire := tag>>3, tag&7
		var n uint64
		switch wire {
		case 0:
			if _, err := varint(fmt.Sprintf("field %d", field)); err != nil {
				return Meta{}, err
			}
			continue
		case 1:
			n = 8
		case 5:
			n = 4
		case 2:
			if n, err = varint(fmt.Sprintf("field %d's length", field)); err != nil {
				return Meta{}, err
			}
		default:
			return Meta{}, fmt.Errorf("%s: offset %d: field %d has wire type %d: not an ONNX model", name, at, field, wire)
		}
		if n > uint64(size-at) {
			return Meta{}, fmt.Errorf("%s: offset %d: field %d holds %d bytes, past the file's end (%d bytes)", name, at, field, n, size)
		}
		if wire == 2 && (field == 2 || field == 14) {
			if n > maxMetaString {
				return Meta{}, fmt.Errorf("%s: offset %d: field %d holds %d bytes: too long for a producer name or metadata entry", name, at, field, n)
			}
			b := make([]byte, n)
			if _, err := io.ReadFull(br, b); err != nil {
				return Meta{}, fmt.Errorf("%s: offset %d: %v", name, at, eofIsUnexpected(err))
			}
			at += int64(n)
			if field == 2 {
				m.Producer = string(b)
				continue
			}
			k, v, err := entry(b)
			if err != nil {
				return Meta{}, fmt.Errorf("%s: metadata entry at offset %d: %v", name, at-int64(n), err)
			}
			m.Props[k] = v
			continue
		}
		// Skip the field: a seek, the reader's buffer dropped.
		at += int64(n)
		if _, err := r.Seek(at, io.SeekStart); err != nil {
			return Meta{}, fmt.Errorf("%s: %v", name, err)
		}
		br.Reset(r)
	}
	return m, nil
}

// entry decodes a StringStringEntryProto: key (1) and value (2).
func entry(b []byte) (key, value string, err error) {
	for len(b) > 0 {
		tag, k := binary.Uvarint(b)
		if k <= 0 || tag&7 != 2 {
			return "", "", errors.New("not a string entry")
		}
		b = b[k:]
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return "", "", errors.New("a string runs past the entry")
		}
		s := string(b[k : k+int(n)])
		b = b[k+int(n):]
		switch tag >> 3 {
		case 1:
			key = s
		case 2:
			value = s
		}
	}
	return key, value, nil
}

func uvarintLen(v uint64) int {
	return len(binary.AppendUvarint(nil, v))
}

func eofIsUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
