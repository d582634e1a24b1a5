package engine_test

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"logitscope/internal/engine"
	"logitscope/internal/engine/ggufmodeltest"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native/nativetest"
	"logitscope/internal/model/ggufmodel"
	"logitscope/internal/model/synth"
	"logitscope/internal/model/synth/synthtest"
	"logitscope/internal/peer/llamacpp"
	"logitscope/internal/run/session"
)

// On GGUF files the GPU matches the CPU engine as on logitscope's own
// variants: logitscope's q4 and q8 exports (Llama 3's interleaved q/k rows
// put back by the matmul, a mixture's stacked experts), and llama.cpp's
// own K-quant, i-quant and ternary recipes of small-llama3, whose rows are
// whole super-blocks (every type from Q2_K to Q6_K, IQ4_NL, IQ4_XS, IQ3_S
// (IQ3_M), TQ1_0 and TQ2_0, split into 16 KiB pieces; the recipes of 1
// and 2 bits need an importance matrix, so the matmul tests cover those).
func TestGGUFMatchesCPU(t *testing.T) {
	dev := nativetest.Device(t)
	type file struct{ preset, scheme, ftype string }
	cases := []file{{"tiny-llama3", "q4", ""}, {"tiny-qwen3-moe", "q8", ""}, {"tiny", "f32", ""}}
	for _, ftype := range []string{"Q4_1", "Q5_1", "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K",
		"IQ4_NL", "IQ4_XS", "IQ3_M", "TQ1_0", "TQ2_0"} {
		cases = append(cases, file{"small-llama3", "f32", ftype})
	}
	for _, c := range cases {
		t.Run(c.preset+"/"+c.scheme+c.ftype, func(t *testing.T) {
			ck, path := ggufOf(t, c.preset, c.scheme)
			if c.ftype != "" {
				q := filepath.Join(t.TempDir(), c.ftype+".gguf")
				llamacpp.Harness(t).QuantizeModel(t, path, q, c.ftype)
				path = q
			}
			w, err := engine.OpenGGUF(ck, path)
			if err != nil {
				t.Fatal(err)
			}
			var e [2]engine.Engine
			for i, d := range []gpu.Device{nil, dev} {
				if e[i], err = engine.Open(ck, engine.Options{GGUF: w, Device: d, Capacity: 64, MaxPieceBytes: 16 << 10}); err != nil {
					t.Fatal(err)
				}
				defer e[i].Close()
			}
			ids := probeIDs(40)
			want, err := session.Forward(e[0], ids, true)
			if err != nil {
				t.Fatal(err)
			}
			got, err := session.Forward(e[1], ids, true)
			if err != nil {
				t.Fatal(err)
			}
			worst, rel, err := gpuError(want, got, e[0].Vocab())
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s (%s): max |GPU − CPU| %.2e logits (%.2e of the row's largest)", filepath.Base(path), w.TypeMix(), worst, rel)
			if rel > ForwardTolerance {
				t.Fatalf("GPU logits differ from the CPU engine's by %g (relative %g)", worst, rel)
			}
		})
	}
}

// ggufOf writes preset (seed 3) and exports it, or its variant of scheme,
// as GGUF.
func ggufOf(t *testing.T, preset, scheme string) (*checkpoint.Checkpoint, string) {
	t.Helper()
	ck := synthtest.Checkpoint(t, synth.Presets[preset], 3)
	return ck, ggufmodeltest.Export(t, ck.Dir, scheme, preset+"-"+scheme+".gguf")
}

// A model opened from a GGUF file (ggufmodel.OpenModel) runs the file's
// weights by default: engine.Open with no variant gives, bit for bit, the
// logits of the same file run as a variant of the checkpoint it was
// exported from (Llama 3's interleaved rows and rope_freqs, a mixture's
// stacked experts).
func TestGGUFModelRunsItsFile(t *testing.T) {
	t.Setenv("LOGITSCOPE_CACHE", t.TempDir())
	for _, c := range []struct{ preset, scheme string }{{"tiny-llama3", "q4"}, {"tiny-qwen2-moe", "q8"}} {
		t.Run(c.preset, func(t *testing.T) {
			ck, path := ggufOf(t, c.preset, c.scheme)
			m, err := ggufmodel.OpenModel(path)
			if err != nil {
				t.Fatal(err)
			}
			w, err := engine.OpenGGUF(ck, path)
			if err != nil {
				t.Fatal(err)
			}
			ids := []int{3, 141, 59, 26, 5, 358, 97, 93, 238, 46}
			var rows [2][][]float32
			for i, open := range []func() (engine.Engine, error){
				func() (engine.Engine, error) { return engine.Open(m, engine.Options{Capacity: 16}) },
				func() (engine.Engine, error) { return engine.Open(ck, engine.Options{GGUF: w, Capacity: 16}) },
			} {
				e, err := open()
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				if rows[i], err = session.Forward(e, ids, true); err != nil {
					t.Fatal(err)
				}
			}
			for r := range rows[0] {
				if !slices.Equal(rows[0][r], rows[1][r]) {
					t.Fatalf("row %d: the GGUF model's logits differ from its file's as a variant", r)
				}
			}
		})
	}
}

// On the CPU a GGUF export computes the very logits of the weights it
// was exported from: q4 as Q4_0 and q8 as Q8_0 hold the same values, the
// checkpoint's bf16 as F32 too, and Llama's q/k rows, interleaved in the
// file, are put back in order when loaded.
func TestGGUFExportSameOnCPU(t *testing.T) {
	for _, c := range []struct{ preset, scheme string }{
		{"tiny-llama3", "q4"}, {"tiny-llama3", "q8"}, {"tiny-llama3", "f32"}, {"tiny-qwen3-moe", "q4"},
	} {
		t.Run(c.preset+"/"+c.scheme, func(t *testing.T) {
			ck, path := ggufOf(t, c.preset, c.scheme)
			v, err := engine.OpenVariant(ck, c.scheme)
			if err != nil {
				t.Fatal(err)
			}
			w, err := engine.OpenGGUF(ck, path)
			if err != nil {
				t.Fatal(err)
			}
			ids := probeIDs(40)
			var rows [2][][]float32
			for i, opt := range []engine.Options{{Variant: v}, {GGUF: w}} {
				opt.Capacity = len(ids)
				e, err := engine.Open(ck, opt)
				if err != nil {
					t.Fatal(err)
				}
				defer e.Close()
				if rows[i], err = session.Forward(e, ids, true); err != nil {
					t.Fatal(err)
				}
			}
			for i := range rows[0] {
				for j, want := range rows[0][i] {
					if got := rows[1][i][j]; math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("row %d, logit %d: %g from %s, %g from the weights it was exported from", i, j, got, filepath.Base(path), want)
					}
				}
			}
		})
	}
}
