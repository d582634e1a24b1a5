package engine_test

import (
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"logitscope/checkpoint"
	"logitscope/engine"
	"logitscope/ggufmodel"
	"logitscope/gpu"
	"logitscope/gpu/native/nativetest"
	"logitscope/llamacpp"
	"logitscope/model"
	"logitscope/quant"
	"logitscope/session"
	"logitscope/synth"
	"logitscope/tempfile"
	"logitscope/variant"
)

// benchModel opens a cached synthetic preset and its q4 variant (written
// once into the cache).
func benchModel(b *testing.B, p synth.Preset) (*checkpoint.Checkpoint, *variant.Variant) {
	dir, err := synth.CachedPreset(p, 0)
	if err != nil {
		b.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ck.Close() })
	if _, err := variant.Ensure(ck, quant.Q4, os.Stderr); err != nil {
		b.Fatal(err)
	}
	v, err := engine.OpenVariant(ck, "q4")
	if err != nil {
		b.Fatal(err)
	}
	return ck, v
}

// storedBytes is what one decode step reads of the weights as the engine
// holds them: float32 on the CPU, the stored bytes on the GPU. A tied
// embedding counts once: the head reads all of it. A routed expert counts
// TopK/Experts of its bytes: a token reads TopK of each layer's experts.
func storedBytes(ck *checkpoint.Checkpoint, v *variant.Variant, g model.Geometry, device string) int64 {
	var n, routed int64
	for _, s := range g.Specs() {
		sum := &n
		if strings.Contains(s.Name, ".mlp.experts.") {
			sum = &routed
		}
		elems := int64(1)
		for _, d := range s.Shape {
			elems *= int64(d)
		}
		switch {
		case device == "cpu":
			*sum += 4 * elems
		case v != nil:
			_, _, size, _ := v.Shape(s.Name)
			*sum += size
		default:
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
// and minutes for a q4 variant), and Qwen3-30B-A3B's real layers (128
// experts of 768, 8 per token) cut to two. Run one with -bench
// 'Decode/qwen3-30b' -benchtime 3x.
func decodePresets() []synth.Preset {
	return []synth.Preset{synth.Presets["tiny"], synth.Presets["qwen2.5-0.5b"], synth.Presets["qwen3-0.6b"],
		synth.Presets["smollm2-135m"], synth.Presets["llama-3.2-1b"], synth.Presets["gemma-3-1b"], synth.TwoLayer("qwen3-30b-a3b")}
}

// BenchmarkDecode measures KV-cache decode steps (one token in, one logit
// row out, positions 32..288 after a 32-token prefill) for each preset,
// variant and device, with tokens/s, the effective weight bandwidth and,
// on the GPU, the dispatches one step records.
func BenchmarkDecode(b *testing.B) {
	for _, preset := range decodePresets() {
		for _, vname := range []string{"f32", "q4"} {
			for _, dname := range []string{"cpu", "gpu"} {
				b.Run(preset.Name+"/"+vname+"/"+dname, func(b *testing.B) {
					ck, v := benchModel(b, preset)
					if vname == "f32" {
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
					s, err := engine.Open(ck, engine.Options{Variant: v, Device: dev, Capacity: prompt + span})
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
					b.ReportMetric(float64(storedBytes(ck, v, g, dname))*float64(b.N)/sec/1e9, "weightGB/s")
					if counter != nil {
						b.ReportMetric(float64(dispatches)/float64(b.N), "dispatches/tok")
					}
				})
			}
		}
	}
}

// cpuPresets are BenchmarkCPU's models: Qwen2.5-0.5B's geometry cut to
// two layers (quick), and whole.
func cpuPresets() []synth.Preset {
	return []synth.Preset{synth.TwoLayer("qwen2.5-0.5b"), synth.Presets["qwen2.5-0.5b"]}
}

// BenchmarkCPU measures the CPU engine beside llama.cpp's CPU backend on
// the same weights (the variant exported by ggufmodel.Export: f32 as F32,
// q8 as Q8_0, q4 as Q4_0, bit for bit) and the same tokens, in one run:
// a 79-token prompt (prefill tok/s), then 32 single-token steps (decode
// tok/s), fastest of b.N passes each after a warm-up pass, on every core.
// It reports the peak resident set of the engine (from before Open) and
// of llama.cpp's process, the bytes the engine holds (the variant's
// stored bytes, the checkpoint's for f32, plus the KV cache),
// logitscope's speed as a multiple of llama.cpp's, and the weights' bytes
// a decode step reads per second beside the machine's copy bandwidth
// measured in the same run.
func BenchmarkCPU(b *testing.B) {
	for _, preset := range cpuPresets() {
		for _, vname := range []string{"f32", "q8", "q4"} {
			b.Run(preset.Name+"/"+vname+"/cpu", func(b *testing.B) {
				ck, v, gg := cpuBenchModel(b, preset, vname)
				g, err := model.GeometryOf(ck.Config)
				if err != nil {
					b.Fatal(err)
				}
				const prompt, gen = 79, 32
				ids := probeIDs(prompt)
				resetPeakRSS()
				s, err := engine.Open(ck, engine.Options{Variant: v, Capacity: prompt + gen})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				var bestPrefill, bestDecode float64
				for i := 0; i <= b.N; i++ {
					s.Reset()
					t0 := time.Now()
					if _, err := session.Forward(s, ids, false); err != nil {
						b.Fatal(err)
					}
					t1 := time.Now()
					for j := 0; j < gen; j++ {
						if _, err := session.Forward(s, []int{ids[j%prompt]}, false); err != nil {
							b.Fatal(err)
						}
					}
					t2 := time.Now()
					if i == 0 {
						continue // the warm-up
					}
					bestPrefill = max(bestPrefill, prompt/t1.Sub(t0).Seconds())
					bestDecode = max(bestDecode, gen/t2.Sub(t1).Seconds())
				}
				rss := peakRSS()
				weights := storedBytes(ck, v, g, "stored")
				held := weights + int64(2*4*g.NumLayers*g.KVHeads*g.HeadDim*(prompt+gen))
				copyBW := copyBandwidth()
				ll := llamacpp.Harness(b).Bench(b, gg, ids, llamacpp.BenchOptions{Gen: gen, Threads: runtime.GOMAXPROCS(0), Reps: b.N})
				b.ReportMetric(bestPrefill, "prefill-tok/s")
				b.ReportMetric(ll.PrefillTokS, "llama-prefill-tok/s")
				b.ReportMetric(bestPrefill/ll.PrefillTokS, "prefill-x")
				b.ReportMetric(bestDecode, "decode-tok/s")
				b.ReportMetric(ll.DecodeTokS, "llama-decode-tok/s")
				b.ReportMetric(bestDecode/ll.DecodeTokS, "decode-x")
				b.ReportMetric(float64(weights)*bestDecode/1e9, "weight-GB/s")
				b.ReportMetric(copyBW/1e9, "copy-GB/s")
				b.ReportMetric(float64(weights)*bestDecode/copyBW, "weight/copy")
				b.ReportMetric(float64(held)/1e6, "held-MB")
				if rss > 0 {
					b.ReportMetric(float64(rss)/1e6, "peakRSS-MB")
					b.ReportMetric(float64(rss)/float64(held), "RSS/held")
				}
				b.ReportMetric(float64(ll.PeakRSS)/1e6, "llama-peakRSS-MB")
			})
		}
	}
}

// cpuBenchModel opens a cached preset, its variant vname (written once
// into the cache; nil for f32) and the GGUF export of those weights
// (written once beside them).
func cpuBenchModel(b *testing.B, p synth.Preset, vname string) (*checkpoint.Checkpoint, *variant.Variant, string) {
	dir, err := synth.CachedPreset(p, 0)
	if err != nil {
		b.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ck.Close() })
	var v *variant.Variant
	if vname != "f32" {
		if _, err := variant.Ensure(ck, quant.Scheme(vname), os.Stderr); err != nil {
			b.Fatal(err)
		}
		if v, err = engine.OpenVariant(ck, vname); err != nil {
			b.Fatal(err)
		}
	}
	path := filepath.Join(dir, "gguf", vname+".gguf")
	if _, err := os.Stat(path); err != nil {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			b.Fatal(err)
		}
		tmp, err := tempfile.Write(path, func(w io.Writer) error {
			_, err := ggufmodel.Export(w, ck, v)
			return err
		})
		if err == nil {
			err = tempfile.Rename(tempfile.Move{Temp: tmp, Path: path})
		}
		if err != nil {
			b.Fatal(err)
		}
	}
	return ck, v, path
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
