package engine_test

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"logitscope/internal/engine"
	"logitscope/internal/engine/ggufmodeltest"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native/nativetest"
	"logitscope/internal/model"
	"logitscope/internal/model/synth"
	"logitscope/internal/peer/llamacpp"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/internal/run/session"
)

// benchModel opens a cached synthetic preset and its variant vname (each
// written once into the cache; no variant for f32).
func benchModel(b *testing.B, p synth.Preset, vname string) (*checkpoint.Checkpoint, *variant.Variant) {
	dir, err := synth.CachedPreset(p, 0)
	if err != nil {
		b.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ck.Close() })
	if vname == "f32" {
		return ck, nil
	}
	if _, err := variant.Ensure(ck, quant.Scheme(vname), os.Stderr); err != nil {
		b.Fatal(err)
	}
	v, err := engine.OpenVariant(ck, vname)
	if err != nil {
		b.Fatal(err)
	}
	return ck, v
}

// storedBytes is what one decode step reads of the weights as both
// engines hold them: as stored (the CPU computes on the stored blocks
// too). A tied embedding counts once: the head reads all of it. A routed
// expert counts TopK/Experts of its bytes: a token reads TopK of each
// layer's experts.
func storedBytes(ck *checkpoint.Checkpoint, v *variant.Variant, g model.Geometry) int64 {
	var n, routed int64
	for _, s := range g.Specs() {
		sum := &n
		if strings.Contains(s.Name, ".mlp.experts.") {
			sum = &routed
		}
		if v != nil {
			_, _, size, _ := v.Shape(s.Name)
			*sum += size
		} else {
			info, _, _ := ck.Info(s.Name)
			*sum += info.Length
		}
	}
	if routed > 0 {
		n += routed * int64(g.TopK) / int64(g.Experts)
	}
	return n
}

// decodePresets are BenchmarkDecode's models: the tiny preset, the real
// geometry of each family (generated on first use: 0.3 to 2.5 GB each,
// and minutes for a q4 variant), and the mixtures of experts' real layers
// cut to two: Qwen3-30B-A3B's (128 experts of 768, 8 per token) and
// GLM-4.5-Air's (a dense layer, then 128 experts of 1408 in one group, 8
// per token, and a shared expert: 5 GB in bf16). Run one with -bench
// 'Decode/qwen3-30b' -benchtime 3x.
func decodePresets() []synth.Preset {
	return []synth.Preset{synth.Presets["tiny"], synth.Presets["qwen2.5-0.5b"], synth.Presets["qwen3-0.6b"],
		synth.Presets["smollm2-135m"], synth.Presets["llama-3.2-1b"], synth.Presets["gemma-3-1b"], synth.TwoLayer("qwen3-30b-a3b"),
		synth.TwoLayer("glm-4.5-air")}
}

// BenchmarkDecode measures KV-cache decode steps (one token in, one logit
// row out, positions 32..288 after a 32-token prefill) for each preset,
// variant (q4+a8: q4 with 8-bit activations) and device,
// with tokens/s, the effective weight bandwidth and, on the GPU, the
// dispatches one step records.
func BenchmarkDecode(b *testing.B) {
	for _, preset := range decodePresets() {
		for _, vname := range []string{"f32", "q4", "q4+a8"} {
			for _, dname := range []string{"cpu", "gpu"} {
				base, a8 := strings.CutSuffix(vname, "+a8")
				if a8 && dname == "gpu" && preset.Experts > 0 {
					continue // the GPU's mixture-of-experts kernels take float32 activations only (Open refuses)
				}
				acts := engine.ActsF32
				if a8 {
					acts = engine.ActsQ8
				}
				b.Run(preset.Name+"/"+vname+"/"+dname, func(b *testing.B) {
					ck, v := benchModel(b, preset, "q4")
					if base == "f32" {
						v = nil
					}
					g, err := model.GeometryOf(ck.Config)
					if err != nil {
						b.Fatal(err)
					}
					const prompt, span = 32, 256
					var dev gpu.Device
					if dname == "gpu" {
						dev = nativetest.Device(b)
					}
					s, err := engine.Open(ck, engine.Options{Variant: v, Device: dev, Capacity: prompt + span, Activations: acts})
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(s.Close)
					ids := probeIDs(prompt)
					pos := 0
					fresh := func() {
						b.StopTimer()
						s.Reset()
						if _, err := session.Forward(s, ids, false); err != nil {
							b.Fatal(err)
						}
						pos = prompt
						b.StartTimer()
					}
					counter, _ := s.(interface{ Dispatches() int64 })
					var dispatches int64
					fresh()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if pos == prompt+span {
							fresh()
						}
						var before int64
						if counter != nil {
							before = counter.Dispatches()
						}
						if _, err := session.Forward(s, []int{ids[i%prompt]}, false); err != nil {
							b.Fatal(err)
						}
						if counter != nil {
							dispatches += counter.Dispatches() - before
						}
						pos++
					}
					sec := b.Elapsed().Seconds()
					b.ReportMetric(float64(b.N)/sec, "tok/s")
					b.ReportMetric(float64(storedBytes(ck, v, g))*float64(b.N)/sec/1e9, "weightGB/s")
					if counter != nil {
						b.ReportMetric(float64(dispatches)/float64(b.N), "dispatches/tok")
					}
				})
			}
		}
	}
}

