package ggufmodel_test

import (
	"flag"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/engine"
	"logitscope/internal/format/dump"
	"logitscope/internal/model"
	"logitscope/internal/model/ggufmodel"
	"logitscope/internal/peer/llamacpp"
)

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
			ours := rowsOf(t, ck, path, ids)
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
				ours := rowsOf(t, ck, path, ids)
				same := h.Logits(t, dequantizedCopy(t, path), ids, llamacpp.LogitsOptions{F32KV: true})
				if rel, flips := agreement(ours, same[:len(ours)]); rel > 1e-5 || flips > 0 {
					t.Fatalf("llama.cpp on the dequantized values differs by %.3g of the largest logit (%d flips)", rel, flips)
				}
				theirs := h.Logits(t, path, ids, llamacpp.LogitsOptions{F32KV: true})
				resid, flips := agreement(ours, theirs[:len(ours)])
				t.Logf("%s (%s): llama.cpp on its quantized arithmetic: max |Δlogit| / max |logit| %.2g, %d argmax flips", name, typeMix(t, ck, path), resid, flips)
				checkTop1(t, name, ours, theirs[:len(ours)])
			})
		}
	}
}

// With 8-bit activations (engine.ActsQ8) logitscope's CPU engine does
// the arithmetic of llama.cpp's CPU backend on Q8_0 and Q4_0 weights
// (activations rounded to 8-bit blocks, integer block sums), so its
// logits are llama.cpp's on the quantized file within float32 rounding,
// where with float32 activations they differ by the activations'
// rounding. Only at first: the two sum attention and norms in different
// orders, and once a last bit differs ahead of a rounding to 8 bits the
// rounding can go the other way, which a random model amplifies; the
// first position is compared.
func TestActivationsQ8NextToLlamaCpp(t *testing.T) {
	h := llamacpp.Harness(t)
	ck := checkpointOf(t, "small-llama3")
	ids := panelIDs(t, ck, 48)
	for _, name := range []string{"q8", "q4"} {
		t.Run(name, func(t *testing.T) {
			path := exportFile(t, ck, name)
			theirs := h.Logits(t, path, ids, llamacpp.LogitsOptions{F32KV: true})
			float, _ := agreement(rowsWith(t, ck, path, ids, engine.ActsF32)[:1], theirs[:1])
			acts8, _ := agreement(rowsWith(t, ck, path, ids, engine.ActsQ8)[:1], theirs[:1])
			t.Logf("%s (%s), first position: max |Δlogit| / max |logit| against llama.cpp %.2g with float32 activations, %.2g with 8-bit ones", name, typeMix(t, ck, path), float, acts8)
			if acts8 > 1e-5 || float < 1e-3 {
				t.Fatalf("against llama.cpp: %.3g of the largest logit with 8-bit activations (want float32 rounding), %.3g with float32 ones (want the activations' rounding)", acts8, float)
			}
		})
	}
}

var kldPreset = flag.String("kld.preset", "small-llama3", "the synthetic preset TestKLDNextToLlamaCpp quantizes (qwen2.5-0.5b for the real geometry: minutes)")

// kldRow is one line of TestKLDNextToLlamaCpp's table.
type kldRow struct {
	file                       string
	ours, acts8, theirs, cross margins.Summary // acts8: logitscope with engine.ActsQ8
	resid                      float64         // max |Δlogit| / max |logit|, logitscope against llama.cpp on the GGUF
	flips                      int             // argmax flips between the two on the GGUF
}

