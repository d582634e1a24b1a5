package safetensors

import (
	"bytes"
	"encoding/binary"
	"flag"
	"os"
	"slices"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.safetensors from the hand-built bytes")

const goldenPath = "testdata/golden.safetensors"

// goldenBytes builds the expected golden file by hand, independently of
// Write: keys sorted, compact JSON, spaces up to a multiple of 8.
func goldenBytes() []byte {
	header := `{"__metadata__":{"format":"pt","note":"<tiny & odd>"},` +
		`"a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]},` +
		`"b":{"data_offsets":[8,16],"dtype":"BF16","shape":[2,2]},` +
		`"c":{"data_offsets":[16,19],"dtype":"I8","shape":[3]}}`
	for len(header)%8 != 0 {
		header += " "
	}
	data := []byte{
		0x00, 0x00, 0x80, 0x3f, // a[0] = 1.0
		0x00, 0x00, 0x20, 0xc0, // a[1] = -2.5
		0x80, 0x3f, // b[0] = 1.0
		0x00, 0x3f, // b[1] = 0.5
		0x80, 0xbf, // b[2] = -1.0
		0x80, 0x7f, // b[3] = +Inf
		0x01, 0xff, 0x7f, // c = 1, -1, 127
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	out = append(out, header...)
	return append(out, data...)
}

func goldenTensors() ([]Tensor, map[string]string) {
	return []Tensor{
			// Deliberately out of order: Write must sort.
			{Name: "c", DType: I8, Shape: []int{3}, Data: []byte{0x01, 0xff, 0x7f}},
			{Name: "a", DType: F32, Shape: []int{2}, Data: EncodeF32([]float32{1, -2.5})},
			{Name: "b", DType: BF16, Shape: []int{2, 2}, Data: EncodeBF16([]float32{1, 0.5, -1, float32(posInf())})},
		},
		map[string]string{"format": "pt", "note": "<tiny & odd>"}
}

func TestGolden(t *testing.T) {
	want := goldenBytes()
	if *update {
		if err := os.WriteFile(goldenPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s differs from the hand-built bytes (run with -update?)\n got %q\nwant %q", goldenPath, got, want)
	}

	var buf bytes.Buffer
	tensors, meta := goldenTensors()
	if err := Write(&buf, tensors, meta); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("Write output differs from golden\n got %q\nwant %q", buf.Bytes(), want)
	}

	f, err := Open(goldenPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got := f.Names(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("Names = %v", got)
	}
	if f.Metadata["note"] != "<tiny & odd>" || len(f.Metadata) != 2 {
		t.Errorf("Metadata = %v", f.Metadata)
	}
	info, _ := f.Info("b")
	dataStart := int64(len(want) - 19)
	if info.Offset != dataStart+8 || info.Length != 8 || !slices.Equal(info.Shape, []int{2, 2}) {
		t.Errorf("Info(b) = %+v, data starts at %d", info, dataStart)
	}
	b, err := f.ReadFloat32("b")
	if err != nil || !slices.Equal(b, []float32{1, 0.5, -1, float32(posInf())}) {
		t.Errorf("ReadFloat32(b) = %v, %v", b, err)
	}
	c, err := f.ReadRaw("c")
	if err != nil || !bytes.Equal(c, []byte{1, 0xff, 0x7f}) {
		t.Errorf("ReadRaw(c) = %v, %v", c, err)
	}
}
