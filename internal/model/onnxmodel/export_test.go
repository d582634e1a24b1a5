package onnxmodel_test

import (
	"io"
	"os"
	"path/filepath"
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

// TestMeta exports the tiny preset (float32 and q4) and reads back what
// the file says of itself, which Fits checks against the checkpoint's
// config and fingerprint, and against another model's.
func TestMeta(t *testing.T) {
	for _, scheme := range []string{"f32", "q4"} {
		t.Run(scheme, func(t *testing.T) {
			ck, v := open(t, "tiny", scheme)
			path := filepath.Join(t.TempDir(), "m.onnx")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := onnxmodel.Export(f, ck, v, 48); err != nil {
				t.Fatal(err)
			}
			f.Close()
			m, err := onnxmodel.ReadMeta(path)
			if err != nil {
				t.Fatal(err)
			}
			fp, err := ck.Fingerprint()
			if err != nil {
				t.Fatal(err)
			}
			want := onnxmodel.Meta{Arch: ck.Config.Arch(), Vocab: ck.Config.VocabSize, Layers: ck.Config.NumHiddenLayers,
				Dim: ck.Config.HiddenSize, MaxLen: 48, Variant: scheme, Model: fp}
			if v != nil {
				want.Manifest = v.Manifest.Seal
			}
			if m != want {
				t.Fatalf("meta %+v, want %+v", m, want)
			}
			if err := m.Fits(ck.Config, fp); err != nil {
				t.Errorf("Fits its own checkpoint: %v", err)
			}
			other := ck.Config
			other.VocabSize++
			if err := m.Fits(other, ""); err == nil || !strings.Contains(err.Error(), "vocabulary") {
				t.Errorf("Fits a config with another vocabulary: %v", err)
			}
			if err := m.Fits(ck.Config, strings.Repeat("0", 64)); err == nil || !strings.Contains(err.Error(), "export it again") {
				t.Errorf("Fits another fingerprint: %v", err)
			}
		})
	}
	// A file that is not an export of logitscope's is refused by name.
	bad := filepath.Join(t.TempDir(), "other.onnx")
	os.WriteFile(bad, []byte{0x12, 0x03, 'x', 'y', 'z'}, 0o644)
	if _, err := onnxmodel.ReadMeta(bad); err == nil || !strings.Contains(err.Error(), "other.onnx: producer \"xyz\"") {
		t.Errorf("ReadMeta of another producer's file: %v", err)
	}
}
