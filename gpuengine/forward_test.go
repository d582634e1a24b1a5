package gpuengine

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"logitscope/checkpoint"
	"logitscope/cpu"
	"logitscope/generate"
	"logitscope/model"
	"logitscope/quant"
	"logitscope/synth"
	"logitscope/variant"
)

// ForwardTolerance is how far the GPU's logits may be from the CPU
// engine's for the same variant, relative to the largest |logit| of the
// row: both accumulate in float32, in different orders.
const ForwardTolerance = 1e-4

// bothEngines builds the CPU and the GPU engine for a variant ("f32" or a
// scheme) of a synthetic preset. Variants are written with small shards
// and the checkpoint uploaded in small pieces, so every matrix takes the
// split-tensor path.
func bothEngines(t *testing.T, p synth.Preset, scheme string, capacity int) (*cpu.State, *Engine) {
	t.Helper()
	dev := device(t)
	dir := filepath.Join(t.TempDir(), p.Name)
	if err := synth.Write(p, dir, synth.Options{Seed: 3}); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	var m *model.Model
	src := CheckpointSource(ck)
	if scheme == "f32" {
		m, err = model.Load(ck, nil)
	} else {
		vdir := filepath.Join(dir, "variants", scheme)
		if err := variant.Write(ck, quant.Scheme(scheme), vdir, variant.Options{MaxShardBytes: 16 << 10}); err != nil {
			t.Fatal(err)
		}
		v, err := variant.Open(vdir)
		if err != nil {
			t.Fatal(err)
		}
		m, err = model.LoadWeights(ck, v, nil)
		if err != nil {
			t.Fatal(err)
		}
		src = VariantSource(v)
	}
	if err != nil {
		t.Fatal(err)
	}
	c, err := cpu.New(m, capacity)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(dev, m.Geometry, src, Options{Capacity: capacity, MaxPieceBytes: 16 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return c, g
}

func presets() []synth.Preset {
	big := synth.Presets["qwen2.5-0.5b"]
	big.Name, big.Layers, big.Vocab, big.SpecialBase = "qwen2.5-0.5b-2layer", 2, 0, 0
	return []synth.Preset{synth.Presets["tiny"], synth.Presets["tiny-llama"], big}
}

// On every variant, teacher-forced logits (40 tokens: a 32-token chunk and
// an 8-token one) match the CPU engine's, and greedy decoding picks the
// same tokens.
func TestForwardMatchesCPU(t *testing.T) {
	for _, p := range presets() {
		for _, scheme := range []string{"f32", "q8", "q6", "q4"} {
			if p.Hidden > 64 && (scheme == "q8" || scheme == "q6") {
				continue // the wide geometry runs f32 and q4 only, for time
			}
			t.Run(p.Name+"/"+scheme, func(t *testing.T) {
				c, g := bothEngines(t, p, scheme, 64)
				ids := make([]int, 40)
				for i := range ids {
					ids[i] = (i*7919 + 13) % 300
				}
				want, err := c.Forward(ids, true)
				if err != nil {
					t.Fatal(err)
				}
				got, err := g.Forward(ids, true)
				if err != nil {
					t.Fatal(err)
				}
				worst, rel := 0.0, 0.0
				for i := range want {
					var top, diff float64
					for j := range want[i] {
						top = max(top, math.Abs(float64(want[i][j])))
						diff = max(diff, math.Abs(float64(got[i][j]-want[i][j])))
					}
					worst, rel = max(worst, diff), max(rel, diff/top)
				}
				t.Logf("%s %s: max |GPU − CPU| %.2e logits (%.2e of the row's largest)", p.Name, scheme, worst, rel)
				if rel > ForwardTolerance {
					t.Fatalf("GPU logits differ from the CPU engine's by %g (relative %g)", worst, rel)
				}

				c.Reset()
				g.Reset()
				prompt := ids[:10]
				a, err := generate.Greedy(c, prompt, 12, nil)
				if err != nil {
					t.Fatal(err)
				}
				b, err := generate.Greedy(g, prompt, 12, nil)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(a.Output, b.Output) {
					t.Fatalf("greedy tokens differ:\n cpu %v\n gpu %v", a.Output, b.Output)
				}
			})
		}
	}
}

func TestForwardErrors(t *testing.T) {
	_, g := bothEngines(t, synth.Presets["tiny"], "f32", 4)
	for _, c := range []struct {
		ids  []int
		want string
	}{
		{[]int{1, 2, 3, 4, 5}, "5 tokens exceed the KV cache of 4"},
		{[]int{1, 512}, "token id 512 at position 1 is outside the vocabulary of 512"},
	} {
		if _, err := g.Forward(c.ids, false); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("err = %v, want %q", err, c.want)
		}
	}
}

// Upload progress ends exactly at its total, so the terminal line closes.
func TestUploadProgress(t *testing.T) {
	for _, p := range presets()[:2] {
		dev := device(t)
		dir := filepath.Join(t.TempDir(), p.Name)
		if err := synth.Write(p, dir, synth.Options{}); err != nil {
			t.Fatal(err)
		}
		ck, err := checkpoint.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		g, _ := model.GeometryOf(ck.Config)
		var last, total int64
		e, err := New(dev, g, CheckpointSource(ck), Options{Capacity: 4, Progress: func(d, n int64) { last, total = d, n }})
		if err != nil {
			t.Fatal(err)
		}
		e.Close()
		if last != total || total != int64(len(g.Specs())) {
			t.Errorf("%s: progress ended at %d of %d, want %d of %d", p.Name, last, total, len(g.Specs()), len(g.Specs()))
		}
	}
}

// The split step: Submit names the region, the host reads it, Rows decodes
// it; a prefill chunk without read names no region; a step larger than the
// chunk is refused.
func TestSubmitRegion(t *testing.T) {
	c, g := bothEngines(t, synth.Presets["tiny"], "q4", 40)
	ids := []int{5, 6, 7, 8}
	want, err := c.Forward(ids, true)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := g.Submit(ids[:2], false, false); err != nil || r.Rows != 0 {
		t.Fatalf("unread prefill chunk: %+v, %v", r, err)
	}
	r, err := g.Submit(ids[2:], true, true)
	if err != nil || r.Rows != 2 || r.Size != int64(2*512*4) {
		t.Fatalf("region %+v, %v", r, err)
	}
	raw, err := device(t).ReadBuffer(r.Buffer, r.Offset, r.Size)
	if err != nil {
		t.Fatal(err)
	}
	got := Rows(raw, r.Rows, 512)
	for i, row := range got {
		for j := range row {
			if math.Abs(float64(row[j]-want[2+i][j])) > 1e-3 {
				t.Fatalf("row %d token %d: %g, CPU %g", i, j, row[j], want[2+i][j])
			}
		}
	}
	if _, err := g.Submit(make([]int, g.Chunk()+1), false, true); err == nil || !strings.Contains(err.Error(), "the engine's chunk is 32") {
		t.Fatalf("oversized step: %v", err)
	}
}
