package onnxmodel_test

import (
	"io"
	"strings"
	"testing"

	"logitscope/internal/model/onnxmodel"
)

// TestExportRefuses checks that what the graph does not compute is
// refused by name, not exported wrong.
func TestExportRefuses(t *testing.T) {
	for _, c := range []struct {
		preset, scheme string
		maxLen         int
		want           string
	}{
		{"tiny-qwen3", "f32", 64, "architectures Qwen3ForCausalLM: only Qwen2ForCausalLM and LlamaForCausalLM"},
		{"tiny", "q8", 64, "are q8: only q4 (and float32) matrices export"},
		{"tiny", "f32", 0, "maxLen 0: want 1..4096"},
		{"tiny", "f32", 5000, "maxLen 5000: want 1..4096"},
	} {
		t.Run(c.preset+"/"+c.scheme, func(t *testing.T) {
			ck, v := open(t, c.preset, c.scheme)
			err := onnxmodel.Export(io.Discard, ck, v, c.maxLen)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to say %q", err, c.want)
			}
		})
	}
}
