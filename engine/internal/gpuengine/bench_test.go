package gpuengine

import (
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"logitscope/checkpoint"
	"logitscope/gpu"
	"logitscope/gpu/native/nativetest"
	"logitscope/model"
	"logitscope/quant"
	"logitscope/safetensors"
	"logitscope/shaders"
	"logitscope/synth"
	"logitscope/variant"
)

// benchModel opens a cached synthetic preset and, unless f32 is asked
// for, its q4 variant (written once into the cache).
func benchModel(b *testing.B, preset synth.Preset, vname string) (model.Geometry, Source) {
	dir, err := synth.CachedPreset(preset, 0)
	if err != nil {
		b.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ck.Close() })
	g, err := model.GeometryOf(ck.Config)
	if err != nil {
		b.Fatal(err)
	}
	if vname == "f32" {
		return g, CheckpointSource(ck)
	}
	vdir, err := variant.Ensure(ck, quant.Q4, os.Stderr)
	if err != nil {
		b.Fatal(err)
	}
	v, err := variant.Open(vdir)
	if err != nil {
		b.Fatal(err)
	}
	return g, VariantSource(v)
}

// BenchmarkOps profiles one GPU decode step op by op (a wait after each
// dispatch) and reports each op family's time as "<op>-ms"; the mixture of
// experts is Qwen3-30B-A3B's layers cut to two (see engine's
// BenchmarkDecode).
func BenchmarkOps(b *testing.B) {
	for _, preset := range []synth.Preset{synth.Presets["tiny"], synth.Presets["qwen2.5-0.5b"], synth.Presets["qwen3-0.6b"], synth.TwoLayer("qwen3-30b-a3b")} {
		for _, vname := range []string{"f32", "q4"} {
			b.Run(preset.Name+"/"+vname, func(b *testing.B) {
				g, src := benchModel(b, preset, vname)
				e, err := New(nativetest.Device(b), g, src, Options{Capacity: 64 + b.N})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				for range 64 / e.Chunk() { // a prefill: the decode step then attends over 64 positions
					if err := e.Submit(make([]int, e.Chunk()), 0); err != nil {
						b.Fatal(err)
					}
				}
				total := map[string]time.Duration{}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					t, err := e.Profile(13)
					if err != nil {
						b.Fatal(err)
					}
					for k, d := range t {
						total[k] += d
					}
				}
				keys := make([]string, 0, len(total))
				for k := range total {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					b.ReportMetric(total[k].Seconds()*1e3/float64(b.N), strings.ReplaceAll(k, " ", "_")+"-ms")
				}
			})
		}
	}
}

// BenchmarkMatmulKernel times one decode-shaped matmul (T = 1) at
// Qwen2.5-0.5B's MLP shape, per weight format.
func BenchmarkMatmulKernel(b *testing.B) {
	dev := nativetest.Device(b)
	const rows, cols = 4864, 896
	for _, f := range []shaders.Format{shaders.BF16, shaders.Q8, shaders.Q4} {
		b.Run(f.String(), func(b *testing.B) {
			r := rnd(1)
			w := r.fill(rows*cols, 0.05)
			var raw []byte
			switch f {
			case shaders.BF16:
				raw = safetensors.EncodeBF16(w)
			default:
				raw, _ = quant.Quantize(quant.Scheme(f.String()), w, rows, cols)
			}
			base, _ := Piece{Rows: rows, Cols: cols, Format: f}.scaleBase()
			m, err := dev.CreateShaderModule("bench", shaders.Matmul(f))
			if err != nil {
				b.Fatal(err)
			}
			p, err := dev.CreateComputePipeline("bench", m, "main")
			if err != nil {
				b.Fatal(err)
			}
			y := buf(b, dev, make([]float32, rows))
			g, err := dev.CreateBindGroup(p, 0, []gpu.Binding{{Binding: 0, Buffer: buf(b, dev, raw)}, {Binding: 1, Buffer: buf(b, dev, r.fill(cols, 1))},
				{Binding: 2, Buffer: y}, {Binding: 3, Buffer: buf(b, dev, make([]float32, rows))},
				{Binding: 4, Buffer: buf(b, dev, params(rows, cols, cols/32, base, rows, 0, 0, 0, 0))}})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := dev.Dispatch(p, []gpu.BindGroup{g}, uint32((rows+shaders.MatmulRows-1)/shaders.MatmulRows), 1, 1); err != nil {
					b.Fatal(err)
				}
				if _, err := dev.ReadBuffer(y, 0, 4); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(raw))*float64(b.N)/b.Elapsed().Seconds()/1e9, "weightGB/s")
		})
	}
}
