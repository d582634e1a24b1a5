package safetensors

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func FuzzNewFile(f *testing.F) {
	golden, err := os.ReadFile(goldenPath)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(golden)
	for _, h := range []string{
		`{}`,
		`{"__metadata__":{"a":"b"}}`,
		`{"a":{"dtype":"BF16","shape":[1,2],"data_offsets":[0,4]}}`,
		`{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[],"data_offsets":[4,8]}}`,
		`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`,
		`{"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}}`,
		`{"a":{"dtype":"I32","shape":[-1],"data_offsets":[0,8]}}`,
		`{"a":{"dtype":"U8","shape":[1.5],"data_offsets":[0,8]}}`,
		`{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8]},"__metadata__":[]}`,
		`{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}}`,
		`[`,
	} {
		f.Add(file(h, make([]byte, 8)...))
	}
	f.Add(golden[:len(golden)-1])
	f.Add(append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, golden[8:]...))

	f.Fuzz(func(t *testing.T, data []byte) {
		sf, err := NewFile(bytes.NewReader(data), int64(len(data)), "fuzz")
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "safetensors: fuzz: ") || strings.Contains(msg, "\n") {
				t.Fatalf("error not one line naming the file: %q", msg)
			}
			return
		}
		var tensors []Tensor
		for _, name := range sf.Names() {
			info, ok := sf.Info(name)
			if !ok {
				t.Fatalf("Names lists %q but Info misses it", name)
			}
			raw, err := sf.ReadRaw(name)
			if err != nil || int64(len(raw)) != info.Length || int64(info.NumElements()*info.DType.Size()) != info.Length {
				t.Fatalf("ReadRaw(%q): %d bytes, %v; info %+v", name, len(raw), err, info)
			}
			if info.DType.IsFloat() {
				if v, err := sf.ReadFloat32(name); err != nil || len(v) != info.NumElements() {
					t.Fatalf("ReadFloat32(%q): %d values, %v", name, len(v), err)
				}
			}
			tensors = append(tensors, Tensor{Name: name, DType: info.DType, Shape: info.Shape, Data: raw})
		}
		// Anything that opens must survive a rewrite with the same content.
		var buf bytes.Buffer
		if err := Write(&buf, tensors, sf.Metadata); err != nil {
			t.Fatalf("rewriting an opened file: %v", err)
		}
		again, err := NewFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "rewrite")
		if err != nil {
			t.Fatalf("reopening the rewrite: %v", err)
		}
		if len(again.Names()) != len(tensors) || len(again.Metadata) != len(sf.Metadata) {
			t.Fatalf("rewrite lost tensors or metadata")
		}
	})
}
