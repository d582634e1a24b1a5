package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxHeaderSize is the largest header accepted, the reference
// implementation's limit: a real header is a few hundred bytes per tensor,
// so anything bigger is a corrupt length, not a big model.
const MaxHeaderSize = 100 << 20

const metadataKey = "__metadata__"

// readHeader parses and validates the header of the size-byte file r and
// returns the tensors in data-offset order with absolute offsets. Errors are
// one line and name the tensor or field at fault; the caller adds the file.
func readHeader(r io.ReaderAt, size int64) ([]TensorInfo, map[string]string, error) {
	if size < 8 {
		return nil, nil, fmt.Errorf("file is %d bytes, too short for the 8-byte header length", size)
	}
	var lenBuf [8]byte
	if err := readFullAt(r, lenBuf[:], 0); err != nil {
		return nil, nil, fmt.Errorf("reading header length: %v", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeaderSize {
		return nil, nil, fmt.Errorf("header length %d exceeds the %d-byte limit", n, MaxHeaderSize)
	}
	if n > uint64(size-8) {
		return nil, nil, fmt.Errorf("header length %d exceeds the %d bytes that follow it", n, size-8)
	}
	hdr := make([]byte, n)
	if err := readFullAt(r, hdr, 8); err != nil {
		return nil, nil, fmt.Errorf("reading header: %v", err)
	}
	dataStart := 8 + int64(n)
	tensors, meta, err := parseHeader(hdr, size-dataStart)
	if err != nil {
		return nil, nil, err
	}
	for i := range tensors {
		tensors[i].Offset += dataStart
	}
	return tensors, meta, nil
}

// parseHeader validates header JSON against a data section of dataLen bytes.
// Offsets in the result are relative to the data section.
func parseHeader(hdr []byte, dataLen int64) ([]TensorInfo, map[string]string, error) {
	// encoding/json would silently turn bad UTF-8 into U+FFFD, renaming a
	// tensor; the reference implementation rejects such headers.
	if !utf8.Valid(hdr) {
		return nil, nil, errors.New("header is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, fmt.Errorf("malformed JSON header: %v", err)
	}
	if tok != json.Delim('{') {
		return nil, nil, fmt.Errorf("header is not a JSON object (starts with %s)", describeToken(tok))
	}
	var tensors []TensorInfo
	meta := map[string]string{}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("malformed JSON header: %v", err)
		}
		key := tok.(string) // object keys are always strings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, fmt.Errorf("malformed JSON header at key %q: %v", key, err)
		}
		// JSON permits duplicate keys but a second entry would silently
		// replace the first; refuse rather than guess which is meant.
		if seen[key] {
			return nil, nil, fmt.Errorf("key %q appears twice in header", key)
		}
		seen[key] = true
		if key == metadataKey {
			if meta, err = parseMetadata(raw); err != nil {
				return nil, nil, err
			}
			continue
		}
		t, err := parseTensor(key, raw, dataLen)
		if err != nil {
			return nil, nil, err
		}
		tensors = append(tensors, t)
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return nil, nil, fmt.Errorf("malformed JSON header: %v", err)
	}
	// Trailing spaces are the writer's padding; anything else is garbage.
	if tok, err := dec.Token(); err != io.EOF {
		if err != nil {
			return nil, nil, fmt.Errorf("malformed JSON header after the object: %v", err)
		}
		return nil, nil, fmt.Errorf("header has trailing data after the object (%s)", describeToken(tok))
	}
	if err := checkLayout(tensors, dataLen); err != nil {
		return nil, nil, err
	}
	return tensors, meta, nil
}

// parseTensor validates one header entry. Unknown fields are ignored, as
// in the reference implementation, so that additive format changes still
// load.
func parseTensor(name string, raw json.RawMessage, dataLen int64) (TensorInfo, error) {
	t := TensorInfo{Name: name}
	fail := func(format string, args ...any) (TensorInfo, error) {
		return t, fmt.Errorf("tensor %q: %s", name, fmt.Sprintf(format, args...))
	}
	var fields map[string]any
	if err := decodeNumbers(raw, &fields); err != nil || fields == nil {
		return fail("entry is not a JSON object: %s", truncate(raw))
	}

	dt, ok := fields["dtype"].(string)
	switch {
	case fields["dtype"] == nil:
		return fail("missing dtype")
	case !ok:
		return fail("dtype is not a string: %s", jsonText(fields["dtype"]))
	case DType(dt).Size() == 0:
		return fail("unknown dtype %q", dt)
	}
	t.DType = DType(dt)

	shape, ok := fields["shape"].([]any)
	if !ok {
		if fields["shape"] == nil {
			return fail("missing shape")
		}
		return fail("shape is not an array: %s", jsonText(fields["shape"]))
	}
	t.Shape = make([]int, len(shape))
	numel := uint64(1)
	overflow := false
	for i, v := range shape {
		d, err := nonNegInt(v)
		if err != nil {
			return fail("shape[%d] %v", i, err)
		}
		t.Shape[i] = int(d)
		hi, lo := bits.Mul64(numel, uint64(d))
		overflow = overflow || hi != 0 || lo > math.MaxInt64
		numel = lo
	}
	var nbytes uint64
	if !overflow {
		hi, lo := bits.Mul64(numel, uint64(t.DType.Size()))
		overflow = hi != 0 || lo > math.MaxInt64
		nbytes = lo
	}
	if overflow {
		return fail("shape %v has too many elements (overflow)", t.Shape)
	}

	offs, ok := fields["data_offsets"].([]any)
	if !ok || len(offs) != 2 {
		if fields["data_offsets"] == nil {
			return fail("missing data_offsets")
		}
		return fail("data_offsets must be [begin, end], got %s", jsonText(fields["data_offsets"]))
	}
	begin, err := nonNegInt(offs[0])
	if err != nil {
		return fail("data_offsets begin %v", err)
	}
	end, err := nonNegInt(offs[1])
	if err != nil {
		return fail("data_offsets end %v", err)
	}
	if begin > end {
		return fail("data_offsets [%d, %d] has begin > end", begin, end)
	}
	if end > dataLen {
		return fail("data_offsets end %d is beyond the %d-byte data section", end, dataLen)
	}
	if uint64(end-begin) != nbytes {
		return fail("data_offsets [%d, %d] span %d bytes but shape %v of %s needs %d",
			begin, end, end-begin, t.Shape, t.DType, nbytes)
	}
	t.Offset, t.Length = begin, end-begin
	return t, nil
}

