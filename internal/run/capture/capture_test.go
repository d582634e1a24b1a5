package capture

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/engine/ggufmodeltest"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/receipt"
	"logitscope/internal/format/routing"
	"logitscope/internal/model/synth"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/internal/run/session"
)

// tinyQ4 writes the tiny preset with its q4 variant.
func tinyQ4(t *testing.T) *checkpoint.Checkpoint {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(synth.Presets["tiny"], dir, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	if _, err := variant.Ensure(ck, quant.Q4, nil); err != nil {
		t.Fatal(err)
	}
	return ck
}

// A native CPU capture saves a dump whose receipt verifies against it and
// records the variant's seal, the device and the request.
func TestRunAndSave(t *testing.T) {
	ck := tinyQ4(t)
	req := session.Request{Mode: session.Panel, Windows: [][]int{{1, 2, 3, 4}, {5, 6, 7}}}
	c, err := Run(ck, "q4", req, Options{Device: "cpu", Runtime: "native"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Rows) != 5 || c.Device != "cpu" || c.Variant != "q4" || c.Manifest == "" || len(c.Targets) != 5 {
		t.Fatalf("capture: %d rows, device %q, variant %q, manifest %q, targets %v", len(c.Rows), c.Device, c.Variant, c.Manifest, c.Targets)
	}
	path := filepath.Join(t.TempDir(), "q4.dump")
	rc, err := Save(path, ck, ReceiptRequest(req, ""), c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := receipt.Read(receipt.Path(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := got.CheckDump(path); err != nil {
		t.Fatal(err)
	}
	if got.Seal != rc.Seal || got.VariantManifest != c.Manifest || got.Request.Windows != 2 || got.Dump.Rows != 5 {
		t.Fatalf("receipt %+v", got)
	}
}

// A mixture of experts' capture keeps each row's routes beside its
// logits, labelled by the model's layout, and a safetensors dump saves
// them; the receipt describes that file like any dump.
func TestRunAndSaveRoutes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "moe")
	if err := synth.Write(synth.Presets["tiny-qwen2-moe"], dir, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for _, req := range []session.Request{
		{Mode: session.Panel, Windows: [][]int{{1, 2, 3, 4}, {5, 6, 7}}},
		{Mode: session.Greedy, PromptIDs: []int{1, 2, 3}, MaxNew: 4, Stops: []int{}},
	} {
		c, err := Run(ck, "f32", req, Options{Device: "cpu", Runtime: "native"})
		if err != nil {
			t.Fatal(err)
		}
		// tiny-qwen2-moe: layer 0 dense, layer 1 routes 3 of 6 experts.
		want := routing.Layout{Layers: []int{1}, TopK: 3, Experts: 6}
		if !reflect.DeepEqual(c.Routing, want) || len(c.Routes) != len(c.Rows) || len(c.Rows) == 0 {
			t.Fatalf("%s: layout %+v, %d routes for %d rows", req.Mode, c.Routing, len(c.Routes), len(c.Rows))
		}
		for i, row := range c.Rows {
			if len(row) != ck.Config.VocabSize || len(c.Routes[i]) != 3 {
				t.Fatalf("%s: row %d has %d logits and %d routes", req.Mode, i, len(row), len(c.Routes[i]))
			}
		}
		path := filepath.Join(t.TempDir(), "moe.safetensors")
		if _, err := Save(path, ck, ReceiptRequest(req, ""), c); err != nil {
			t.Fatal(err)
		}
		got, _, err := dump.ReadAny(path)
		if err != nil {
			t.Fatal(err)
		}
		if want := c.Logits(ck.Config.VocabSize); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: read back %+v, saved %+v", req.Mode, got.Routes, want.Routes)
		}
		rc, err := receipt.Read(receipt.Path(path))
		if err != nil {
			t.Fatal(err)
		}
		if err := rc.CheckDump(path); err != nil || rc.Dump.Rows != len(c.Rows) {
			t.Fatalf("%s: receipt %+v: %v", req.Mode, rc.Dump, err)
		}
	}
}

// What cannot run is refused before anything loads, naming the problem.
func TestRunErrors(t *testing.T) {
	ck := tinyQ4(t)
	greedy := session.Request{Mode: session.Greedy, PromptIDs: []int{1, 2}, MaxNew: 2}
	inside := ggufmodeltest.Export(t, ck.Dir, "q4", "q4.gguf")
	outside := filepath.Join(t.TempDir(), "q4.gguf")
	if err := os.Link(inside, outside); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		variant string
		opt     Options
		want    string
	}{
		{"q8", Options{Device: "cpu", Runtime: "native"}, "no variant at " + filepath.Join(ck.Dir, "variants", "q8") + ": run logitscope quantize --model " + ck.Dir + " --scheme q8"},
		// A mistyped scheme is named as one; no quantize command would
		// make it.
		{"q5", Options{Device: "cpu", Runtime: "native"}, "--variant q5: no such scheme or variant directory (schemes: f32, q8, q6, q4, exl3-kK[-CODEBOOK];"},
		{"f32", Options{Device: "tpu", Runtime: "native"}, `--device "tpu"`},
		{"f32", Options{Device: "cpu", Runtime: "js"}, `--runtime "js"`},
		{"f32", Options{Device: "cpu", Runtime: "wasm", Engine: filepath.Join(t.TempDir(), "none.wasm")}, "make wasm"},
		{variant.DefaultDir(ck.Dir, "q4"), Options{Device: "cpu", Runtime: "wasm", Engine: "x"}, "none"},
		{outside, Options{Device: "cpu", Runtime: "wasm", Engine: "x"}, "--runtime wasm: " + outside + ": a GGUF file outside MODEL"},
		{inside, Options{Device: "cpu", Runtime: "wasm", Engine: "x"}, "none"},
		{filepath.Join(ck.Dir, "variants", "q4"), Options{Device: "cpu", Runtime: "wasm", Engine: "x"}, "none"},
		{filepath.Join(t.TempDir(), "variants", "q4"), Options{Device: "cpu", Runtime: "wasm", Engine: "x"}, "no variant at"},
	} {
		_, err := Run(ck, c.variant, greedy, c.opt)
		if c.want == "none" {
			// The model's own variant named by its path, and a GGUF inside
			// the model directory, are ones engine.wasm sees: the capture
			// gets as far as reading engine.wasm.
			if err == nil || strings.Contains(err.Error(), "outside MODEL") || !strings.Contains(err.Error(), "make wasm") {
				t.Errorf("%s: %v", c.variant, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: %v, want %q", c.variant, c.opt, err, c.want)
		}
	}
}

func ExampleVariantLabel() {
	for _, name := range []string{"", "f32", "q4", "/data/models/qwen/variants/q4-lite"} {
		fmt.Println(VariantLabel(name))
	}
	// Output:
	// f32
	// f32
	// q4
	// q4-lite
}

func ExampleReceiptRequest() {
	fmt.Printf("%+v\n", ReceiptRequest(session.Request{Mode: session.Forced, PromptIDs: []int{1, 2}, Outputs: []int{3}, MaxNew: 9}, "ab12"))
	// Output: {Mode:forced PromptIDs:[1 2] Prompt: MaxNew:0 Stops:[] Panel: Windows:0 Prefix:[] Follow:ab12 PanelReceipt:}
}

// A windowed panel runs, and shows progress for, only the windows it does
// not omit (a shard's, a resumed capture's unfinished ones).
func TestWindowedTokens(t *testing.T) {
	req := session.Request{Mode: session.Panel, Windows: [][]int{{1, 2}, {3, 4, 5}, {6, 7, 8, 9}}}
	window := func(int, session.Result) error { return nil }
	for _, c := range []struct {
		name    string
		opt     Options
		windows []int
		tokens  int
	}{
		{"whole", Options{}, []int{0, 1, 2}, 9},
		{"windowed", Options{Window: window}, []int{0, 1, 2}, 9},
		{"omitting the middle", Options{Window: window, Omit: func(i int) bool { return i == 1 }}, []int{0, 2}, 6},
	} {
		if got := c.opt.tokens(req); got != c.tokens {
			t.Errorf("%s: %d tokens, want %d", c.name, got, c.tokens)
		}
		if c.opt.windowed(req) {
			if got := c.opt.windows(req); !slices.Equal(got, c.windows) {
				t.Errorf("%s: windows %v, want %v", c.name, got, c.windows)
			}
		}
	}
}
