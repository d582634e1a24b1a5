package gpuengine

import (
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/safetensors"
	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native/nativetest"
	"logitscope/internal/model"
	"logitscope/internal/model/synth"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/shaders"
)

// benchModel opens a cached synthetic preset and, unless f32 is asked
// for, its variant vname (written once into the cache).
func benchModel(b testing.TB, preset synth.Preset, vname string) (model.Geometry, Source) {
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
	vdir, err := variant.Ensure(ck, quant.Scheme(vname), os.Stderr)
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
// dispatch) and reports each op family's time as "<op>-ms"; the mixtures
// of experts are Qwen3-30B-A3B's and GLM-4.5-Air's layers cut to two (see
// engine's BenchmarkDecode).
func BenchmarkOps(b *testing.B) {
	for _, preset := range []synth.Preset{synth.Presets["tiny"], synth.Presets["qwen2.5-0.5b"], synth.Presets["qwen3-0.6b"], synth.TwoLayer("qwen3-30b-a3b"),
		synth.TwoLayer("glm-4.5-air")} {
		for _, vname := range []string{"f32", "q4", "q4+a8"} {
			b.Run(preset.Name+"/"+vname, func(b *testing.B) {
				base, a8 := strings.CutSuffix(vname, "+a8")
				if a8 && preset.Experts > 0 {
					return // 8-bit activations are for dense models
				}
				g, src := benchModel(b, preset, base)
				e, err := New(nativetest.Device(b), g, src, Options{Capacity: 64 + b.N, Acts8: a8})
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

// BenchmarkGPU measures the engine's two kinds of step apart, on
// Qwen2.5-0.5B's layers cut to two (the tiny vocabulary, so that the head
// weighs little): a 64-token prefill in chunks of 32 with no logit rows
// (the matmuls take eight tokens per invocation, main8), then 16 decode
// steps of one token and its logit row, each read back (q8+a8, q4+a8:
// with 8-bit activations); the best of b.N
// passes after a warm-up, with the dispatches per token of each. Each pass
// first runs the prefill with main only (one token per workgroup, as
// before main8), so that the machine's load weighs on both alike:
// main-prefill-tok/s.
func BenchmarkGPU(b *testing.B) {
	const prompt, gen = 64, 16
	preset := synth.TwoLayer("qwen2.5-0.5b")
	for _, vname := range []string{"f32", "q8", "q4", "q8+a8", "q4+a8"} {
		b.Run(preset.Name+"/"+vname, func(b *testing.B) {
			base, a8 := strings.CutSuffix(vname, "+a8")
			g, src := benchModel(b, preset, base)
			e, err := New(nativetest.Device(b), g, src, Options{Capacity: prompt + gen, Acts8: a8})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			ids := make([]int, prompt)
			for i := range ids {
				ids[i] = (7 * i) % g.Vocab
			}
			wait := func() {
				if _, err := e.dev.ReadBuffer(e.Logits(), 0, 4); err != nil {
					b.Fatal(err)
				}
			}
			// prefillFrom runs the prompt from an empty cache, read back.
			prefillFrom := func() {
				e.Reset()
				for c := 0; c < prompt; c += e.Chunk() {
					if err := e.Submit(ids[c:min(c+e.Chunk(), prompt)], 0); err != nil {
						b.Fatal(err)
					}
				}
				wait()
			}
			many := make([]*manyTokens, len(e.prog))
			for i, o := range e.prog {
				many[i] = o.many
			}
			var prefill, decode, mainPrefill float64
			var prefillDispatches, decodeDispatches int64
			for i := 0; i <= b.N; i++ {
				for j := range e.prog {
					e.prog[j].many = nil
				}
				t0 := time.Now()
				prefillFrom()
				if i > 0 {
					mainPrefill = max(mainPrefill, prompt/time.Since(t0).Seconds())
				}
				for j := range e.prog {
					e.prog[j].many = many[j]
				}
				d0, t0 := e.Dispatches(), time.Now()
				prefillFrom()
				d1, t1 := e.Dispatches(), time.Now()
				for j := range gen {
					if err := e.Submit(ids[j:j+1], 1); err != nil {
						b.Fatal(err)
					}
					wait()
				}
				d2, t2 := e.Dispatches(), time.Now()
				prefillDispatches, decodeDispatches = d1-d0, d2-d1
				if i > 0 { // not the warm-up, which compiles the prefill pipelines
					prefill = max(prefill, prompt/t1.Sub(t0).Seconds())
					decode = max(decode, gen/t2.Sub(t1).Seconds())
				}
			}
			b.ReportMetric(prefill, "prefill-tok/s")
			b.ReportMetric(mainPrefill, "main-prefill-tok/s")
			b.ReportMetric(decode, "decode-tok/s")
			b.ReportMetric(float64(prefillDispatches)/prompt, "prefill-dispatches/tok")
			b.ReportMetric(float64(decodeDispatches)/gen, "decode-dispatches/tok")
			b.ReportMetric(float64(e.wg.decode), "wg-decode")
			b.ReportMetric(float64(e.wg.prefill), "wg-prefill")
		})
	}
}

// timed is one dispatch of p with g and the wait for it, a 4-byte
// readback of y.
func timed(b *testing.B, dev gpu.Device, p gpu.Pipeline, g gpu.BindGroup, y gpu.Buffer, x, yy, z uint32) time.Duration {
	t0 := time.Now()
	if err := dev.Dispatch(p, []gpu.BindGroup{g}, x, yy, z); err != nil {
		b.Fatal(err)
	}
	if _, err := dev.ReadBuffer(y, 0, 4); err != nil {
		b.Fatal(err)
	}
	return time.Since(t0)
}

// BenchmarkMatmulKernel times one decode-shaped matmul (T = 1) at
// Qwen2.5-0.5B's MLP shape, per weight format, through the entry point the
// engine takes on this device (matmulEntries); GGUF's block types (a
// legacy, a K-quant, an i-quant and a ternary type, random blocks with
// moderate scales) with 1024 columns, whole super-blocks.
func BenchmarkMatmulKernel(b *testing.B) {
	dev := nativetest.Device(b)
	for _, f := range []shaders.Format{shaders.BF16, shaders.Q8, shaders.Q4,
		shaders.Q4_0, shaders.Q4_K, shaders.Q6_K, shaders.IQ4_XS, shaders.IQ2_XXS, shaders.TQ2_0} {
		b.Run(f.String(), func(b *testing.B) {
			rows, cols := 4864, 896
			r := rnd(1)
			var raw []byte
			switch ty, isGGML := f.GGML(); {
			case isGGML:
				cols = 1024
				raw = append(randomBlocks(ty, rows*cols, rand.New(rand.NewPCG(1, 2)), true), shaders.Tables(f)...)
			case f == shaders.BF16:
				raw = safetensors.EncodeBF16(r.fill(rows*cols, 0.05))
			default:
				raw, _ = quant.Quantize(quant.Scheme(f.String()), r.fill(rows*cols, 0.05), rows, cols)
			}
			base, _ := Piece{Rows: rows, Cols: cols, Format: f}.scaleBase()
			entry, perGroup, _, _ := matmulEntries(shaders.MatmulVariant{}, cols, dev.Info().Software, false)
			y := buf(b, dev, make([]float32, rows))
			p, g := bound(b, dev, shaders.Matmul(f, shaders.MatmulVariant{}), entry, []gpu.Buffer{buf(b, dev, raw), buf(b, dev, r.fill(cols, 1)), y,
				buf(b, dev, make([]float32, rows)), buf(b, dev, params(rows, cols, cols/32, base, rows, 0, 0, 0, 0))})
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				timed(b, dev, p, g, y, ceilDiv(rows, perGroup), 1, 1)
			}
			b.ReportMetric(float64(len(raw))*float64(b.N)/b.Elapsed().Seconds()/1e9, "weightGB/s")
		})
	}
}

// BenchmarkLanesKernel times main, one decode-shaped matmul (T = 1) at
// Qwen2.5-0.5B's MLP shape in q4 and bf16, with a row's lanes added in
// workgroup memory (core-ms) and in a subgroup (subgroups-ms), in turn
// in each iteration; the best of b.N each.
func BenchmarkLanesKernel(b *testing.B) {
	dev := nativetest.Device(b)
	if info := dev.Info(); !info.Subgroups || info.SubgroupMinSize < shaders.MatmulLanes {
		b.Skipf("adapter %q: no subgroups of %d invocations", info.Adapter, shaders.MatmulLanes)
	}
	const rows, cols = 4864, 896
	for _, f := range []shaders.Format{shaders.BF16, shaders.Q4} {
		b.Run(f.String(), func(b *testing.B) {
			r := rnd(1)
			w := r.fill(rows*cols, 0.05)
			raw, _ := quant.Quantize(quant.Q4, w, rows, cols)
			if f == shaders.BF16 {
				raw = safetensors.EncodeBF16(w)
			}
			base, _ := Piece{Rows: rows, Cols: cols, Format: f}.scaleBase()
			y := buf(b, dev, make([]float32, rows))
			bufs := []gpu.Buffer{buf(b, dev, raw), buf(b, dev, r.fill(cols, 1)), y,
				buf(b, dev, make([]float32, rows)), buf(b, dev, params(rows, cols, cols/32, base, rows, 0, 0, 0, 0))}
			names := []string{"core-ms", "subgroups-ms"}
			best := []time.Duration{time.Hour, time.Hour}
			var pipes []gpu.Pipeline
			var groups []gpu.BindGroup
			for _, v := range []shaders.MatmulVariant{{}, {Subgroups: true}} {
				p, g := bound(b, dev, shaders.Matmul(f, v), "main", bufs)
				pipes, groups = append(pipes, p), append(groups, g)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for k := range pipes {
					best[k] = min(best[k], timed(b, dev, pipes[k], groups[k], y, ceilDiv(rows, shaders.MatmulVariant{}.Rows()), 1, 1))
				}
			}
			for k, name := range names {
				b.ReportMetric(float64(best[k].Microseconds())/1e3, name)
			}
		})
	}
}

// BenchmarkPrefillKernel times one prefill-shaped matmul (T = 32, and T
// = manyFrom, where the engine starts to take eight tokens per
// invocation), per weight format at Qwen2.5-0.5B's MLP up shape and for q8
// (q4 too for down) at its other shapes (down, q/o, k/v), each entry point
// in turn in each iteration (so that the machine's load weighs on all
// alike): main (one token per workgroup, LANES invocations per row), rows4
// (four rows per invocation), main8 (a row and eight tokens per
// invocation) and rows4x8 (four rows and eight tokens); the best of b.N
// each.
func BenchmarkPrefillKernel(b *testing.B) {
	dev := nativetest.Device(b)
	type matmul struct {
		f          shaders.Format
		rows, cols int
	}
	cases := []matmul{{shaders.F32, 4864, 896}, {shaders.BF16, 4864, 896}, {shaders.Q8, 4864, 896}, {shaders.Q4, 4864, 896}, {shaders.Q8_0, 4864, 896},
		{shaders.Q4_0, 4864, 896}, {shaders.Q8, 896, 4864}, {shaders.Q4, 896, 4864}, {shaders.Q8, 896, 896}, {shaders.Q8, 128, 896}}
	for _, c := range cases {
		f, rows, cols := c.f, c.rows, c.cols
		r := rnd(1)
		var raw []byte
		if ty, ok := f.GGML(); ok {
			raw = randomBlocks(ty, rows*cols, rand.New(rand.NewPCG(1, uint64(ty))), true)
		} else if f == shaders.BF16 {
			raw = safetensors.EncodeBF16(r.fill(rows*cols, 0.05))
		} else if f == shaders.F32 {
			raw = bytesOf(r.fill(rows*cols, 0.05))
		} else {
			raw, _ = quant.Quantize(quant.Scheme(f.String()), r.fill(rows*cols, 0.05), rows, cols)
		}
		w := buf(b, dev, raw)
		for _, T := range []int{manyFrom, 32} {
			b.Run(fmt.Sprintf("%s/%dx%d/T%d", f, rows, cols, T), func(b *testing.B) {
				base, _ := Piece{Rows: rows, Cols: cols, Format: f}.scaleBase()
				y := buf(b, dev, make([]float32, T*rows))
				bufs := []gpu.Buffer{w, buf(b, dev, r.fill(T*cols, 1)), y, buf(b, dev, make([]float32, rows)),
					buf(b, dev, params(rows, cols, cols/32, base, rows, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, T))}
				run := func(entry string, rowsPerGroup int, z uint32) func() time.Duration {
					p, g := bound(b, dev, shaders.Matmul(f, shaders.MatmulVariant{}), entry, bufs)
					return func() time.Duration { return timed(b, dev, p, g, y, ceilDiv(rows, rowsPerGroup), 1, z) }
				}
				z8 := ceilDiv(T, shaders.MatmulTokens)
				kernels := []struct {
					entry string
					run   func() time.Duration
					best  time.Duration
				}{
					{"main", run("main", shaders.MatmulVariant{}.Rows(), uint32(T)), time.Hour},
					{"rows4", run("rows4", shaders.MatmulVariant{}.Rows4(), uint32(T)), time.Hour},
					{"main8", run("main8", shaders.Workgroup, z8), time.Hour},
					{"rows4x8", run("rows4x8", shaders.MatmulVariant{}.Rows4(), z8), time.Hour},
				}
				for _, k := range kernels {
					k.run()
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					for j := range kernels {
						kernels[j].best = min(kernels[j].best, kernels[j].run())
					}
				}
				for _, k := range kernels {
					b.ReportMetric(k.best.Seconds()*1e3, k.entry+"-ms")
				}
			})
		}
	}
}

// BenchmarkExpertKernel times one decode step's routed-expert product at
// Qwen3-30B-A3B's gate/up shape (768 rows, 2048 columns), q4, a bank of
// 16 experts and 8 slots routed into it, through expert and expert4 in
// turn (so that the machine's load weighs on both alike); the best of
// b.N each.
func BenchmarkExpertKernel(b *testing.B) {
	const E, rows, cols, K = 16, 768, 2048, 8
	dev := nativetest.Device(b)
	r := rnd(5)
	var bank []byte
	stride := 0
	for range E {
		raw, _ := quant.Quantize(quant.Q4, r.fill(rows*cols, 0.05), rows, cols)
		stride = (len(raw) + 3) / 4 * 4
		bank = append(bank, raw...)
		bank = append(bank, make([]byte, stride-len(raw))...)
	}
	route := []uint32{0, 2, 4, 6, 8, 10, 12, 14}
	base, _ := Piece{Rows: rows, Cols: cols, Format: shaders.Q4}.scaleBase()
	y := buf(b, dev, make([]float32, K*rows))
	bufs := []gpu.Buffer{buf(b, dev, bank), buf(b, dev, r.fill(cols, 1)), y, 0,
		buf(b, dev, params(rows, cols, cols/32, base, rows, 0, 0, 0, 0, 0, E, stride/4, K, 0)), buf(b, dev, route)}
	kernels := []struct {
		entry    string
		perGroup int
		pipe     gpu.Pipeline
		group    gpu.BindGroup
		best     time.Duration
	}{{entry: "expert", perGroup: shaders.MatmulVariant{}.Rows(), best: time.Hour}, {entry: "expert4", perGroup: shaders.MatmulVariant{}.Rows4(), best: time.Hour}}
	for i := range kernels {
		kernels[i].pipe, kernels[i].group = bound(b, dev, shaders.Matmul(shaders.Q4, shaders.MatmulVariant{}), kernels[i].entry, bufs)
	}
	for i := 0; i <= b.N; i++ {
		for j, k := range kernels {
			d := timed(b, dev, k.pipe, k.group, y, ceilDiv(rows, k.perGroup), K, 1)
			if i > 0 { // not the first, which runs each kernel cold
				kernels[j].best = min(k.best, d)
			}
		}
	}
	for _, k := range kernels {
		b.ReportMetric(k.best.Seconds()*1e3, k.entry+"-ms")
	}
}

// BenchmarkA8Kernel times a product with float32 activations (rows4 at T
// = 1, rows4x8 at T = 32: float-ms) against the same with 8-bit ones:
// elementwise.wgsl's quantize then a8rows4 or a8rows4x8 (a8-ms), and the product alone
// (a8-product-ms), at Qwen2.5-0.5B's MLP up and down shapes in q8 and q4,
// each in turn in each iteration; the best of b.N each.
func BenchmarkA8Kernel(b *testing.B) {
	dev := nativetest.Device(b)
	for _, shape := range [][2]int{{4864, 896}, {896, 4864}} {
		for _, f := range []shaders.Format{shaders.Q8, shaders.Q4} {
			for _, T := range []int{1, 32} {
				rows, cols := shape[0], shape[1]
				b.Run(fmt.Sprintf("%dx%d/%s/T%d", rows, cols, f, T), func(b *testing.B) {
					r := rnd(1)
					raw, _ := quant.Quantize(quant.Scheme(f.String()), r.fill(rows*cols, 0.05), rows, cols)
					base, _ := Piece{Rows: rows, Cols: cols, Format: f}.scaleBase()
					x, y, xq, xd := buf(b, dev, r.fill(T*cols, 1)), buf(b, dev, make([]float32, T*rows)), buf(b, dev, make([]uint32, T*cols/2)), buf(b, dev, make([]float32, T*cols/16))
					p := buf(b, dev, params(rows, cols, cols/32, base, rows, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, T))
					src := shaders.Matmul(f, shaders.MatmulVariant{})
					entry, entryA8 := "rows4", "a8rows4"
					z := uint32(T)
					if T > 1 {
						entry, entryA8, z = "rows4x8", "a8rows4x8", ceilDiv(T, shaders.MatmulTokens)
					}
					wb := buf(b, dev, raw)
					fp, fg := bound(b, dev, src, entry, []gpu.Buffer{wb, x, y, buf(b, dev, make([]float32, rows)), p})
					ap, ag := bound(b, dev, src, entryA8, []gpu.Buffer{wb, 0, y, buf(b, dev, make([]float32, rows)), p, 0, 0, 0, xq, xd})
					qp, qg := bound(b, dev, shaders.Elementwise(), "quantize", []gpu.Buffer{x, 0, buf(b, dev, params(T*cols, 0, cols, 0)), 0, xq, xd})
					groups := ceilDiv(rows, shaders.MatmulVariant{}.Rows4())
					best := [3]time.Duration{time.Hour, time.Hour, time.Hour}
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						best[0] = min(best[0], timed(b, dev, fp, fg, y, groups, 1, z))
						t0 := time.Now()
						if err := dev.Dispatch(qp, []gpu.BindGroup{qg}, ceilDiv(T*cols/32, shaders.Workgroup), 1, 1); err != nil {
							b.Fatal(err)
						}
						timed(b, dev, ap, ag, y, groups, 1, z)
						best[1] = min(best[1], time.Since(t0))
						best[2] = min(best[2], timed(b, dev, ap, ag, y, groups, 1, z))
					}
					for k, name := range []string{"float-ms", "a8-ms", "a8-product-ms"} {
						b.ReportMetric(float64(best[k].Microseconds())/1e3, name)
					}
				})
			}
		}
	}
}

// BenchmarkWorkgroupSizes times what chooseSizes times at open (on real
// GPUs; here it is made to on any adapter): a decode-shaped (T = 1) and a
// prefill-shaped (T = MaxChunk) product at Qwen2.5-0.5B's MLP up shape
// in q4 and q8, with float32 and 8-bit activations, through the entry
// points the engine takes on this device, at every workgroup size: the
// best of tuneReps each (wg<size>-decode-ms, wg<size>-prefill-ms), and the
// sizes it would choose.
func BenchmarkWorkgroupSizes(b *testing.B) {
	dev := nativetest.Device(b)
	const rows, cols = 4864, 896
	for _, vname := range []string{"q8", "q4", "q8+a8", "q4+a8"} {
		b.Run(vname, func(b *testing.B) {
			scheme, a8 := strings.CutSuffix(vname, "+a8")
			raw, _ := quant.Quantize(quant.Scheme(scheme), make([]float32, rows*cols), rows, cols)
			w := Piece{Rows: rows, Cols: cols, Format: map[string]shaders.Format{"q8": shaders.Q8, "q4": shaders.Q4}[scheme], Length: int64(len(raw))}
			src := pieceSource{pieces: map[string][]Piece{model.NamesOf(0).Wup: {w}}}
			var t timings
			for i := 0; i < b.N; i++ {
				e := &State{dev: dev, pipes: map[string]gpu.Pipeline{}, maxPiece: 1 << 30, acts8: a8, chunk: MaxChunk}
				var err error
				if t, err = e.chooseSizes(Options{Tune: true}, src); err != nil {
					b.Fatal(err)
				}
			}
			for i, wg := range workgroupSizes {
				b.ReportMetric(t.decode[i].Seconds()*1e3, fmt.Sprintf("wg%d-decode-ms", wg))
				b.ReportMetric(t.prefill[i].Seconds()*1e3, fmt.Sprintf("wg%d-prefill-ms", wg))
			}
			best := t.best()
			b.ReportMetric(float64(best.decode), "wg-decode")
			b.ReportMetric(float64(best.prefill), "wg-prefill")
		})
	}
}
