package gpuengine

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"logitscope/checkpoint"
	"logitscope/cpu"
	"logitscope/gpu"
	"logitscope/model"
	"logitscope/quant"
	"logitscope/safetensors"
	"logitscope/session"
	"logitscope/shaders"
	"logitscope/synth"
	"logitscope/variant"
)

// benchModel opens a cached synthetic preset and its q4 variant (written
// once into the cache).
func benchModel(b *testing.B, preset string) (*checkpoint.Checkpoint, *variant.Variant) {
	dir, err := synth.Cached(preset, 0)
	if err != nil {
		b.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ck.Close() })
	vdir := variant.DefaultDir(dir, "q4")
	if _, err := os.Stat(filepath.Join(vdir, "manifest.json")); err != nil {
		if err := variant.Write(ck, quant.Q4, vdir, variant.Options{}); err != nil {
			b.Fatal(err)
		}
	}
	v, err := variant.Open(vdir)
	if err != nil {
		b.Fatal(err)
	}
	return ck, v
}

// storedBytes is what one decode step reads of the weights as the engine
// holds them: float32 on the CPU, the stored bytes on the GPU. A tied
// embedding counts once: the head reads all of it.
func storedBytes(ck *checkpoint.Checkpoint, v *variant.Variant, g model.Geometry, device string) int64 {
	var n int64
	for _, s := range g.Specs() {
		elems := int64(1)
		for _, d := range s.Shape {
			elems *= int64(d)
		}
		switch {
		case device == "cpu":
			n += 4 * elems
		case v != nil:
			_, _, size, _ := v.Shape(s.Name)
			n += size
		default:
			info, _, _ := ck.Info(s.Name)
			n += info.Length
		}
	}
	return n
}

// BenchmarkDecode measures KV-cache decode steps (one token in, one logit
// row out, positions 32..288 after a 32-token prefill) for each preset,
// variant and device, with tokens/s and the effective weight bandwidth.
func BenchmarkDecode(b *testing.B) {
	for _, preset := range []string{"tiny", "qwen2.5-0.5b"} {
		for _, vname := range []string{"f32", "q4"} {
			for _, dname := range []string{"cpu", "gpu"} {
				b.Run(preset+"/"+vname+"/"+dname, func(b *testing.B) {
					ck, v := benchModel(b, preset)
					if vname == "f32" {
						v = nil
					}
					g, err := model.GeometryOf(ck.Config)
					if err != nil {
						b.Fatal(err)
					}
					const prompt, span = 32, 256
					var s session.Engine
					if dname == "cpu" {
						w := model.CheckpointWeights(ck)
						if v != nil {
							w = v
						}
						m, err := model.LoadWeights(ck, w, nil)
						if err != nil {
							b.Fatal(err)
						}
						if s, err = cpu.New(m, prompt+span); err != nil {
							b.Fatal(err)
						}
					} else {
						src := CheckpointSource(ck)
						if v != nil {
							src = VariantSource(v)
						}
						e, err := New(device(b), g, src, Options{Capacity: prompt + span})
						if err != nil {
							b.Fatal(err)
						}
						b.Cleanup(e.Close)
						s = e
					}
					ids := make([]int, prompt)
					for i := range ids {
						ids[i] = (i*7919 + 13) % 300
					}
					pos := 0
					fresh := func() {
						b.StopTimer()
						s.Reset()
						if _, err := s.Forward(ids, false); err != nil {
							b.Fatal(err)
						}
						pos = prompt
						b.StartTimer()
					}
					fresh()
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						if pos == prompt+span {
							fresh()
						}
						if _, err := s.Forward([]int{ids[i%prompt]}, false); err != nil {
							b.Fatal(err)
						}
						pos++
					}
					sec := b.Elapsed().Seconds()
					b.ReportMetric(float64(b.N)/sec, "tok/s")
					b.ReportMetric(float64(storedBytes(ck, v, g, dname))*float64(b.N)/sec/1e9, "weightGB/s")
				})
			}
		}
	}
}

// BenchmarkOps profiles one GPU decode step op by op (a wait after each
// dispatch) and reports each op family's time as "<op>-ms".
func BenchmarkOps(b *testing.B) {
	for _, preset := range []string{"tiny", "qwen2.5-0.5b"} {
		for _, vname := range []string{"f32", "q4"} {
			b.Run(preset+"/"+vname, func(b *testing.B) {
				ck, v := benchModel(b, preset)
				g, err := model.GeometryOf(ck.Config)
				if err != nil {
					b.Fatal(err)
				}
				src := CheckpointSource(ck)
				if vname == "q4" {
					src = VariantSource(v)
				}
				e, err := New(device(b), g, src, Options{Capacity: 64 + b.N})
				if err != nil {
					b.Fatal(err)
				}
				defer e.Close()
				if _, err := e.Forward(make([]int, 64), false); err != nil {
					b.Fatal(err)
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
	dev := device(b)
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
				if err := dev.Dispatch(p, []gpu.BindGroup{g}, uint32((rows+matmulRows-1)/matmulRows), 1, 1); err != nil {
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
