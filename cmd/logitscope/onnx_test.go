package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/model/onnxmodel"
)

// export --onnx writes onnxmodel.Export's graph of the variant for
// --onnx-len tokens (onnxmodel's test runs such a file on
// onnxruntime-web), and refuses what it cannot write before writing.
func TestExportONNX(t *testing.T) {
	dir := quantized(t)
	out := filepath.Join(t.TempDir(), "q4.onnx")
	msg, err := run(t, exportCmd, "--model", dir, "--variant", "q4", "--onnx", out, "--onnx-len", "64")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "wrote "+out+" (q4, inputs up to 64 tokens)") {
		t.Errorf("export said %q", msg)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	v, err := engine.OpenVariant(ck, "q4")
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := onnxmodel.Export(&want, ck, v, 64); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("%s is not onnxmodel.Export's graph of q4 for 64 tokens (%v)", out, err)
	}

	bad := filepath.Join(t.TempDir(), "bad.onnx")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--gguf", filepath.Join(t.TempDir(), "x.gguf")}, "--onnx writes an ONNX graph: not with --gguf"},
		{[]string{"--variant", "q8"}, "are q8: only q4 (and float32) matrices export to ONNX"},
		{[]string{"--onnx-len", "0"}, "maxLen 0: want 1..4096"},
	} {
		_, err := run(t, exportCmd, append(c.args, "--model", dir, "--onnx", bad)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want %q", c.args, err, c.want)
		}
		if _, err := os.Stat(bad); err == nil {
			t.Errorf("%v: %s written", c.args, bad)
		}
	}
}
