package ggufmodel_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"logitscope/checkpoint"
	"logitscope/engine"
	"logitscope/ggml"
	"logitscope/gguf"
	"logitscope/ggufmodel"
	"logitscope/llamacpp"
	"logitscope/model"
	"logitscope/quant"
	"logitscope/session"
	"logitscope/synth"
	"logitscope/tokenizer"
	"logitscope/variant"
)

// panelIDs is the first n tokens of the synthetic corpus.
func panelIDs(t testing.TB, ck *checkpoint.Checkpoint, n int) []int {
	t.Helper()
	tok, err := tokenizer.Load(ck.TokenizerPath())
	if err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile("../synth/corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	return tok.Encode(string(text))[:n]
}

// logitscopeRows runs ids teacher-forced through the CPU engine on the
// GGUF at path: row i predicts ids[i+1].
func logitscopeRows(t testing.TB, ck *checkpoint.Checkpoint, path string, ids []int) [][]float32 {
	t.Helper()
	w, err := engine.OpenGGUF(ck, path)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(ck, engine.Options{GGUF: w, Capacity: len(ids)})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	res, err := session.Drive(e, session.Request{Mode: session.Panel, Windows: [][]int{ids}})
	if err != nil {
		t.Fatal(err)
	}
	return res.Rows
}

// agreement compares rows (logitscope's) with llama.cpp's on the same
// positions: the largest difference relative to the row's largest |logit|,
// and how many rows pick another argmax.
func agreement(ours, theirs [][]float32) (maxRel float64, flips int) {
	for i, a := range ours {
		b := theirs[i]
		var top, diff float64
		for j := range a {
			top = max(top, math.Abs(float64(a[j])))
			diff = max(diff, math.Abs(float64(a[j])-float64(b[j])))
		}
		maxRel = max(maxRel, diff/top)
		if session.Argmax(a) != session.Argmax(b) {
			flips++
		}
	}
	return maxRel, flips
}

// llama.cpp loads what Export writes and computes the same logits from it:
// the f32 export of Qwen2-, Qwen3- and Llama-3-shaped models (its
// interleaved q/k rows, its rope_freqs) within float32 rounding, teacher
// forced with an f32 KV cache. The quantized exports are compared in
// TestLlamaCppQuants, with the rest of llama.cpp's quantized arithmetic.
func TestExportRunsInLlamaCpp(t *testing.T) {
	h := llamacpp.Harness(t)
	for _, preset := range []string{"tiny", "tiny-qwen3", "tiny-llama3"} {
		t.Run(preset, func(t *testing.T) {
			ck := checkpointOf(t, preset)
			path := exportFile(t, ck, "f32")
			ids := panelIDs(t, ck, 48)
			ours := logitscopeRows(t, ck, path, ids)
			theirs := h.Logits(t, path, ids, llamacpp.LogitsOptions{F32KV: true})
			rel, flips := agreement(ours, theirs[:len(ours)])
			t.Logf("%d rows: max |Δlogit| / max |logit| %.2g, %d argmax flips", len(ours), rel, flips)
			if rel > 1e-5 || flips > 0 {
				t.Fatalf("llama.cpp's logits differ by %.3g of the largest (%d flips), more than float32 rounding", rel, flips)
			}
		})
	}
}

// On GGUF files llama.cpp quantized itself (from the f32 export) and on
// logitscope's own q8 and q4 exports, logitscope decodes every block as
// ggml does, so its logits equal llama.cpp's on the same values: llama.cpp
// run on a copy of the file with every tensor dequantized to F32 agrees
// within float32 rounding. On the quantized file itself llama.cpp differs
// by more, because its CPU matmuls round the activations to 8-bit blocks
// (Q8_0 / Q8_K) before each dot product with quantized weights: that is
// the residual, and top-1 must agree wherever the margin exceeds it.
func TestLlamaCppQuants(t *testing.T) {
	h := llamacpp.Harness(t)
	// small-llama3's rows are whole 256-weight super-blocks, so every
	// K-quant type occurs; on tiny's 64-wide rows llama.cpp falls back to
	// the 32-weight types.
	for _, c := range []struct {
		preset string
		ftypes []string
	}{
		{"tiny", []string{"Q4_K_M"}},
		{"small-llama3", []string{"Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K_M", "Q4_K_M", "Q5_K_M", "Q6_K"}},
	} {
		preset := c.preset
		ck := checkpointOf(t, preset)
		f32 := exportFile(t, ck, "f32")
		ids := panelIDs(t, ck, 48)
		files := map[string]string{"own q8": exportFile(t, ck, "q8"), "own q4": exportFile(t, ck, "q4")}
		for _, ftype := range c.ftypes {
			files[ftype] = filepath.Join(t.TempDir(), ftype+".gguf")
			h.QuantizeModel(t, f32, files[ftype], ftype)
		}
		for _, name := range append([]string{"own q8", "own q4"}, c.ftypes...) {
			t.Run(preset+"/"+name, func(t *testing.T) {
				path := files[name]
				ours := logitscopeRows(t, ck, path, ids)
				same := h.Logits(t, dequantizedCopy(t, path), ids, llamacpp.LogitsOptions{F32KV: true})
				if rel, flips := agreement(ours, same[:len(ours)]); rel > 1e-5 || flips > 0 {
					t.Fatalf("llama.cpp on the dequantized values differs by %.3g of the largest logit (%d flips)", rel, flips)
				}
				theirs := h.Logits(t, path, ids, llamacpp.LogitsOptions{F32KV: true})
				resid, flips := agreement(ours, theirs[:len(ours)])
				t.Logf("%s: llama.cpp on its quantized arithmetic: max |Δlogit| / max |logit| %.2g, %d argmax flips", typeMix(t, ck, path), resid, flips)
				for i, a := range ours {
					if m := margin(a); session.Argmax(a) != session.Argmax(theirs[i]) && m > 2*maxDiff(a, theirs[i]) {
						t.Errorf("row %d: argmax %d here, %d in llama.cpp, with a margin of %.3g", i, session.Argmax(a), session.Argmax(theirs[i]), m)
					}
				}
			})
		}
	}
}

// exportFile writes ck's scheme ("f32" or a variant it quantizes first) as
// GGUF.
func exportFile(t testing.TB, ck *checkpoint.Checkpoint, scheme string) string {
	t.Helper()
	v, err := engine.OpenVariant(ck, scheme)
	if err != nil && scheme != "f32" {
		if _, qerr := ensure(ck, scheme); qerr != nil {
			t.Fatal(qerr)
		}
		v, err = engine.OpenVariant(ck, scheme)
	}
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), fmt.Sprintf("%s-%s.gguf", filepath.Base(ck.Dir), scheme))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := ggufmodel.Export(f, ck, v); err != nil {
		t.Fatal(err)
	}
	return path
}

