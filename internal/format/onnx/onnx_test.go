package onnx_test

import (
	"bytes"
	"encoding/hex"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/format/onnx"
)

var update = flag.Bool("update", false, "rewrite testdata/*.onnx")

// addModel is y = x + c over a (1, n) input, with an attribute of each
// kind on a contrib-domain node, so that the golden file exercises every
// field Marshal writes.
func addModel() onnx.Model {
	return onnx.Model{
		Producer: "logitscope",
		Opsets:   []onnx.Opset{{Domain: "", Version: 17}, {Domain: "com.microsoft", Version: 1}},
		Graph: onnx.Graph{
			Name: "add",
			Nodes: []onnx.Node{
				{Op: "Add", Name: "add", Inputs: []string{"x", "c"}, Outputs: []string{"sum"}},
				{Op: "Identity", Domain: "com.example", Name: "y", Inputs: []string{"sum", ""}, Outputs: []string{"y"},
					Attrs: []onnx.Attr{onnx.Int("k", -1), onnx.Ints("perm", 0, 2, 1), onnx.FloatAttr("eps", 1e-6)}},
			},
			Initializers: []onnx.Tensor{{Name: "c", Type: onnx.Float, Dims: []int64{1}, Raw: []byte{0, 0, 0x80, 0x3f}}},
			Inputs:       []onnx.Value{{Name: "x", Type: onnx.Float, Dims: []int64{1, 0}, Params: []string{"", "n"}}},
			Output:       []onnx.Value{{Name: "y", Type: onnx.Float, Dims: []int64{1, 0}, Params: []string{"", "n"}}},
		},
	}
}

// TestMarshalGolden checks the bytes against testdata/add.onnx, whose
// fields were checked by hand against onnx.proto's numbers (the hex dump
// below spells the first ones out); onnxmodel's test checks that
// onnxruntime loads and runs what Marshal writes.
func TestMarshalGolden(t *testing.T) {
	got, err := onnx.Marshal(addModel())
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "add.onnx")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Marshal differs from %s:\ngot  %x\nwant %x", golden, got, want)
	}
	// ir_version (field 1, varint) 8; producer_name (field 2, bytes) "logitscope".
	if h := hex.EncodeToString(got[:14]); h != "0808"+"120a"+hex.EncodeToString([]byte("logitscope")) {
		t.Fatalf("the header is %s", h)
	}
}

func TestMarshalTooLarge(t *testing.T) {
	m := addModel()
	big := make([]byte, 1<<30)
	m.Graph.Initializers = []onnx.Tensor{{Name: "a", Raw: big}, {Name: "b", Raw: big}}
	_, err := onnx.Marshal(m)
	if err == nil || !strings.Contains(err.Error(), `graph "add"`) || !strings.Contains(err.Error(), "2 GiB") {
		t.Fatalf("err = %v, want the 2 GiB limit named with the graph", err)
	}
}

// TestReadMeta reads back what Marshal wrote, and refuses what is not an
// ONNX model with the file and offset named.
func TestReadMeta(t *testing.T) {
	m := addModel()
	m.Metadata = []onnx.Prop{{Key: "logitscope.vocab", Value: "32"}, {Key: "logitscope.variant", Value: "q4"}}
	good, err := onnx.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := onnx.Marshal(addModel())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		data  []byte
		props map[string]string
		err   string
	}{
		{"with metadata", good, map[string]string{"logitscope.vocab": "32", "logitscope.variant": "q4"}, ""},
		{"without", plain, map[string]string{}, ""},
		{"truncated", good[:len(good)-3], nil, "past the file's end"},
		{"text", []byte("this is not a model at all\n"), nil, "x.onnx: offset"},
		{"empty", nil, map[string]string{}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := onnx.ReadMeta(bytes.NewReader(c.data), int64(len(c.data)), "x.onnx")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(c.data) > 0 && got.Producer != "logitscope" {
				t.Errorf("producer %q", got.Producer)
			}
			if !maps.Equal(got.Props, c.props) {
				t.Errorf("props %v, want %v", got.Props, c.props)
			}
		})
	}
}

func FuzzReadMeta(f *testing.F) {
	m := addModel()
	m.Metadata = []onnx.Prop{{Key: "k", Value: "v"}}
	good, _ := onnx.Marshal(m)
	f.Add(good)
	f.Add([]byte{0x72, 0x03, 0x0a, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		// Never panics or allocates past the data: every length is checked
		// against what is left.
		onnx.ReadMeta(bytes.NewReader(data), int64(len(data)), "fuzz.onnx")
	})
}