// The KLD of each GGUF against the float reference, as logitscope
// measures it (the Hugging Face checkpoint's float32 forward pass against
// the GGUF's weights, both here) next to llama.cpp's own
// --kl-divergence-style numbers (its F32 GGUF against the quantized one,
// both in llama.cpp), on the same teacher-forced tokens. They measure the
// same quantization through different arithmetic (llama.cpp rounds
// activations to 8 bits in quantized matmuls), so they agree closely but
// not exactly; logitscope with 8-bit activations (engine.ActsQ8) does
// llama.cpp's arithmetic on Q8_0 and Q4_0, and its KLD comes nearer.
func TestKLDNextToLlamaCpp(t *testing.T) {
	h := llamacpp.Harness(t)
	ck := checkpointOf(t, *kldPreset)
	f32 := exportFile(t, ck, "f32")
	ids := panelIDs(t, ck, 128)
	vocab := ck.Config.VocabSize
	ref := logits(rowsOf(t, ck, "", ids), vocab)
	llamaRef := logits(h.Logits(t, f32, ids, llamacpp.LogitsOptions{F32KV: true})[:len(ids)-1], vocab)
	var table []kldRow
	for _, ftype := range []string{"Q8_0", "Q6_K", "Q4_K_M", "Q4_0"} {
		path := filepath.Join(t.TempDir(), ftype+".gguf")
		h.QuantizeModel(t, f32, path, ftype)
		oursRows := rowsOf(t, ck, path, ids)
		acts8 := logits(rowsWith(t, ck, path, ids, engine.ActsQ8), vocab)
		theirRows := h.Logits(t, path, ids, llamacpp.LogitsOptions{F32KV: true})[:len(ids)-1]
		test, llamaTest := logits(oursRows, vocab), logits(theirRows, vocab)
		r := kldRow{file: ftype + " (" + typeMix(t, ck, path) + ")"}
		r.resid, r.flips = agreement(oursRows, theirRows)
		checkTop1(t, ftype, oursRows, theirRows)
		for _, c := range []struct {
			dst       *margins.Summary
			ref, test *dump.Logits
		}{{&r.ours, ref, test}, {&r.acts8, ref, acts8}, {&r.theirs, llamaRef, llamaTest}, {&r.cross, ref, llamaTest}} {
			rep, err := margins.Compare(c.ref, c.test, ids[1:], margins.Options{})
			if err != nil {
				t.Fatal(err)
			}
			*c.dst = rep.Summary
		}
		table = append(table, r)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s, %d teacher-forced positions; mean KLD (same top-1) against the float reference:\n", *kldPreset, len(ids)-1)
	fmt.Fprintf(&b, "%-56s %-18s %-18s %-20s %-22s %s\n", "GGUF", "logitscope", "logitscope a8", "llama.cpp (its F32)", "llama.cpp vs HF float", "logitscope vs llama.cpp on the GGUF")
	for _, r := range table {
		cell := func(s margins.Summary) string { return fmt.Sprintf("%.5f (%.1f%%)", s.KLD.Value, 100*s.SameTop.Value) }
		fmt.Fprintf(&b, "%-56s %-18s %-18s %-20s %-22s %.2g of max |logit|, %d flips\n", r.file, cell(r.ours), cell(r.acts8), cell(r.theirs), cell(r.cross), r.resid, r.flips)
	}
	t.Log("\n" + b.String())
	for _, r := range table {
		// llama.cpp's own activation rounding adds to its KLD; logitscope's
		// measures the weights alone. Bounded both ways, with room for
		// that residual on a random model.
		if o, l := r.ours.KLD.Value, r.theirs.KLD.Value; o > 2*l+1e-4 || l > 2*o+1e-4 {
			t.Errorf("%s: mean KLD %.5f here, %.5f in llama.cpp", r.file, o, l)
		}
		// With llama.cpp's arithmetic on Q8_0 and Q4_0 (K-quants round
		// activations to Q8_K super-blocks, which a8 does not do), the
		// KLD comes nearer llama.cpp's own.
		if o, a, l := r.ours.KLD.Value, r.acts8.KLD.Value, r.theirs.KLD.Value; !strings.Contains(r.file, "_K") && math.Abs(a-l) >= math.Abs(o-l) {
			t.Errorf("%s: mean KLD %.5f with 8-bit activations, %.5f with float32 ones: want the first nearer llama.cpp's %.5f", r.file, a, o, l)
		}
	}
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
