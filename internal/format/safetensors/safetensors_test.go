package safetensors

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// file assembles a safetensors file around an arbitrary header string.
func file(header string, data ...byte) []byte {
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(out, header...), data...)
}

func TestOpenMalformed(t *testing.T) {
	withLen := func(n uint64, rest string) []byte {
		return append(binary.LittleEndian.AppendUint64(nil, n), rest...)
	}
	ok := `"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}`
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"shorter than length prefix", []byte{1, 2, 3}, "3 bytes, too short"},
		{"header length beyond file", withLen(64, "{}"), "header length 64 exceeds the 2 bytes"},
		{"header length absurd", withLen(1<<40, "{}"), "exceeds the 104857600-byte limit"},
		{"empty header", file(""), "malformed JSON header: EOF"},
		{"malformed JSON", file(`{"a":`), "malformed JSON header"},
		{"unterminated object", file(`{"a":{"dtype":"U8","shape":[],"data_offsets":[0,1]}`, 0), "malformed JSON header"},
		{"header is array", file(`[1,2]`), `header is not a JSON object (starts with "[")`},
		{"header is string", file(`"hi"`), `header is not a JSON object (starts with "hi")`},
		{"invalid UTF-8", file("{\"\xff\":1}"), "not valid UTF-8"},
		{"trailing data", file(`{} {}`), "trailing data after the object"},
		{"duplicate key", file(`{`+ok+`,`+ok+`}`, 1, 2), `key "a" appears twice`},
		{"entry not object", file(`{"a":5}`), `tensor "a": entry is not a JSON object: 5`},
		{"missing dtype", file(`{"a":{"shape":[],"data_offsets":[0,0]}}`), `tensor "a": missing dtype`},
		{"dtype not string", file(`{"a":{"dtype":4,"shape":[],"data_offsets":[0,4]}}`), `tensor "a": dtype is not a string: 4`},
		{"unknown dtype", file(`{"w":{"dtype":"F99","shape":[1],"data_offsets":[0,1]}}`, 0), `tensor "w": unknown dtype "F99"`},
		{"missing shape", file(`{"a":{"dtype":"U8","data_offsets":[0,1]}}`, 0), `tensor "a": missing shape`},
		{"shape not array", file(`{"a":{"dtype":"U8","shape":3,"data_offsets":[0,3]}}`, 0, 0, 0), `tensor "a": shape is not an array: 3`},
		{"negative dim", file(`{"a":{"dtype":"U8","shape":[2,-1],"data_offsets":[0,0]}}`), `tensor "a": shape[1] is negative: -1`},
		{"fractional dim", file(`{"a":{"dtype":"U8","shape":[1.5],"data_offsets":[0,1]}}`, 0), `tensor "a": shape[0] is not an integer: 1.5`},
		{"exponent dim", file(`{"a":{"dtype":"U8","shape":[1e0],"data_offsets":[0,1]}}`, 0), `shape[0] is not an integer: 1e0`},
		{"string dim", file(`{"a":{"dtype":"U8","shape":["1"],"data_offsets":[0,1]}}`, 0), `shape[0] is not a number: "1"`},
		{"huge dim", file(`{"a":{"dtype":"U8","shape":[99999999999999999999],"data_offsets":[0,1]}}`, 0), `shape[0] is too large`},
		{"numel overflow", file(`{"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`), `tensor "a": shape [4294967296 4294967296] has too many elements (overflow)`},
		{"byte size overflow", file(`{"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}}`), `too many elements (overflow)`},
		{"missing offsets", file(`{"a":{"dtype":"U8","shape":[]}}`), `tensor "a": missing data_offsets`},
		{"offsets wrong arity", file(`{"a":{"dtype":"U8","shape":[],"data_offsets":[0]}}`), `tensor "a": data_offsets must be [begin, end], got [0]`},
		{"negative offset", file(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[-1,0]}}`), `tensor "a": data_offsets begin is negative: -1`},
		{"begin after end", file(`{"a":{"dtype":"U8","shape":[0],"data_offsets":[2,1]}}`, 0, 0), `tensor "a": data_offsets [2, 1] has begin > end`},
		{"end beyond data", file(`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}`, 0, 0), `tensor "a": data_offsets end 4 is beyond the 2-byte data section`},
		{"length mismatch", file(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}`, 0, 0, 0, 0), `tensor "a": data_offsets [0, 4] span 4 bytes but shape [2] of F32 needs 8`},
		{"overlap", file(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}`, 0, 0, 0), `tensor "b" [1, 3] overlaps tensor "a" [0, 2]`},
		{"identical ranges", file(`{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}`, 0, 0), `tensor "b" [0, 2] overlaps tensor "a" [0, 2]`},
		{"hole between tensors", file(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[2,3]}}`, 0, 0, 0), `1 unused bytes between tensor "a" (ends at 1) and tensor "b" (begins at 2)`},
		{"hole at start", file(`{"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 0, 0), `1 unused bytes before the first tensor "a"`},
		{"trailing data bytes", file(`{`+ok+`}`, 0, 0, 0), `1 unused bytes after the last tensor`},
		{"data but no tensors", file(`{}`, 0), `1 unused bytes after the last tensor`},
		{"metadata not object", file(`{"__metadata__":[1]}`), `__metadata__ is not a JSON object: [1]`},
		{"metadata value not string", file(`{"__metadata__":{"k":"v","n":1}}`), `__metadata__["n"] is not a string: 1`},
		{"metadata nested", file(`{"__metadata__":{"k":{"x":"y"}}}`), `__metadata__["k"] is not a string: {"x":"y"}`},
		{"newline in raw value stays one line", file("{\"a\":[\n1,\n2]}"), `tensor "a": entry is not a JSON object: [ 1, 2]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.safetensors")
			if err := os.WriteFile(path, tc.data, 0o644); err != nil {
				t.Fatal(err)
			}
			f, err := Open(path)
			if err == nil {
				f.Close()
				t.Fatalf("Open succeeded, want error containing %q", tc.want)
			}
			msg := err.Error()
			if !strings.Contains(msg, path) || !strings.Contains(msg, tc.want) {
				t.Errorf("error %q\nwant it to name %s and contain %q", msg, path, tc.want)
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("error spans lines: %q", msg)
			}
		})
	}
}