// peerPresets are the models BenchmarkCPU and BenchmarkVulkan run beside
// llama.cpp: Qwen2.5-0.5B's geometry cut to two layers (quick),
// SmolLM2-135M's (mid) and Qwen2.5-0.5B's whole. Pick one with -bench
// 'CPU/smollm2-135m/'.
func peerPresets() []synth.Preset {
	return []synth.Preset{synth.TwoLayer("qwen2.5-0.5b"), synth.Presets["smollm2-135m"], synth.Presets["qwen2.5-0.5b"]}
}

// BenchmarkCPU measures the CPU engine beside llama.cpp's CPU backend on
// the same weights and tokens, in one run (see benchPeer), on every core:
// f32, q8 and q4 with float32 activations, and q8 and q4 with 8-bit ones
// (q8+a8, q4+a8: llama.cpp's own arithmetic).
func BenchmarkCPU(b *testing.B) {
	threads := runtime.GOMAXPROCS(0)
	for _, preset := range peerPresets() {
		for _, vname := range []string{"f32", "q8", "q4", "q8+a8", "q4+a8"} {
			b.Run(preset.Name+"/"+vname+"/cpu", func(b *testing.B) {
				benchPeer(b, preset, vname, nil, func(gg string, ids []int, gen int) llamacpp.Speed {
					return llamacpp.Harness(b).Bench(b, gg, ids, llamacpp.BenchOptions{Gen: gen, Threads: threads, Reps: b.N})
				})
			})
		}
	}
}

// BenchmarkVulkan measures the GPU engine on the native WebGPU (Vulkan)
// beside llama.cpp's Vulkan build (make bench-deps) on the same weights
// and tokens, q8 and q4, with float32 activations and with 8-bit ones
// (q8+a8, q4+a8: packed 8-bit dot products, matmul_a8.wgsl; see
// benchPeer). By default both run on lavapipe,
// Mesa's CPU Vulkan driver, which llama.cpp uses only when told
// (GGML_VK_VISIBLE_DEVICES=0); with LOGITSCOPE_BENCH_GPU=real both must
// run on a real GPU, and a CPU driver on either side fails the benchmark
// (bench/gpu.sh sets it). llama.cpp's first run on a device compiles its
// shaders: minutes on lavapipe, kept by Mesa's shader cache
// (~/.cache/mesa_shader_cache) for the next run; its warm-up pass takes
// that time, reported as peer-warmup-s.
func BenchmarkVulkan(b *testing.B) {
	onGPU := os.Getenv("LOGITSCOPE_BENCH_GPU") == "real"
	visible := "0"
	if onGPU {
		visible = ""
	}
	warned := false
	for _, preset := range peerPresets() {
		for _, vname := range []string{"q8", "q4", "q8+a8", "q4+a8"} {
			b.Run(preset.Name+"/"+vname+"/vulkan", func(b *testing.B) {
				dev := nativetest.Device(b)
				if err := checkDevice("ours", dev.Info().Adapter, onGPU); err != nil {
					b.Fatal(err)
				}
				benchPeer(b, preset, vname, dev, func(gg string, ids []int, gen int) llamacpp.Speed {
					h := llamacpp.VulkanHarness(b)
					if !warned {
						warned = true
						fmt.Fprintln(os.Stderr, "llama.cpp Vulkan: its first run on a device compiles its shaders (minutes on lavapipe; Mesa's shader cache keeps them)")
					}
					s := h.Bench(b, gg, ids, llamacpp.BenchOptions{Gen: gen, Reps: b.N, GPU: true, VisibleDevices: visible})
					if err := checkDevice("llama.cpp", s.Device, onGPU); err != nil {
						b.Fatal(err)
					}
					b.Logf("ours on %s, llama.cpp on %s", dev.Info().Adapter, s.Device)
					return s
				})
			})
		}
	}
}