// checkLayout sorts tensors into data order and requires them to tile the
// data section exactly: no overlaps, no holes, no trailing bytes. This is
// what the reference implementation enforces, so Hugging Face tooling never
// produces or loads anything looser; a hole or trailing bytes almost always
// means a truncated, concatenated or hand-patched file, and rejecting it at
// Open beats computing logits from bytes nobody accounted for.
func checkLayout(tensors []TensorInfo, dataLen int64) error {
	slices.SortFunc(tensors, func(a, b TensorInfo) int {
		if a.Offset != b.Offset {
			return compareInt64(a.Offset, b.Offset)
		}
		if a.Length != b.Length {
			return compareInt64(a.Length, b.Length)
		}
		return strings.Compare(a.Name, b.Name)
	})
	var end int64
	for i, t := range tensors {
		switch {
		case t.Offset < end:
			p := tensors[i-1]
			return fmt.Errorf("tensor %q [%d, %d] overlaps tensor %q [%d, %d]",
				t.Name, t.Offset, t.Offset+t.Length, p.Name, p.Offset, p.Offset+p.Length)
		case t.Offset > end:
			if i == 0 {
				return fmt.Errorf("%d unused bytes before the first tensor %q (tensors must cover the data section contiguously)", t.Offset, t.Name)
			}
			return fmt.Errorf("%d unused bytes between tensor %q (ends at %d) and tensor %q (begins at %d); tensors must cover the data section contiguously",
				t.Offset-end, tensors[i-1].Name, end, t.Name, t.Offset)
		}
		end = t.Offset + t.Length
	}
	if end != dataLen {
		return fmt.Errorf("%d unused bytes after the last tensor (data section is %d bytes, tensors end at %d)", dataLen-end, dataLen, end)
	}
	return nil
}

// parseMetadata accepts a string→string object (or null, which the
// reference implementation also reads as "no metadata").
func parseMetadata(raw json.RawMessage) (map[string]string, error) {
	var v any
	if err := decodeNumbers(raw, &v); err != nil {
		return nil, fmt.Errorf("%s: %v", metadataKey, err)
	}
	meta := map[string]string{}
	if v == nil {
		return meta, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s is not a JSON object: %s", metadataKey, truncate(raw))
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) { // sorted: report the same key every time
		s, ok := obj[k].(string)
		if !ok {
			return nil, fmt.Errorf("%s[%q] is not a string: %s", metadataKey, k, jsonText(obj[k]))
		}
		meta[k] = s
	}
	return meta, nil
}

func decodeNumbers(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}

// nonNegInt accepts only a JSON integer literal in [0, MaxInt64]; 1.0, 1e3
// and "1" are refused, as they are by the reference implementation's usize.
func nonNegInt(v any) (int64, error) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, fmt.Errorf("is not a number: %s", jsonText(v))
	}
	s := string(num)
	if strings.HasPrefix(s, "-") {
		return 0, fmt.Errorf("is negative: %s", s)
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("is too large: %s", s)
		}
		return 0, fmt.Errorf("is not an integer: %s", s)
	}
	return n, nil
}

func compareInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func describeToken(tok json.Token) string {
	switch tok := tok.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(tok))
	case nil:
		return "null"
	}
	return jsonText(tok)
}

// jsonText renders a decoded JSON value for an error message, shortened so
// that one bad value cannot blow up a one-line error.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return truncate(b)
}

func truncate(b []byte) string {
	// Header whitespace may include newlines; keep errors on one line.
	s := strings.Join(strings.Fields(string(b)), " ")
	const max = 60
	if len(s) > max {
		return strings.ToValidUTF8(s[:max], "") + "..."
	}
	return s
}
