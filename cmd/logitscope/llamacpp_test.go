package main

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/receipt"
	"logitscope/internal/peer/llamacpp"
)

// q4kmModel exports the tiny model as F32 GGUF and quantizes it to
// Q4_K_M with llama.cpp's own quantizer (export --type).
func q4kmModel(t *testing.T) string {
	t.Helper()
	llamacpp.Harness(t)
	t.Setenv("LOGITSCOPE_CACHE", t.TempDir())
	path := filepath.Join(t.TempDir(), "tiny-q4_k_m.gguf")
	if _, err := run(t, exportCmd, "--model", tiny(t), "--gguf", path, "--type", "Q4_K_M"); err != nil {
		t.Fatal(err)
	}
	return path
}

// capture --runtime llama.cpp gives the rows that llama.cpp's library
// gives when called directly on the same ids (one teacher-forced pass,
// llamacpp.Logits), within 1e-3 of the largest logit: greedy, on a panel,
// and following a greedy capture's tokens; its receipt records the
// context llama.cpp ran.
func TestCaptureLlamaCpp(t *testing.T) {
	path := q4kmModel(t)
	h := llamacpp.Harness(t)
	dir := t.TempDir()
	greedy := filepath.Join(dir, "greedy.dump")
	common := []string{"--model", tiny(t), "--variant", path, "--runtime", "llama.cpp", "--llama-threads", "2"}
	out, err := run(t, captureCmd, append(common, "--dump-logits", greedy, "--max-new", "6", "Hello")...)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := receipt.Read(receipt.Path(greedy))
	if err != nil {
		t.Fatal(err)
	}
	b := rc.Chain.Backend
	// llama.cpp takes a batch no longer than the context: the sequence.
	n := len(rc.Request.PromptIDs) + 6
	if b.Runtime != "llama.cpp" || b.LlamaCpp == nil || b.LlamaCpp.Build != "cpu" || b.LlamaCpp.Threads != 2 || b.LlamaCpp.Batch != n ||
		b.LlamaCpp.TypeK != "f16" || b.LlamaCpp.FlashAsked != "auto" || !strings.HasPrefix(b.LlamaCpp.Source, "llama.cpp@") ||
		!strings.HasPrefix(rc.Device, "llama.cpp:cpu: CPU") || rc.GGUF == nil || rc.GGUF.SHA256 != fileSHA(t, path) {
		t.Fatalf("receipt: device %q, backend %+v, llama.cpp %+v, gguf %+v; want a batch of %d", rc.Device, b, b.LlamaCpp, rc.GGUF, n)
	}
	if !strings.Contains(out, "output_ids: [") {
		t.Errorf("output:\n%s", out)
	}
	rows := readRows(t, greedy)
	seq := append(append([]int{}, rc.Request.PromptIDs...), rc.OutputIDs[:len(rc.OutputIDs)-1]...)
	direct := h.Logits(t, path, seq, llamacpp.LogitsOptions{Threads: 2})[len(rc.Request.PromptIDs)-1:]
	worst := compareRows(t, "greedy", rows, direct)

	followed := filepath.Join(dir, "forced.dump")
	if _, err := run(t, captureCmd, append(common, "--dump-logits", followed, "--follow", greedy)...); err != nil {
		t.Fatal(err)
	}
	worst = max(worst, compareRows(t, "forced", readRows(t, followed), direct))

	panel := filepath.Join(dir, "panel.dump")
	corpus := "../../internal/model/synth/corpus.txt"
	if _, err := run(t, captureCmd, append(common, "--dump-logits", panel, "--panel", corpus, "--window", "32", "--llama-batch", "16")...); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(tiny(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	windows, err := panelOf(ck, corpus, 32)
	if err != nil {
		t.Fatal(err)
	}
	var want [][]float32
	for _, w := range windows {
		want = append(want, h.Logits(t, path, w, llamacpp.LogitsOptions{Threads: 2})[:len(w)-1]...)
	}
	worst = max(worst, compareRows(t, "panel", readRows(t, panel), want))
	t.Logf("capture --runtime llama.cpp vs llama.cpp's library directly: max |diff| / max |logit| = %.3g", worst)
}

func readRows(t *testing.T, path string) [][]float32 {
	t.Helper()
	l, err := dump.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([][]float32, l.Rows)
	for i := range rows {
		rows[i] = l.Row(i)
	}
	return rows
}

// compareRows fails when got and want differ in length or any row by
// more than 1e-3 of its largest |logit|, and returns the worst ratio.
func compareRows(t *testing.T, what string, got, want [][]float32) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	worst := 0.0
	for i := range got {
		r := maxRel(got[i], want[i])
		worst = math.Max(worst, r)
		if r > 1e-3 {
			t.Errorf("%s: row %d differs by %.3g of its largest |logit|", what, i, r)
		}
	}
	return worst
}

// maxRel is max |a−b| over max |b|.
func maxRel(a, b []float32) float64 {
	var d, m float64
	for j := range b {
		d = math.Max(d, math.Abs(float64(a[j]-b[j])))
		m = math.Max(m, math.Abs(float64(b[j])))
	}
	return d / m
}

// capture refuses a runtime that does not exist and settings that the
// runtime asked for would ignore, naming the flag and what it takes,
// before anything runs.
func TestCaptureRuntimeRefusals(t *testing.T) {
	path := ggufModel(t)
	dump := filepath.Join(t.TempDir(), "x.dump")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", path, "--runtime", "banana"}, `--runtime "banana": want one of auto, native, wasm, llama.cpp, llama.cpp:cpu, llama.cpp:vulkan`},
		{[]string{"--model", tiny(t), "--runtime", "banana"}, `--runtime "banana": want one of`},
		{[]string{"--model", path, "--runtime", "llama.cpp:metal"}, `--runtime "llama.cpp:metal": want one of`},
		{[]string{"--model", path, "--runtime", "native", "--engine", "x.wasm"}, "--engine x.wasm: --engine names engine.wasm, which only --runtime wasm (or auto) runs, not --runtime native"},
		{[]string{"--model", path, "--runtime", "llama.cpp", "--engine", "x.wasm"}, "not --runtime llama.cpp"},
		{[]string{"--model", path, "--runtime", "native", "--llama-threads", "2"}, "llama.cpp's settings (--llama-*) are for --runtime llama.cpp, not native"},
		{[]string{"--model", tiny(t), "--runtime", "llama.cpp"}, `--runtime llama.cpp runs GGUF files only: give --variant FILE.gguf or --model FILE.gguf (variant "f32" is logitscope's own)`},
		{[]string{"--model", path, "--runtime", "llama.cpp", "--activations", "q8"}, "--activations q8 emulates llama.cpp's CPU rounding in logitscope's engine"},
		{[]string{"--model", path, "--runtime", "llama.cpp:cpu", "--device", "gpu"}, "--device gpu with --runtime llama.cpp:cpu"},
		{[]string{"--model", path, "--runtime", "llama.cpp", "--llama-flash-attn", "yes"}, `llama.cpp flash attention "yes": want one of auto, on, off`},
		{[]string{"--model", path, "--runtime", "llama.cpp", "--llama-type-k", "q4_K"}, `llama.cpp KV cache type (K) "q4_K": want one of`},
		{[]string{"--model", path, "--device", "tpu"}, `--device "tpu": want gpu, cpu or auto`},
		{[]string{"--model", path, "--activations", "q4"}, `activations "q4": want f32`},
	} {
		_, err := run(t, captureCmd, append(c.args, "--dump-logits", dump, "Hi")...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v\nwant %q", c.args, err, c.want)
		}
	}
}

