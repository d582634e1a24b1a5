package llamacpp

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/format/ggml"
)

// TestTypeSize checks a few of ggml's block layouts that the rest of the
// project relies on (ggml's own test compares its whole table).
func TestTypeSize(t *testing.T) {
	h := Harness(t)
	for _, c := range []struct {
		t                     ggml.Type
		name                  string
		blockSize, blockBytes int
	}{
		{ggml.F32, "f32", 1, 4},
		{ggml.F16, "f16", 1, 2},
		{ggml.BF16, "bf16", 1, 2},
		{ggml.Q4_0, "q4_0", 32, 18},
		{ggml.Q8_0, "q8_0", 32, 34},
		{ggml.Q4_K, "q4_K", 256, 144},
		{ggml.Q6_K, "q6_K", 256, 210},
	} {
		bs, bb := h.TypeSize(t, c.t)
		if name := h.TypeName(t, c.t); bs != c.blockSize || bb != c.blockBytes || name != c.name {
			t.Errorf("type %d: %s %d weights in %d bytes, want %s %d in %d", c.t, name, bs, bb, c.name, c.blockSize, c.blockBytes)
		}
	}
	if _, err := os.Stat(filepath.Join(BuildDir(), "include", "include", "llama.h")); err != nil {
		t.Errorf("the headers the harness was built with: %v", err)
	}
}

// TestQuantizeRoundTrip quantizes and dequantizes with the library and
// checks that the round trip stays within each type's expected error: a
// check of the plumbing (sizes, byte order, row layout), since ggml's test
// compares ggml.Dequantize with the library bit for bit.
func TestQuantizeRoundTrip(t *testing.T) {
	h := Harness(t)
	const rows, cols = 3, 512
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float32, rows*cols)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for _, c := range []struct {
		t ggml.Type
		// maxErr bounds the worst error relative to the largest |x| of
		// the tensor.
		maxErr float64
	}{
		{ggml.F16, 1e-3}, {ggml.BF16, 5e-3},
		{ggml.Q8_0, 0.01}, {ggml.Q6_K, 0.03}, {ggml.Q5_0, 0.04}, {ggml.Q5_1, 0.04}, {ggml.Q5_K, 0.06},
		{ggml.Q4_0, 0.08}, {ggml.Q4_1, 0.08}, {ggml.Q4_K, 0.1}, {ggml.Q3_K, 0.2}, {ggml.Q2_K, 0.4},
	} {
		t.Run(c.t.String(), func(t *testing.T) {
			blocks := h.Quantize(t, c.t, x, rows, cols)
			if want, _ := c.t.RowBytes(rows * cols); int64(len(blocks)) != want {
				t.Fatalf("%d bytes, want %d", len(blocks), want)
			}
			y := h.Dequantize(t, c.t, blocks)
			var worst, max float64
			for i := range x {
				worst = math.Max(worst, math.Abs(float64(y[i]-x[i])))
				max = math.Max(max, math.Abs(float64(x[i])))
			}
			if worst > c.maxErr*max {
				t.Errorf("worst error %g of max |x| %g, want at most %g of it", worst, max, c.maxErr)
			}
		})
	}
}