func TestOpenAccepts(t *testing.T) {
	for _, tc := range []struct {
		name, header string
		data         []byte
	}{
		{"empty", `{}`, nil},
		{"padding spaces", `{}      `, nil},
		{"null metadata", `{"__metadata__":null}`, nil},
		{"unknown field ignored", `{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"extra":true}}`, []byte{7}},
		{"zero-size tensors share offsets", `{"a":{"dtype":"F32","shape":[0,3],"data_offsets":[0,0]},"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"c":{"dtype":"U8","shape":[0],"data_offsets":[1,1]}}`, []byte{7}},
		{"empty name", `{"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{7}},
		{"scalar", `{"s":{"dtype":"I32","shape":[],"data_offsets":[0,4]}}`, []byte{1, 0, 0, 0}},
		{"unsorted offsets", `{"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}`, []byte{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := file(tc.header, tc.data...)
			f, err := NewFile(bytes.NewReader(data), int64(len(data)), "ok.safetensors")
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range f.Names() {
				info, _ := f.Info(name)
				raw, err := f.ReadRaw(name)
				if err != nil || int64(len(raw)) != info.Length {
					t.Errorf("ReadRaw(%q) = %d bytes, %v; want %d", name, len(raw), err, info.Length)
				}
			}
		})
	}
}

func TestNamesInDataOrder(t *testing.T) {
	data := file(`{"b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}`, 1, 2)
	f, err := NewFile(bytes.NewReader(data), int64(len(data)), "x")
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Names(); !slices.Equal(got, []string{"b", "a"}) {
		t.Errorf("Names = %v, want data order [b a]", got)
	}
	if _, err := f.ReadRaw("missing"); err == nil || !strings.Contains(err.Error(), `x: no tensor "missing"`) {
		t.Errorf("ReadRaw(missing) error = %v", err)
	}
	if _, err := f.ReadFloat32("a"); err == nil || !strings.Contains(err.Error(), `tensor "a" is U8`) {
		t.Errorf("ReadFloat32(U8) error = %v", err)
	}
}

func TestRoundTripEveryDType(t *testing.T) {
	floats := []float32{0, 1, -2, 0.5, 1024, -0.125}
	i32 := EncodeI32([]int32{0, -1, 1 << 30, -(1 << 31), 7, 42})
	tensors := []Tensor{
		{Name: "f32", DType: F32, Shape: []int{2, 3}, Data: EncodeF32(floats)},
		{Name: "f16", DType: F16, Shape: []int{3, 2}, Data: EncodeF16(floats)},
		{Name: "bf16", DType: BF16, Shape: []int{6}, Data: EncodeBF16(floats)},
		{Name: "i8", DType: I8, Shape: []int{1, 6}, Data: []byte{0, 0xff, 0x80, 0x7f, 1, 2}},
		{Name: "u8", DType: U8, Shape: []int{6, 1}, Data: []byte{0, 255, 128, 127, 1, 2}},
		{Name: "i32", DType: I32, Shape: []int{2, 3}, Data: i32},
		{Name: "scalar", DType: F32, Shape: nil, Data: EncodeF32([]float32{3})},
		{Name: "empty", DType: BF16, Shape: []int{0, 4}, Data: nil},
	}
	meta := map[string]string{"format": "pt", "k": "v"}
	path := filepath.Join(t.TempDir(), "rt.safetensors")
	if err := WriteFile(path, tensors, meta); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if len(f.Metadata) != 2 || f.Metadata["k"] != "v" {
		t.Errorf("Metadata = %v", f.Metadata)
	}
	if len(f.Names()) != len(tensors) {
		t.Errorf("Names = %v", f.Names())
	}
	for _, want := range tensors {
		info, ok := f.Info(want.Name)
		if !ok || info.DType != want.DType || !slices.Equal(info.Shape, append([]int{}, want.Shape...)) {
			t.Errorf("Info(%q) = %+v, %v", want.Name, info, ok)
			continue
		}
		if info.Offset%8 != 0 && want.Name == "bf16" { // first in sorted order
			t.Errorf("data section not 8-aligned: %d", info.Offset)
		}
		raw, err := f.ReadRaw(want.Name)
		if err != nil || !bytes.Equal(raw, want.Data) {
			t.Errorf("ReadRaw(%q) = %v, %v; want %v", want.Name, raw, err, want.Data)
		}
		if want.DType.IsFloat() {
			got, err := f.ReadFloat32(want.Name)
			if err != nil {
				t.Errorf("ReadFloat32(%q): %v", want.Name, err)
			} else if want.Name != "scalar" && want.Name != "empty" && !slices.Equal(got, floats) {
				t.Errorf("ReadFloat32(%q) = %v, want %v", want.Name, got, floats)
			}
		}
	}
}