// cpuDrivers are what Vulkan devices that are CPUs call themselves.
var cpuDrivers = []string{"llvmpipe", "lavapipe", "SwiftShader"}

// checkDevice says what is wrong with a benchmark's device: on a real
// GPU run (onGPU), any CPU driver; otherwise, anything but lavapipe, so
// that a row never compares a GPU with a CPU driver.
func checkDevice(who, device string, onGPU bool) error {
	onCPU := slices.ContainsFunc(cpuDrivers, func(d string) bool { return strings.Contains(device, d) })
	switch {
	case onGPU && onCPU:
		return fmt.Errorf("%s ran on %q, a CPU Vulkan driver, not a GPU (LOGITSCOPE_BENCH_GPU=real)", who, device)
	case !onGPU && !strings.Contains(device, "llvmpipe"):
		return fmt.Errorf("%s ran on %q, not lavapipe: on a machine with a GPU run bench/gpu.sh (LOGITSCOPE_BENCH_GPU=real)", who, device)
	}
	return nil
}

// benchPeer measures the engine on dev (nil: the CPU) beside a peer on
// the same weights (the variant exported by ggufmodel.Export: f32 as F32,
// q8 as Q8_0, q4 as Q4_0, bit for bit) and the same tokens: a 79-token
// prompt (prefill tok/s), then 32 single-token steps (decode tok/s),
// fastest of b.N passes each after a warm-up pass. It reports the peak
// resident set of the engine (from before Open) and of the peer's
// process, the bytes the engine holds (the variant's stored bytes, the
// checkpoint's for f32, plus the KV cache), the weights' bytes a decode
// step reads per second beside the copy bandwidth measured in the same
// run (the CPU's memory, or the device's buffer to buffer), and on a GPU the dispatches per decoded token. Each
// measure X of the peer is peer-X: cmd/benchtable turns the pairs into
// ratios, ours / peer. A vname ending in +a8 runs the variant with 8-bit
// activations (engine.ActsQ8) beside the same file.
func benchPeer(b *testing.B, preset synth.Preset, vname string, dev gpu.Device, peer func(gguf string, ids []int, gen int) llamacpp.Speed) {
	vname, a8 := strings.CutSuffix(vname, "+a8")
	acts := engine.ActsF32
	if a8 {
		acts = engine.ActsQ8
	}
	ck, v, gg := peerBenchModel(b, preset, vname)
	g, err := model.GeometryOf(ck.Config)
	if err != nil {
		b.Fatal(err)
	}
	const prompt, gen = 79, 32
	ids := probeIDs(prompt)
	resetPeakRSS()
	s, err := engine.Open(ck, engine.Options{Variant: v, Device: dev, Capacity: prompt + gen, Activations: acts})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	counter, _ := s.(interface{ Dispatches() int64 })
	var bestPrefill, bestDecode float64
	var dispatches int64
	for i := 0; i <= b.N; i++ {
		s.Reset()
		t0 := time.Now()
		if _, err := session.Forward(s, ids, false); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		var before int64
		if counter != nil {
			before = counter.Dispatches()
		}
		for j := 0; j < gen; j++ {
			if _, err := session.Forward(s, []int{ids[j%prompt]}, false); err != nil {
				b.Fatal(err)
			}
		}
		t2 := time.Now()
		if counter != nil {
			dispatches = counter.Dispatches() - before
		}
		if i == 0 {
			continue // the warm-up
		}
		bestPrefill = max(bestPrefill, prompt/t1.Sub(t0).Seconds())
		bestDecode = max(bestDecode, gen/t2.Sub(t1).Seconds())
	}
	rss := peakRSS()
	weights := storedBytes(ck, v, g)
	held := weights + int64(2*4*g.NumLayers*g.KVHeads*g.HeadDim*(prompt+gen))
	copyBW := copyBandwidth()
	if dev != nil {
		copyBW = deviceCopyBandwidth(b, dev)
	}
	ll := peer(gg, ids, gen)
	b.ReportMetric(bestPrefill, "prefill-tok/s")
	b.ReportMetric(ll.PrefillTokS, "peer-prefill-tok/s")
	b.ReportMetric(bestDecode, "decode-tok/s")
	b.ReportMetric(ll.DecodeTokS, "peer-decode-tok/s")
	b.ReportMetric(float64(weights)*bestDecode/1e9, "weight-GB/s")
	b.ReportMetric(copyBW/1e9, "copy-GB/s")
	b.ReportMetric(float64(weights)*bestDecode/copyBW, "weight/copy")
	if counter != nil {
		b.ReportMetric(float64(dispatches)/gen, "dispatches/tok")
	}
	if wg, ok := s.(interface{ Workgroups() (int, int) }); ok {
		decode, prefill := wg.Workgroups()
		b.ReportMetric(float64(decode), "wg-decode")
		b.ReportMetric(float64(prefill), "wg-prefill")
	}
	b.ReportMetric(float64(held)/1e6, "held-MB")
	if rss > 0 {
		b.ReportMetric(float64(rss)/1e6, "peakRSS-MB")
		b.ReportMetric(float64(rss)/float64(held), "RSS/held")
	}
	b.ReportMetric(float64(ll.PeakRSS)/1e6, "peer-peakRSS-MB")
	b.ReportMetric(ll.WarmupS, "peer-warmup-s")
}