// splitCaptures captures a panel of model three times: the reference (the
// checkpoint's float weights), the GGUF file decoded exactly (logitscope)
// and the same file through llama.cpp; it returns their dumps.
func splitCaptures(t *testing.T, model, gguf string, args ...string) (ref, file, engine string) {
	t.Helper()
	dir := t.TempDir()
	ref, file, engine = filepath.Join(dir, "ref.dump"), filepath.Join(dir, "file.dump"), filepath.Join(dir, "engine.dump")
	for _, c := range [][]string{
		{"--variant", "f32", "--runtime", "native", "--device", "cpu", "--dump-logits", ref},
		{"--variant", gguf, "--runtime", "native", "--device", "cpu", "--dump-logits", file},
		{"--variant", gguf, "--runtime", "llama.cpp", "--dump-logits", engine},
	} {
		if _, err := run(t, captureCmd, append(append([]string{"--model", model}, c...), args...)...); err != nil {
			t.Fatal(err)
		}
	}
	return ref, file, engine
}

// report --engine-dump splits the engine's divergence from the float
// reference into the file's share and the engine's: the counts by cause
// add up to each side's flips, the JSON and the text say the same, and a
// split of two different GGUF files is refused.
func TestReportSplit(t *testing.T) {
	path := q4kmModel(t)
	ref, file, engine := splitCaptures(t, tiny(t), path, "--panel", "../../internal/model/synth/corpus.txt", "--window", "64")
	out, err := run(t, reportCmd, "--ref", ref, "--test", file, "--engine-dump", engine, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Split struct {
			Positions           int
			File, Engine, Total struct{ Flips int }
			ByCause             map[string]int `json:"by_cause"`
			EngineOnly          []int          `json:"engine_only"`
		}
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	r := doc.Split
	c := r.ByCause
	if r.Positions == 0 || r.File.Flips != c["file"]+c["both"]+c["undone"] || r.Engine.Flips != c["engine"]+c["both"]+c["undone"] ||
		r.Total.Flips != c["file"]+c["engine"]+c["both"] || len(r.EngineOnly) != c["engine"] {
		t.Errorf("flips: file %d, engine %d, total %d, by cause %v, engine-only %v", r.File.Flips, r.Engine.Flips, r.Total.Flips, c, r.EngineOnly)
	}
	text, err := run(t, reportCmd, "--ref", ref, "--test", file, "--engine-dump", engine)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"what your file does", "what your engine adds", "engine ran: @node-llama-cpp/linux-x64@",
		fmt.Sprintf("the engine's alone %d,", c["engine"])} {
		if !strings.Contains(text, want) {
			t.Errorf("text report lacks %q:\n%s", want, text)
		}
	}
	t.Logf("tiny Q4_K_M (%s):\n%s", path, text)

	// Its snapshot is the comparison of the reference with the file, the
	// split beside it, as the page shows the three dumps dropped.
	snap := filepath.Join(t.TempDir(), "split.json")
	if _, err := run(t, reportCmd, "--ref", ref, "--test", file, "--engine-dump", engine, "--snapshot", snap); err != nil {
		t.Fatal(err)
	}
	d, _ := readSnapshot(t, snap)
	two, err := run(t, reportCmd, "--ref", ref, "--test", file, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var pair struct{ Summary struct{ Flips int } }
	if err := json.Unmarshal([]byte(two), &pair); err != nil {
		t.Fatal(err)
	}
	if s := d.Split; s == nil || s.Engine.Label != "engine.dump" || s.Engine.Receipt == nil || s.Report.ByCause["engine"] != c["engine"] ||
		d.Test.Label != "file.dump" || d.Report.Summary.Flips != pair.Summary.Flips || d.Report.Summary.Flips != r.File.Flips {
		t.Errorf("the snapshot's split %+v; test %q with %d flips (report ref → file: %d, the split's file share %d)",
			d.Split, d.Test.Label, d.Report.Summary.Flips, pair.Summary.Flips, r.File.Flips)
	}

	other := ggufModel(t)
	otherFile := filepath.Join(t.TempDir(), "other.dump")
	if _, err := run(t, captureCmd, "--model", tiny(t), "--variant", other, "--runtime", "native", "--device", "cpu", "--dump-logits", otherFile,
		"--panel", "../../internal/model/synth/corpus.txt", "--window", "64"); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, reportCmd, "--ref", ref, "--test", otherFile, "--engine-dump", engine); err == nil || !strings.Contains(err.Error(), "the split needs the same file on both") {
		t.Errorf("two GGUF files: %v", err)
	}
}