// TestModel writes the tiny model, quantizes it, and runs all of them:
// QuantizeModel, WriteTinyModel and Logits (shapes, determinism, batching,
// and that the quantized and f16-cache runs stay near the f32 one).
func TestModel(t *testing.T) {
	h := Harness(t)
	dir := t.TempDir()
	f32 := filepath.Join(dir, "tiny-f32.gguf")
	h.WriteTinyModel(t, f32, 7)
	models := map[string]string{"F32": f32}
	for _, ftype := range []string{"Q8_0", "Q4_K_M"} {
		out := filepath.Join(dir, "tiny-"+ftype+".gguf")
		h.QuantizeModel(t, f32, out, ftype)
		fi, err := os.Stat(out)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes", ftype, fi.Size())
		models[ftype] = out
	}

	rng := rand.New(rand.NewPCG(3, 4))
	ids := make([]int, 40)
	for i := range ids {
		ids[i] = rng.IntN(512)
	}
	opt := LogitsOptions{F32KV: true, Threads: 1}
	ref := h.Logits(t, f32, ids, opt)
	if len(ref) != len(ids) || len(ref[0]) != 512 {
		t.Fatalf("%d rows of %d, want %d of 512", len(ref), len(ref[0]), len(ids))
	}
	for i, row := range ref {
		for j, v := range row {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("position %d logit %d: %v", i, j, v)
			}
		}
	}
	if again := h.Logits(t, f32, ids, opt); maxDiff(ref, again) != 0 {
		t.Errorf("two runs differ by %g", maxDiff(ref, again))
	}

	for _, c := range []struct {
		name    string
		model   string
		ids     []int
		opt     LogitsOptions
		tol     float64 // worst logit difference from ref allowed
		differs bool    // whether a difference of 0 is wrong
	}{
		// A prefix is the start of the same computation: causal
		// attention leaves the earlier positions alone.
		{"prefix", f32, ids[:7], opt, 1e-4, false},
		// The default cache rounds keys and values to f16.
		{"f16 cache", f32, ids, LogitsOptions{Threads: 2}, 0.05, true},
		{"Q8_0", models["Q8_0"], ids, opt, 0.1, true},
		{"Q4_K_M", models["Q4_K_M"], ids, opt, 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := h.Logits(t, c.model, c.ids, c.opt)
			if d := maxDiff(ref[:len(got)], got); d > c.tol || (c.differs && d == 0) {
				t.Errorf("worst difference from the f32 run %g, want at most %g (and not 0: %v)", d, c.tol, c.differs)
			} else {
				t.Logf("worst difference from the f32 run %g", d)
			}
		})
	}

	// More than one batch: positions past 512 continue from the cache.
	// The same position computed in a batch of another size may round
	// differently (the matrix kernels depend on the batch's shape), so
	// this allows a little.
	long := make([]int, 600)
	for i := range long {
		long[i] = rng.IntN(512)
	}
	got := h.Logits(t, f32, long, opt)
	if len(got) != len(long) {
		t.Fatalf("%d rows for %d tokens", len(got), len(long))
	}
	head := h.Logits(t, f32, long[:520], opt)
	if d := maxDiff(head, got[:520]); d > 0.01 {
		t.Errorf("positions 0..519 of a 600-token run differ from a 520-token run by %g", d)
	}
}

func maxDiff(a, b [][]float32) float64 {
	var worst float64
	for i := range a {
		for j := range a[i] {
			worst = math.Max(worst, math.Abs(float64(a[i][j]-b[i][j])))
		}
	}
	return worst
}

func TestParseSpeed(t *testing.T) {
	for _, c := range []struct {
		line string
		want Speed
		err  bool
	}{
		{"812.500 41.250 123456789 0.512 CPU AMD EPYC 9B14\n", Speed{812.5, 41.25, 123456789, 0.512, "CPU AMD EPYC 9B14"}, false},
		{"20.000 3.000 1000 281.250 Vulkan0 llvmpipe (LLVM 15.0.6, 256 bits)\n",
			Speed{20, 3, 1000, 281.25, "Vulkan0 llvmpipe (LLVM 15.0.6, 256 bits)"}, false},
		{"20.000 3.000 1000 0.5\n", Speed{}, true}, // no device
		{"20.000 3.000 1.5e3 0.5 CPU\n", Speed{}, true},
		{"", Speed{}, true},
	} {
		got, err := parseSpeed(c.line)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("parseSpeed(%q) = %+v, %v; want %+v, error %v", c.line, got, err, c.want, c.err)
		}
	}
}

// TestBench times the tiny model on the CPU and, where make bench-deps
// installed llama.cpp's Vulkan build and a Vulkan driver exists, on the
// first Vulkan device (lavapipe here: GGML_VK_VISIBLE_DEVICES=0; its
// first run compiles shaders for minutes, Mesa's shader cache keeps them).
func TestBench(t *testing.T) {
	prompt := make([]int, 16)
	for i := range prompt {
		prompt[i] = 3 * i
	}
	for _, c := range []struct {
		name   string
		h      func(testing.TB) *H
		opt    BenchOptions
		device string // the prefix of Speed.Device
	}{
		{"cpu", Harness, BenchOptions{Gen: 4, Threads: 1, Reps: 1}, "CPU"},
		{"vulkan", VulkanHarness, BenchOptions{Gen: 4, Reps: 1, GPU: true, VisibleDevices: "0"}, "Vulkan"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := c.h(t)
			model := filepath.Join(t.TempDir(), "tiny.gguf")
			h.WriteTinyModel(t, model, 7)
			s := h.Bench(t, model, prompt, c.opt)
			t.Logf("%+v", s)
			if s.PrefillTokS <= 0 || s.DecodeTokS <= 0 || s.PeakRSS <= 0 || s.WarmupS <= 0 {
				t.Errorf("speeds, RSS and warm-up should be positive: %+v", s)
			}
			if !strings.HasPrefix(s.Device, c.device) {
				t.Errorf("ran on %q, want a %s device", s.Device, c.device)
			}
		})
	}
}