func TestReadFloat32Chunked(t *testing.T) {
	// More elements than one read chunk holds, with values that depend on
	// the index so a misplaced chunk shows.
	n := readChunk/2 + 1234
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(i % 2048)
	}
	var buf bytes.Buffer
	if err := Write(&buf, []Tensor{{Name: "w", DType: F16, Shape: []int{n}, Data: EncodeF16(vals)}}, nil); err != nil {
		t.Fatal(err)
	}
	f, err := NewFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "big")
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.ReadFloat32("w")
	if err != nil || !slices.Equal(got, vals) {
		t.Fatalf("ReadFloat32 mismatch (err %v)", err)
	}
}

func TestWriteDeterministic(t *testing.T) {
	a := Tensor{Name: "a", DType: U8, Shape: []int{1}, Data: []byte{1}}
	b := Tensor{Name: "b", DType: U8, Shape: []int{2}, Data: []byte{2, 3}}
	var x, y bytes.Buffer
	if err := Write(&x, []Tensor{a, b}, map[string]string{"p": "1", "q": "2"}); err != nil {
		t.Fatal(err)
	}
	if err := Write(&y, []Tensor{b, a}, map[string]string{"q": "2", "p": "1"}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(x.Bytes(), y.Bytes()) {
		t.Errorf("input order changed output:\n%q\n%q", x.Bytes(), y.Bytes())
	}
	var z bytes.Buffer
	if err := Write(&z, []Tensor{a}, map[string]string{}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(z.String(), "__metadata__") {
		t.Errorf("empty metadata written: %q", z.String())
	}
	if n := binary.LittleEndian.Uint64(z.Bytes()); n%8 != 0 {
		t.Errorf("header length %d not a multiple of 8", n)
	}
}

func TestWriteValidates(t *testing.T) {
	u8 := func(name string, shape []int, n int) Tensor {
		return Tensor{Name: name, DType: U8, Shape: shape, Data: make([]byte, n)}
	}
	for _, tc := range []struct {
		name    string
		tensors []Tensor
		want    string
	}{
		{"duplicate", []Tensor{u8("w", []int{1}, 1), u8("v", nil, 1), u8("w", []int{1}, 1)}, `tensor "w" given twice`},
		{"short data", []Tensor{{Name: "w", DType: F32, Shape: []int{2, 2}, Data: make([]byte, 12)}}, `tensor "w": 12 bytes of data but shape [2 2] of F32 needs 16`},
		{"unknown dtype", []Tensor{{Name: "w", DType: "Q4", Shape: []int{1}, Data: []byte{0}}}, `tensor "w": unknown dtype "Q4"`},
		{"negative dim", []Tensor{u8("w", []int{-1}, 0)}, `tensor "w": shape[0] is negative: -1`},
		{"reserved name", []Tensor{u8("__metadata__", []int{1}, 1)}, "reserved"},
		{"bad utf8 name", []Tensor{u8("\xff", []int{1}, 1)}, "not valid UTF-8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, tc.tensors, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Write error = %v, want %q", err, tc.want)
			}
			if buf.Len() != 0 {
				t.Errorf("Write wrote %d bytes before failing", buf.Len())
			}
			dir := t.TempDir()
			path := filepath.Join(dir, "out.safetensors")
			err = WriteFile(path, tc.tensors, nil)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("WriteFile error = %v, want %s and %q", err, path, tc.want)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("WriteFile left %v behind", entries)
			}
		})
	}
}

func TestWriteFileReplacesAtomically(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.safetensors")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []Tensor{{Name: "x", DType: U8, Shape: []int{1}, Data: []byte{9}}}, nil); err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("dir holds %v, want only the output", entries)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("stat = %v, %v", st, err)
	}
	if _, err := os.ReadFile(path); err != nil {
		t.Fatal(err)
	}
	if f, err := Open(path); err != nil {
		t.Error(err)
	} else {
		f.Close()
	}
	if err := WriteFile(filepath.Join(dir, "nodir", "m.safetensors"), nil, nil); err == nil {
		t.Error("WriteFile into a missing directory succeeded")
	}
}

func TestOpenMissing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.safetensors")
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("Open(missing) error = %v", err)
	}
}