func ensure(ck *checkpoint.Checkpoint, scheme string) (string, error) {
	s, err := quant.ParseScheme(scheme)
	if err != nil {
		return "", err
	}
	return variant.Ensure(ck, s, nil)
}

// dequantizedCopy writes path's tensors dequantized to F32 (ggml's own
// values, through ggml.Dequantize) with the same metadata.
func dequantizedCopy(t testing.TB, path string) string {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var tensors []gguf.Tensor
	for _, info := range f.Tensors {
		raw, err := f.ReadTensor(info)
		if err != nil {
			t.Fatal(err)
		}
		n := 1
		for _, d := range info.Dims {
			n *= int(d)
		}
		x := make([]float32, n)
		if err := ggml.Dequantize(info.Type, raw, x); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 4*n)
		for i, v := range x {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		tensors = append(tensors, gguf.Tensor{Name: info.Name, Dims: info.Dims, Type: ggml.F32, Data: b})
	}
	var kv []gguf.KV
	for _, p := range f.KV {
		if p.Key == "general.file_type" {
			p.Value = gguf.Uint32Value(0)
		}
		kv = append(kv, p)
	}
	out := filepath.Join(t.TempDir(), "f32-"+filepath.Base(path))
	o, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if err := gguf.Write(o, kv, tensors, 0); err != nil {
		t.Fatal(err)
	}
	return out
}

// margin is a row's top-1 minus top-2 logit.
func margin(row []float32) float64 {
	a, b := math.Inf(-1), math.Inf(-1)
	for _, v := range row {
		switch x := float64(v); {
		case x > a:
			a, b = x, a
		case x > b:
			b = x
		}
	}
	return a - b
}

func maxDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i])-float64(b[i])))
	}
	return d
}

// typeMix names a file by its type mix, for the log.
func typeMix(t testing.TB, ck *checkpoint.Checkpoint, path string) string {
	g, err := engine.OpenGGUF(ck, path)
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Base(path) + " (" + g.TypeMix() + ")"
}

// checkpointOf writes preset (seed 0) to a temporary directory.
func checkpointOf(t testing.TB, preset string) *checkpoint.Checkpoint {
	t.Helper()
	dir := filepath.Join(t.TempDir(), preset)
	if err := synth.Write(synth.Presets[preset], dir, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return ck
}

// Files llama.cpp's own quantizer wrote (its metadata copied, its file
// type and quantization version added, every matrix requantized) open as
// models by themselves with the geometry of the checkpoint they came
// from: Q8_0 of every exportable preset, and small-llama3's Q4_K_M, whose
// rope_freqs llama.cpp carries over.
func TestOpenModelLlamaCppQuantized(t *testing.T) {
	h := llamacpp.Harness(t)
	t.Setenv("LOGITSCOPE_CACHE", t.TempDir())
	type file struct{ preset, ftype string }
	var files []file
	for _, p := range []string{"tiny", "tiny-qwen3", "tiny-llama3", "tiny-llama-bias", "tiny-qwen3-moe", "tiny-qwen2-moe", "small-llama3"} {
		files = append(files, file{p, "Q8_0"})
	}
	files = append(files, file{"small-llama3", "Q4_K_M"})
	for _, c := range files {
		t.Run(c.preset+"/"+c.ftype, func(t *testing.T) {
			ck := checkpointOf(t, c.preset)
			want, err := model.GeometryOf(ck.Config)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), c.ftype+".gguf")
			h.QuantizeModel(t, exportFile(t, ck, "f32"), path, c.ftype)
			m, err := ggufmodel.OpenModel(path)
			if err != nil {
				t.Fatal(err)
			}
			g, err := model.GeometryOf(m.Config)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, want) {
				t.Fatalf("geometry from llama.cpp's file\n%+v\nthe checkpoint's\n%+v", g, want)
			}
			w, err := engine.OpenGGUF(m, path)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %s", filepath.Base(path), w.TypeMix())
		})
	}
}
