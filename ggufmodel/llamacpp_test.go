package ggufmodel_test

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/checkpoint"
	"logitscope/dump"
	"logitscope/engine"
	"logitscope/ggml"
	"logitscope/gguf"
	"logitscope/ggufmodel"
	"logitscope/llamacpp"
	"logitscope/margins"
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
	return filepath.Base(path) + " (" + typeMixOf(t, ck, path) + ")"
}

func typeMixOf(t testing.TB, ck *checkpoint.Checkpoint, path string) string {
	g, err := engine.OpenGGUF(ck, path)
	if err != nil {
		t.Fatal(err)
	}
	return g.TypeMix()
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

var kldPreset = flag.String("kld.preset", "small-llama3", "the synthetic preset TestKLDNextToLlamaCpp quantizes (qwen2.5-0.5b for the real geometry: minutes)")

// kldRow is one line of TestKLDNextToLlamaCpp's table.
type kldRow struct {
	file                string
	ours, theirs, cross margins.Summary
	resid               float64 // max |Δlogit| / max |logit|, logitscope against llama.cpp on the GGUF
	flips               int     // argmax flips between the two on the GGUF
}

// The KLD of each GGUF against the float reference, as logitscope
// measures it (the Hugging Face checkpoint's float32 forward pass against
// the GGUF's weights, both here) next to llama.cpp's own
// --kl-divergence-style numbers (its F32 GGUF against the quantized one,
// both in llama.cpp), on the same teacher-forced tokens. They measure the
// same quantization through different arithmetic (llama.cpp rounds
// activations to 8 bits in quantized matmuls), so they agree closely but
// not exactly.
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
		theirRows := h.Logits(t, path, ids, llamacpp.LogitsOptions{F32KV: true})[:len(ids)-1]
		test, llamaTest := logits(oursRows, vocab), logits(theirRows, vocab)
		r := kldRow{file: ftype + " (" + typeMixOf(t, ck, path) + ")"}
		r.resid, r.flips = agreement(oursRows, theirRows)
		for i, a := range oursRows {
			if m := margin(a); session.Argmax(a) != session.Argmax(theirRows[i]) && m > 2*maxDiff(a, theirRows[i]) {
				t.Errorf("%s row %d: argmax %d here, %d in llama.cpp, with a margin of %.3g", ftype, i, session.Argmax(a), session.Argmax(theirRows[i]), m)
			}
		}
		for _, c := range []struct {
			dst       *margins.Summary
			ref, test *dump.Logits
		}{{&r.ours, ref, test}, {&r.theirs, llamaRef, llamaTest}, {&r.cross, ref, llamaTest}} {
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
	fmt.Fprintf(&b, "%-56s %-18s %-20s %-22s %s\n", "GGUF", "logitscope", "llama.cpp (its F32)", "llama.cpp vs HF float", "logitscope vs llama.cpp on the GGUF")
	for _, r := range table {
		cell := func(s margins.Summary) string { return fmt.Sprintf("%.5f (%.1f%%)", s.KLD.Value, 100*s.SameTop.Value) }
		fmt.Fprintf(&b, "%-56s %-18s %-20s %-22s %.2g of max |logit|, %d flips\n", r.file, cell(r.ours), cell(r.theirs), cell(r.cross), r.resid, r.flips)
	}
	t.Log("\n" + b.String())
	for _, r := range table {
		// llama.cpp's own activation rounding adds to its KLD; logitscope's
		// measures the weights alone. Bounded both ways, with room for
		// that residual on a random model.
		if o, l := r.ours.KLD.Value, r.theirs.KLD.Value; o > 2*l+1e-4 || l > 2*o+1e-4 {
			t.Errorf("%s: mean KLD %.5f here, %.5f in llama.cpp", r.file, o, l)
		}
	}
}

// rowsOf runs ids teacher-forced on the CPU: the checkpoint's own float
// weights when path is "", else the GGUF's.
func rowsOf(t testing.TB, ck *checkpoint.Checkpoint, path string, ids []int) [][]float32 {
	t.Helper()
	opt := engine.Options{Capacity: len(ids)}
	if path != "" {
		w, err := engine.OpenGGUF(ck, path)
		if err != nil {
			t.Fatal(err)
		}
		opt.GGUF = w
	}
	e, err := engine.Open(ck, opt)
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

func logits(rows [][]float32, vocab int) *dump.Logits {
	l := &dump.Logits{Rows: len(rows), Vocab: vocab}
	for _, r := range rows {
		l.Data = append(l.Data, r[:vocab]...)
	}
	return l
}