// peerBenchModel opens a cached preset, its variant vname (written once
// into the cache; nil for f32) and the GGUF export of those weights
// (ggufmodeltest.Cached: written once beside them).
func peerBenchModel(b *testing.B, p synth.Preset, vname string) (*checkpoint.Checkpoint, *variant.Variant, string) {
	ck, v := benchModel(b, p, vname)
	return ck, v, ggufmodeltest.Cached(b, ck.Dir, vname)
}

// resetPeakRSS returns freed memory to the system and restarts the
// process's peak resident set from what it holds now (Linux's
// clear_refs 5), so that peakRSS measures what comes next.
func resetPeakRSS() {
	runtime.GC()
	debug.FreeOSMemory()
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSS is the process's peak resident set in bytes (VmHWM), 0 where
// /proc does not tell.
func peakRSS() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if kb, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 10, 64)
			return n * 1024
		}
	}
	return 0
}

// copyBandwidth is the bytes per second that copying 256 MiB takes on
// every core (each copying its share), the best of three: what streaming
// memory can do here, to judge a decode step's weight bandwidth by.
func copyBandwidth() float64 {
	const size = 256 << 20
	src, dst := make([]byte, size), make([]byte, size)
	for i := range src {
		src[i] = byte(i)
	}
	workers := runtime.GOMAXPROCS(0)
	best := 0.0
	for range 3 {
		var wg sync.WaitGroup
		t0 := time.Now()
		for w := range workers {
			lo, hi := w*size/workers, (w+1)*size/workers
			wg.Go(func() { copy(dst[lo:hi], src[lo:hi]) })
		}
		wg.Wait()
		best = max(best, size/time.Since(t0).Seconds())
	}
	return best
}

// deviceCopyBandwidth is the bytes per second that dev copies from one
// 128 MiB buffer into another (eight copies per submission), the best of
// four: what a GPU's memory can stream, to judge its decode step's
// weight bandwidth by (on lavapipe, the CPU's memory through the driver).
func deviceCopyBandwidth(b *testing.B, dev gpu.Device) float64 {
	const size, copies = 128 << 20, 8
	src, err := dev.CreateBuffer("copy-src", size)
	if err != nil {
		b.Fatal(err)
	}
	defer dev.DestroyBuffer(src)
	dst, err := dev.CreateBuffer("copy-dst", size)
	if err != nil {
		b.Fatal(err)
	}
	defer dev.DestroyBuffer(dst)
	best := 0.0
	for range 4 {
		t0 := time.Now()
		for range copies {
			if err := dev.CopyBuffer(src, 0, dst, 0, size); err != nil {
				b.Fatal(err)
			}
		}
		if err := dev.Submit(); err != nil {
			b.Fatal(err)
		}
		if _, err := dev.ReadBuffer(dst, 0, 4); err != nil { // waits for the copies
			b.Fatal(err)
		}
		best = max(best, size*copies/time.Since(t0).Seconds())
	}
	return best
}
