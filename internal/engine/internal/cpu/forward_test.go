package cpu

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/model"
	"logitscope/internal/model/synth"
)

// load writes a synthetic checkpoint of preset p and loads it.
func load(t testing.TB, p synth.Preset) *model.Model {
	t.Helper()
	dir := filepath.Join(t.TempDir(), p.Name)
	if err := synth.Write(p, dir, synth.Options{Seed: 7}); err != nil {
		t.Fatal(err)
	}
	m, err := model.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// architectures: the tiny preset of every family, then the qwen2.5-0.5b,
// qwen3-0.6b and gemma-3-1b geometries with two layers.
func architectures() []synth.Preset {
	return append(synth.Tiny(), synth.TwoLayer("qwen2.5-0.5b"), synth.TwoLayer("qwen3-0.6b"), synth.TwoLayer("gemma-3-1b"))
}

func sequence(n, vocab int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (i*7919 + 13) % (vocab - 3) // skip the special tokens at the end
	}
	return ids
}

// KV-cache decode must give the same rows as teacher forcing of the same
// sequence. Both paths share every kernel and each output element is
// computed in the same order, so the documented tolerance is exact
// equality; the test reports the difference it saw.
func TestKVCacheMatchesTeacherForcing(t *testing.T) {
	for _, p := range architectures() {
		t.Run(p.Name, func(t *testing.T) {
			m := load(t, p)
			ids := sequence(24, m.Vocab)
			tf, _ := New(m, len(ids))
			full, err := tf.Forward(ids, true)
			if err != nil {
				t.Fatal(err)
			}
			kv, _ := New(m, len(ids))
			// A prefill of 2 tokens without logits and 3 with, then one
			// token at a time.
			if err := kv.Append(ids[:2]); err != nil {
				t.Fatal(err)
			}
			rows, err := kv.Forward(ids[2:5], true)
			if err != nil {
				t.Fatal(err)
			}
			full = full[2:]
			for _, id := range ids[5:] {
				r, err := kv.Forward([]int{id}, false)
				if err != nil {
					t.Fatal(err)
				}
				rows = append(rows, r...)
			}
			var worst float64
			for i := range full {
				for j := range full[i] {
					worst = max(worst, math.Abs(float64(full[i][j]-rows[i][j])))
				}
			}
			t.Logf("%s: max |KV decode - teacher forced| over %d rows × %d vocab = %g", p.Name, len(rows), m.Vocab, worst)
			if worst != 0 {
				t.Fatalf("KV-cache rows differ from teacher-forced rows by %g", worst)
			}
		})
	}
}

// The fast path against a literal float64 transcription of
// transformers' modeling_qwen2.py / modeling_qwen3.py / modeling_llama.py
// (naive_test.go), on the tiny presets.
func TestForwardMatchesNaiveReference(t *testing.T) {
	for _, p := range synth.Tiny() {
		t.Run(p.Name, func(t *testing.T) {
			m := load(t, p)
			ids := sequence(12, m.Vocab)
			s, _ := New(m, len(ids))
			got, err := s.Forward(ids, true)
			if err != nil {
				t.Fatal(err)
			}
			worst, scale, ok := nearReference(got, naiveForward(m, ids))
			t.Logf("max abs error %.2e (logits up to %.1f)", worst, scale)
			if !ok {
				t.Fatalf("float32 forward differs from the float64 reference by %g", worst)
			}
		})
	}
}

// nearReference is the largest |got − want| and |want|, and whether the
// first is within the reference tolerance: 1e-4 of the largest logit.
func nearReference(got [][]float32, want [][]float64) (worst, scale float64, ok bool) {
	for i := range want {
		for j := range want[i] {
			worst = max(worst, math.Abs(float64(got[i][j])-want[i][j]))
			scale = max(scale, math.Abs(want[i][j]))
		}
	}
	return worst, scale, worst <= 1e-4*max(1, scale)
}

// The reference check would catch an engine that ignored a feature: with
// the feature taken out of the model, the CPU engine lands far from the
// reference that has it. tiny-mistral's 12-token sequence outruns its
// window of 8.
func TestFeaturesMatter(t *testing.T) {
	for _, c := range []struct {
		preset string
		check  func(m *model.Model) bool // the preset loaded with the feature
		remove func(m *model.Model)
	}{
		{"tiny-llama3", func(m *model.Model) bool { return m.Rope.Type == "llama3" }, func(m *model.Model) { m.Rope = model.RopeScaling{} }},
		{"tiny-mistral", func(m *model.Model) bool { return m.Window[0] == 8 && m.Window[1] == 8 }, func(m *model.Model) { m.Window = nil }},
		{"tiny-qwen3-moe", func(m *model.Model) bool { return m.NormTopK }, func(m *model.Model) { m.NormTopK = false }},
		{"tiny-qwen2-moe", func(m *model.Model) bool { return m.Layers[1].Shared != nil }, func(m *model.Model) { m.Layers[1].Shared = nil }},
		// GLM-4.5: each of partial rotary, the score bias, the groups, the
		// scaling factor and the shared experts moves the logits.
		{"tiny-glm4-moe", func(m *model.Model) bool { return m.RotaryDim == m.HeadDim/2 }, func(m *model.Model) { m.RotaryDim = 0 }},
		{"tiny-glm4-moe", func(m *model.Model) bool { return m.Layers[1].ScoreBias != nil }, func(m *model.Model) {
			for l := range m.Layers {
				clear(m.Layers[l].ScoreBias)
			}
		}},
		{"tiny-glm4-moe", func(m *model.Model) bool { return m.TopKGroup < m.Groups }, func(m *model.Model) { m.TopKGroup = m.Groups }},
		{"tiny-glm4-moe", func(m *model.Model) bool { return m.RoutedScale == 2.5 }, func(m *model.Model) { m.RoutedScale = 1 }},
		{"tiny-glm4-moe", func(m *model.Model) bool { return m.NormTopK }, func(m *model.Model) { m.NormTopK = false }},
		{"tiny-glm4-moe", func(m *model.Model) bool { return m.Layers[2].Shared != nil && m.Layers[2].SharedGate == nil },
			func(m *model.Model) { m.Layers[1].Shared, m.Layers[2].Shared = nil, nil }},
	} {
		t.Run(c.preset, func(t *testing.T) {
			m := load(t, synth.Presets[c.preset])
			if !c.check(m) {
				t.Fatalf("%s loaded without its feature: %+v", c.preset, m.Geometry)
			}
			ids := sequence(12, m.Vocab)
			want := naiveForward(m, ids)
			c.remove(m)
			s, _ := New(m, len(ids))
			got, err := s.Forward(ids, true)
			if err != nil {
				t.Fatal(err)
			}
			worst, scale, ok := nearReference(got, want)
			t.Logf("without the feature: max abs %.2e (logits up to %.1f)", worst, scale)
			if ok {
				t.Fatalf("taking the feature out moves logits by only %g: the reference check could not tell", worst)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	m := load(t, synth.Presets["tiny"])
	cases := []struct {
		name string
		run  func() error
		want string
	}{
		{"context", func() error { _, err := New(m, m.MaxPos+1); return err }, "exceed the model's context of 4096"},
		{"cache full", func() error {
			s, _ := New(m, 2)
			_, err := s.Forward([]int{1, 2, 3}, false)
			return err
		}, "3 tokens exceed the KV cache of 2"},
		{"bad id", func() error {
			s, _ := New(m, 4)
			_, err := s.Forward([]int{1, m.Vocab}, false)
			return err
		}, fmt.Sprintf("token id %d at position 1 is outside the vocabulary", m.Vocab)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.run(); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}