// capture --runtime llama.cpp:vulkan runs llama.cpp's Vulkan build on the
// first Vulkan device (lavapipe here) and gives the rows that the same
// library gives on the same ids in the same batches: greedy as a prefill
// and single-token steps, --follow as one teacher-forced llama_decode. On
// Vulkan the two batchings differ from each other (its batched and
// single-token kernels round differently), which the log shows.
// It needs make bench-deps, which CI does not install: it skips without.
func TestCaptureLlamaCppVulkan(t *testing.T) {
	h := llamacpp.VulkanHarness(t)
	path := q4kmModel(t)
	dir := t.TempDir()
	greedy, forced := filepath.Join(dir, "vk.dump"), filepath.Join(dir, "vk-forced.dump")
	common := []string{"--model", tiny(t), "--variant", path, "--runtime", "llama.cpp:vulkan"}
	if _, err := run(t, captureCmd, append(common, "--dump-logits", greedy, "--max-new", "4", "Hello")...); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, captureCmd, append(common, "--dump-logits", forced, "--follow", greedy)...); err != nil {
		t.Fatal(err)
	}
	rc, err := receipt.Read(receipt.Path(greedy))
	if err != nil {
		t.Fatal(err)
	}
	if l := rc.Chain.Backend.LlamaCpp; l == nil || l.Build != "vulkan" || !strings.HasPrefix(l.Device, "Vulkan") ||
		!strings.HasPrefix(l.Package, "@node-llama-cpp/linux-x64-vulkan@") {
		t.Fatalf("backend %+v", l)
	}
	prompt := rc.Request.PromptIDs
	seq := append(append([]int{}, prompt...), rc.OutputIDs[:len(rc.OutputIDs)-1]...)
	s, err := h.Session(path, llamacpp.SessionOptions{Ctx: len(seq), Batch: len(seq)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	decode := func(ids []int, want llamacpp.Want) [][]float32 {
		rows, err := s.Decode(ids, want)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	stepwise := decode(prompt, llamacpp.Last)
	for _, id := range seq[len(prompt):] {
		stepwise = append(stepwise, decode([]int{id}, llamacpp.Last)...)
	}
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	batched := decode(seq, llamacpp.All)[len(prompt)-1:]
	worst := max(compareRows(t, "greedy", readRows(t, greedy), stepwise), compareRows(t, "forced", readRows(t, forced), batched))
	t.Logf("capture --runtime llama.cpp:vulkan vs the library directly, same batches: max |diff| / max |logit| = %.3g", worst)
	var shape float64
	for i := range stepwise {
		shape = max(shape, maxRel(stepwise[i], batched[i]))
	}
	t.Logf("llama.cpp's Vulkan, single-token steps vs one batch on the same ids: max |diff| / max |logit| = %.3g", shape)
}
