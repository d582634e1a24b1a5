package demo

import (
	"encoding/json"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/dump"
	"logitscope/internal/text/tokenizer"
)

// The Go engine's logits on the trained model equal PyTorch's: the
// reference that demo/train/train.py computed with its own Llama (the
// bf16 weights as written, in float32) at every position of the prompt.
// An independent implementation agreeing to 1e-3 says the engine reads
// the checkpoint with the semantics it was trained under (RMSNorm eps,
// RoPE, GQA, the tied head), and the script's model is transformers' Llama.
func TestMatchesPyTorch(t *testing.T) {
	var ref struct {
		IDs  []int  `json:"ids"`
		Dump string `json:"dump"`
	}
	b, err := os.ReadFile("testdata/reference.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatalf("testdata/reference.json: %v", err)
	}
	want, err := dump.ReadFile(filepath.Join("testdata", ref.Dump))
	if err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open("model")
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	e, err := engine.Open(ck, engine.Options{Capacity: len(ref.IDs)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	region, err := e.Submit(ref.IDs, engine.All)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := e.Read(region)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != want.Rows || e.Vocab() != want.Vocab {
		t.Fatalf("engine: %d rows × %d vocab, reference %d × %d", len(rows), e.Vocab(), want.Rows, want.Vocab)
	}
	worst, at := 0.0, 0
	for i, row := range rows {
		for j, v := range row {
			if d := math.Abs(float64(v - want.Data[i*want.Vocab+j])); d > worst {
				worst, at = d, i
			}
		}
	}
	t.Logf("max |Δlogit| %.2g (row %d) over %d rows", worst, at, len(rows))
	if worst > 1e-3 {
		t.Errorf("the engine's logits differ from PyTorch's by %.3g at row %d (tolerance 1e-3)", worst, at)
	}
}

// The sidecar says what the page needs to present the model: exactly the
// four keys the server passes on, a prompt that the model's tokenizer
// reads and a panel long enough for a teacher-forced run.
func TestSidecar(t *testing.T) {
	b, err := fs.ReadFile(Files(), "logitscope.json")
	if err != nil {
		t.Fatal(err)
	}
	var side map[string]string
	if err := json.Unmarshal(b, &side); err != nil {
		t.Fatalf("logitscope.json: %v", err)
	}
	keys := make([]string, 0, len(side))
	for k := range side {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"about", "nature", "panel", "prompt"}; !reflect.DeepEqual(keys, want) {
		t.Fatalf("logitscope.json keys %v, want %v", keys, want)
	}
	if side["nature"] != "trained-demo" || !strings.Contains(side["about"], "demo/train/train.py") {
		t.Errorf("logitscope.json: nature %q, about %q", side["nature"], side["about"])
	}
	tok, err := tokenizer.Load(filepath.Join("model", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(tok.Encode(side["prompt"])); n < 3 || n > 32 {
		t.Errorf("prompt %q is %d tokens, want a sentence's start", side["prompt"], n)
	}
	if n := len(tok.Encode(side["panel"])); n < 64 {
		t.Errorf("panel is %d tokens, too short for a teacher-forced panel", n)
	}
}

// Dir writes the embedded files once, byte for byte, into a folder named
// by their digest, and a second call finds them there.
func TestDir(t *testing.T) {
	t.Setenv("LOGITSCOPE_CACHE", t.TempDir())
	dir, err := Dir()
	if err != nil {
		t.Fatal(err)
	}
	err = fs.WalkDir(Files(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		want, _ := fs.ReadFile(Files(), path)
		got, err := os.ReadFile(filepath.Join(dir, path))
		if err != nil || string(got) != string(want) {
			t.Errorf("%s: not the embedded file (%v)", path, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	again, err := Dir()
	if err != nil || again != dir {
		t.Errorf("second Dir: %q, %v; first %q", again, err, dir)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck.Close()
}
