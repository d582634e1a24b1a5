package engine_test

import (
	"os"
	"strings"
	"testing"

	"logitscope/checkpoint"
	"logitscope/engine"
	"logitscope/gpu"
	"logitscope/gpu/native/nativetest"
	"logitscope/model"
	"logitscope/quant"
	"logitscope/session"
	"logitscope/synth"
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
					ids := make([]int, prompt)
					for i := range ids {
						ids[i] = (i*7919 + 13) % 300
					}
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
