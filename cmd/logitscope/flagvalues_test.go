package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

func conformCmdOf(args []string, out, errb *bytes.Buffer) error {
	return conformCommand(args, out, errb)
}

// Every flag that takes one of a set of values refuses a value outside
// it, naming the flag (or what it sets) and the values it takes, before
// anything runs.
func TestFlagValuesRefused(t *testing.T) {
	dir := t.TempDir()
	dump := filepath.Join(dir, "x.dump")
	gguf := filepath.Join(dir, "x.gguf")
	// sensitivity and recipe write variants into the model: a copy of
	// its own, so that the shared tiny model stays as written.
	model := copyModel(t)
	for _, c := range []struct {
		name string
		cmd  func([]string, *bytes.Buffer, *bytes.Buffer) error
		args []string
		want []string
	}{
		{"capture --runtime", captureCmd, []string{"--model", tiny(t), "--runtime", "banana", "--dump-logits", dump, "Hi"}, []string{`--runtime "banana"`, "native, wasm, llama.cpp"}},
		{"capture --device", captureCmd, []string{"--model", tiny(t), "--device", "tpu", "--runtime", "native", "--dump-logits", dump, "Hi"}, []string{`--device "tpu"`, "gpu, cpu or auto"}},
		{"capture --activations", captureCmd, []string{"--model", tiny(t), "--activations", "q4", "--dump-logits", dump, "Hi"}, []string{`activations "q4"`, "f32", "q8"}},
		{"capture --llama-flash-attn", captureCmd, []string{"--model", tiny(t), "--variant", gguf, "--runtime", "llama.cpp", "--llama-flash-attn", "yes", "--dump-logits", dump, "Hi"}, []string{`flash attention "yes"`, "auto, on, off"}},
		{"conform --runtime", conformCmdOf, []string{"--suite", "x.json", "--runtime", "banana"}, []string{`--runtime "banana"`, "wasm", "native"}},
		{"mkmodel --preset", mkmodelCmd, []string{"--preset", "banana", "--out", dir}, []string{"banana", "tiny"}},
		{"quantize --scheme", quantizeCmd, []string{"--model", tiny(t), "--scheme", "q5"}, []string{"q5", "q8"}},
		{"sensitivity --scheme", sensitivityCmd, []string{"--model", model, "--panel", "../../internal/model/synth/corpus.txt", "--scheme", "q5"}, []string{"q5", "q8"}},
		{"sensitivity --unit", sensitivityCmd, []string{"--model", model, "--panel", "../../internal/model/synth/corpus.txt", "--scheme", "q4", "--unit", "row"}, []string{"row", "tensor", "layer", "kind"}},
		{"sensitivity --device", sensitivityCmd, []string{"--model", model, "--panel", "../../internal/model/synth/corpus.txt", "--scheme", "q4", "--device", "tpu"}, []string{"tpu", "cpu", "gpu"}},
		{"sensitivity --activations", sensitivityCmd, []string{"--model", model, "--panel", "../../internal/model/synth/corpus.txt", "--scheme", "q4", "--activations", "q4"}, []string{`"q4"`, "f32", "q8"}},
		{"recipe --unit", recipeCmd, []string{"--model", model, "--panel", "../../internal/model/synth/corpus.txt", "--unit", "row", "--target-size", "1MB"}, []string{"row", "tensor", "layer", "kind"}},
		{"recipe --schemes", recipeCmd, []string{"--model", model, "--panel", "../../internal/model/synth/corpus.txt", "--schemes", "q8,q5", "--target-size", "1MB"}, []string{"q5", "q8"}},
		{"recipe --activations", recipeCmd, []string{"--model", model, "--panel", "../../internal/model/synth/corpus.txt", "--activations", "q4", "--target-size", "1MB"}, []string{`"q4"`, "f32", "q8"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := run(t, c.cmd, c.args...)
			if err == nil {
				t.Fatalf("%v: accepted", c.args)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v: %v\nwant %q in it", c.args, err, w)
				}
			}
		})
	}
}

// wasmOnly is engine for --runtime wasm and nothing for another runtime,
// which refuses --engine rather than ignore it.
func wasmOnly(runtime, engine string) string {
	if runtime == "wasm" {
		return engine
	}
	return ""
}
