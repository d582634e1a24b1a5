package model

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/routing"
	"logitscope/internal/format/safetensors"
	"logitscope/internal/model/synth"
)

func TestGeometryOf(t *testing.T) {
	yes, half, four := true, 0.5, 4
	cases := []struct {
		name    string
		cfg     checkpoint.Config
		qkv, ob bool
		err     string
	}{
		{"qwen2", checkpoint.Config{Architectures: []string{"Qwen2ForCausalLM"}}, true, false, ""},
		{"llama", checkpoint.Config{Architectures: []string{"LlamaForCausalLM"}}, false, false, ""},
		{"llama bias", checkpoint.Config{Architectures: []string{"LlamaForCausalLM"}, AttentionBias: &yes}, true, true, ""},
		{"mamba", checkpoint.Config{Architectures: []string{"MambaForCausalLM"}}, false, false, `architecture "MambaForCausalLM" is not supported`},
		{"llama3 rope", checkpoint.Config{Architectures: []string{"LlamaForCausalLM"}, RopeScaling: []byte(llama32Rope)}, false, false, ""},
		{"llama3 rope without factor", checkpoint.Config{Architectures: []string{"LlamaForCausalLM"}, RopeScaling: []byte(`{"rope_type":"llama3"}`)}, false, false, `rope_scaling {"rope_type":"llama3"}: factor must be a positive number`},
		{"llama3 rope inverted", checkpoint.Config{Architectures: []string{"LlamaForCausalLM"}, RopeScaling: []byte(`{"rope_type":"llama3","factor":8,"low_freq_factor":4,"high_freq_factor":1,"original_max_position_embeddings":8192}`)}, false, false, "high_freq_factor must exceed"},
		{"yarn", checkpoint.Config{Architectures: []string{"Qwen2ForCausalLM"}, RopeScaling: []byte(`{"type":"yarn","factor":4}`)}, false, false, `rope_scaling type "yarn" is not supported`},
		{"sliding window without size", checkpoint.Config{Architectures: []string{"Qwen2ForCausalLM"}, UseSlidingWindow: &yes}, false, false, "sliding_window null: a sliding window needs a size"},
		{"sliding layer without window", checkpoint.Config{Architectures: []string{"Qwen2ForCausalLM"}, NumHiddenLayers: 2, LayerTypes: []string{"full_attention", "sliding_attention"}}, false, false, "layer_types[1] is sliding_attention but the config sets no sliding window"},
		{"chunked layer", checkpoint.Config{Architectures: []string{"MistralForCausalLM"}, NumHiddenLayers: 1, SlidingWindow: &four, LayerTypes: []string{"chunked_attention"}}, false, false, `layer_types[0] "chunked_attention" is not supported`},
		{"layer types short", checkpoint.Config{Architectures: []string{"MistralForCausalLM"}, NumHiddenLayers: 2, LayerTypes: []string{"full_attention"}}, false, false, "layer_types has 1 entries for 2 layers"},
		{"partial rotary", checkpoint.Config{Architectures: []string{"LlamaForCausalLM"}, PartialRotaryFactor: &half}, false, false, "partial_rotary_factor 0.5"},
		{"gptq", checkpoint.Config{Architectures: []string{"LlamaForCausalLM"}, QuantizationConfig: []byte(`{"quant_method":"gptq","bits":4}`)}, false, false, `quantization_config (quant_method "gptq")`},
		{"gelu", checkpoint.Config{Architectures: []string{"LlamaForCausalLM"}, HiddenAct: "gelu"}, false, false, `hidden_act "gelu"`},
	}
	// Llama reads mlp_bias; Qwen2's modeling has no such field and ignores
	// it, as transformers does.
	for arch, want := range map[string]bool{"LlamaForCausalLM": true, "Qwen2ForCausalLM": false} {
		if g, err := GeometryOf(checkpoint.Config{Architectures: []string{arch}, MLPBias: &yes}); err != nil || g.MLPBias != want {
			t.Errorf("%s with mlp_bias: MLPBias %v, %v; want %v", arch, g.MLPBias, err, want)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := GeometryOf(c.cfg)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || g.QKVBias != c.qkv || g.OBias != c.ob {
				t.Fatalf("got qkv %v o %v err %v", g.QKVBias, g.OBias, err)
			}
		})
	}
}

// Qwen3: q/k norm always, attention_bias on q/k/v and o, and sliding
// windows derived as configuration_qwen3.py does (as Qwen2's).
func TestGeometryOfQwen3(t *testing.T) {
	yes, no, one, eight := true, false, 1, 8
	qwen3 := func(edit func(*checkpoint.Config)) checkpoint.Config {
		c := checkpoint.Config{Architectures: []string{"Qwen3ForCausalLM"}, NumHiddenLayers: 2}
		if edit != nil {
			edit(&c)
		}
		return c
	}
	cases := []struct {
		name   string
		cfg    checkpoint.Config
		bias   bool  // q/k/v and o biases
		window []int // per layer
		err    string
	}{
		{"default", qwen3(nil), false, []int{0, 0}, ""},
		{"attention_bias", qwen3(func(c *checkpoint.Config) { c.AttentionBias = &yes }), true, []int{0, 0}, ""},
		{"full layer_types", qwen3(func(c *checkpoint.Config) { c.LayerTypes = []string{"full_attention", "full_attention"} }), false, []int{0, 0}, ""},
		{"window without use_sliding_window", qwen3(func(c *checkpoint.Config) {
			c.UseSlidingWindow, c.SlidingWindow, c.MaxWindowLayers = &no, &eight, &one
		}), false, []int{0, 0}, ""},
		{"use_sliding_window from max_window_layers", qwen3(func(c *checkpoint.Config) {
			c.UseSlidingWindow, c.SlidingWindow, c.MaxWindowLayers = &yes, &eight, &one
		}), false, []int{0, 8}, ""},
		{"max_window_layers defaults to 28", qwen3(func(c *checkpoint.Config) { c.UseSlidingWindow, c.SlidingWindow = &yes, &eight }), false, []int{0, 0}, ""},
		{"sliding layer without window", qwen3(func(c *checkpoint.Config) { c.LayerTypes = []string{"full_attention", "sliding_attention"} }), false, nil,
			"layer_types[1] is sliding_attention but the config sets no sliding window"},
		{"layer_types count", qwen3(func(c *checkpoint.Config) { c.LayerTypes = []string{"full_attention"} }), false, nil,
			"layer_types has 1 entries for 2 layers"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g, err := GeometryOf(c.cfg)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || !g.QKNorm || g.QKVBias != c.bias || g.OBias != c.bias || !slices.Equal(g.Window, c.window) {
				t.Fatalf("got qk norm %v, qkv bias %v, o bias %v, window %v, err %v", g.QKNorm, g.QKVBias, g.OBias, g.Window, err)
			}
		})
	}
}

// rewrite writes a tiny checkpoint whose tensors have been changed by fn.
func rewrite(t *testing.T, preset string, fn func([]safetensors.Tensor) []safetensors.Tensor) string {
	dir := filepath.Join(t.TempDir(), preset)
	if err := synth.Write(synth.Presets[preset], dir, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "model.safetensors")
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for _, n := range f.Names() {
		info, _ := f.Info(n)
		raw, err := f.ReadRaw(n)
		if err != nil {
			t.Fatal(err)
		}
		ts = append(ts, safetensors.Tensor{Name: n, DType: info.DType, Shape: info.Shape, Data: raw})
	}
	f.Close()
	if err := safetensors.WriteFile(path, fn(ts), nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestLoadErrors(t *testing.T) {
	drop := func(name string) func([]safetensors.Tensor) []safetensors.Tensor {
		return func(ts []safetensors.Tensor) []safetensors.Tensor {
			out := ts[:0]
			for _, x := range ts {
				if x.Name != name {
					out = append(out, x)
				}
			}
			return out
		}
	}
	extra := func(name string) func([]safetensors.Tensor) []safetensors.Tensor {
		return func(ts []safetensors.Tensor) []safetensors.Tensor {
			return append(ts, safetensors.Tensor{Name: name, DType: safetensors.F32, Shape: []int{64}, Data: make([]byte, 256)})
		}
	}
	// truncate keeps the first n values of a vector.
	truncate := func(name string, n int) func([]safetensors.Tensor) []safetensors.Tensor {
		return func(ts []safetensors.Tensor) []safetensors.Tensor {
			for i, x := range ts {
				if x.Name == name {
					ts[i].Shape, ts[i].Data = []int{n}, x.Data[:n*x.DType.Size()]
				}
			}
			return ts
		}
	}
	cases := []struct {
		name, preset string
		fn           func([]safetensors.Tensor) []safetensors.Tensor
		want         string
	}{
		{"missing bias", "tiny", drop("model.layers.1.self_attn.k_proj.bias"), "missing tensor model.layers.1.self_attn.k_proj.bias"},
		{"missing head", "tiny-llama", drop("lm_head.weight"), "missing tensor lm_head.weight"},
		{"mlp bias ignored", "tiny-llama", extra("model.layers.0.mlp.down_proj.bias"), "1 tensors the LlamaForCausalLM forward pass would ignore, e.g. model.layers.0.mlp.down_proj.bias"},
		{"old rotary buffer is fine", "tiny", extra("model.layers.0.self_attn.rotary_emb.inv_freq"), ""},
		{"tied checkpoint with a head copy is fine", "tiny", extra("lm_head.weight"), ""},
		{"missing k_norm", "tiny-qwen3", drop("model.layers.1.self_attn.k_norm.weight"), "missing tensor model.layers.1.self_attn.k_norm.weight"},
		// hidden/heads (16) is not Qwen3's head_dim (32).
		{"q_norm over hidden/heads", "tiny-qwen3", truncate("model.layers.0.self_attn.q_norm.weight", 16),
			"tensor model.layers.0.self_attn.q_norm.weight has shape [16], config.json implies [32]"},
		{"q_norm ignored by Qwen2", "tiny", extra("model.layers.0.self_attn.q_norm.weight"),
			"1 tensors the Qwen2ForCausalLM forward pass would ignore, e.g. model.layers.0.self_attn.q_norm.weight"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := rewrite(t, c.preset, c.fn)
			ck, err := checkpoint.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			_, err = Load(ck, nil)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), dir) {
				t.Fatalf("err = %v, want it to name %s and say %q", err, dir, c.want)
			}
		})
	}
}

// A Qwen3 checkpoint loads every layer's q/k norm weights (hd,), with
// heads*hd wider than the hidden size.
func TestLoadQwen3(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny-qwen3")
	if err := synth.Write(synth.Presets["tiny-qwen3"], dir, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	m, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.HeadDim != 32 || m.Heads*m.HeadDim == m.Dim || m.Layers[0].Wq.Rows != m.Heads*m.HeadDim || m.Layers[0].Wo.Cols != m.Heads*m.HeadDim {
		t.Fatalf("geometry %+v, wq %dx%d", m.Geometry, m.Layers[0].Wq.Rows, m.Layers[0].Wq.Cols)
	}
	for i, L := range m.Layers {
		if len(L.QNorm) != m.HeadDim || len(L.KNorm) != m.HeadDim || L.Bq != nil || L.Bo != nil {
			t.Errorf("layer %d: q_norm %d, k_norm %d values, q bias %v, o bias %v", i, len(L.QNorm), len(L.KNorm), L.Bq != nil, L.Bo != nil)
		}
	}
}

func TestLoadTiedAndUntied(t *testing.T) {
	for preset, tied := range map[string]bool{"tiny": true, "tiny-llama": false} {
		dir := filepath.Join(t.TempDir(), preset)
		if err := synth.Write(synth.Presets[preset], dir, synth.Options{}); err != nil {
			t.Fatal(err)
		}
		ck, err := checkpoint.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		m, err := Load(ck, nil)
		ck.Close()
		if err != nil {
			t.Fatal(err)
		}
		if (m.Head == m.Embed) != tied {
			t.Errorf("%s: head shared with embedding = %v, want %v", preset, m.Head == m.Embed, tied)
		}
		if m.Layers[0].Bq == nil != !tied { // the Qwen2 preset has q/k/v biases, the Llama one none
			t.Errorf("%s: q bias presence wrong", preset)
		}
	}
}

// failsFast runs fn and requires it to fail within a second without
// allocating more than 64 MiB, with an error containing want.
func failsFast(t *testing.T, want string, fn func() error) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	err := fn()
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want it to say %q", err, want)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; elapsed > time.Second || alloc > 64<<20 {
		t.Fatalf("failing took %v and %d MiB, want under a second and 64 MiB", elapsed, alloc>>20)
	}
}

// A config that claims more layers than the weights hold must be refused
// before anything is sized by the claim: a billion layers once grew memory
// past 2 GB in 18 s while their tensor names were enumerated.
func TestHugeLayerCountFailsFast(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(synth.Presets["tiny"], dir, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	g, err := GeometryOf(ck.Config)
	if err != nil {
		t.Fatal(err)
	}
	// Check takes any Geometry, not only one from a bounded config.json.
	for _, layers := range []int{1_000_000_000, checkpoint.MaxLayers, 3, 1} {
		t.Run(fmt.Sprint(layers), func(t *testing.T) {
			g := g
			g.NumLayers = layers
			want := fmt.Sprintf("%s: config.json: num_hidden_layers %d, but the weights hold 2 layers", dir, layers)
			failsFast(t, want, func() error { return Check(dir, g, CheckpointWeights(ck)) })
		})
	}

	cfg := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	huge := regexp.MustCompile(`"num_hidden_layers": *2`).ReplaceAll(data, []byte(`"num_hidden_layers": 1000000000`))
	if bytes.Equal(huge, data) {
		t.Fatal("synth's config.json has no num_hidden_layers 2 to replace")
	}
	if err := os.WriteFile(cfg, huge, 0o644); err != nil {
		t.Fatal(err)
	}
	failsFast(t, cfg+": num_hidden_layers 1000000000: more than 4096", func() error {
		_, err := Open(dir)
		return err
	})
}

// Llama 3.2's rope_scaling, as its config.json writes it.
const llama32Rope = `{"factor": 32.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"}`

// llama3InvFreq64 is transformers' _compute_llama3_parameters in float64.
func llama3InvFreq64(theta float64, hd int, factor, low, high float64, old int) []float64 {
	out := make([]float64, hd/2)
	lowWavelen, highWavelen := float64(old)/low, float64(old)/high
	for i := range out {
		f := 1 / math.Pow(theta, float64(2*i)/float64(hd))
		wavelen := 2 * math.Pi / f
		switch {
		case wavelen < highWavelen:
			out[i] = f
		case wavelen > lowWavelen:
			out[i] = f / factor
		default:
			s := (float64(old)/wavelen - low) / (high - low)
			out[i] = (1-s)*f/factor + s*f
		}
	}
	return out
}

// Llama 3.2 1B's frequencies (θ 5e5, head_dim 64) against the float64
// formula: the short wavelengths kept, the long ones divided by 32, and
// the medium ones between; linear scaling divides them all.
func TestInvFreqScaling(t *testing.T) {
	g, err := GeometryOf(checkpoint.Config{Architectures: []string{"LlamaForCausalLM"}, RopeScaling: []byte(llama32Rope)})
	if err != nil {
		t.Fatal(err)
	}
	g.RopeTheta, g.HeadDim = 5e5, 64
	plain := g
	plain.Rope = RopeScaling{}
	got, base := g.InvFreq(), plain.InvFreq()
	want := llama3InvFreq64(5e5, 64, 32, 1, 4, 8192)
	kept, divided, mixed := 0, 0, 0
	for i := range got {
		if d := math.Abs(float64(got[i])-want[i]) / want[i]; d > 1e-6 {
			t.Errorf("inv_freq[%d] = %g, want %g (relative error %.1e)", i, got[i], want[i], d)
		}
		switch {
		case got[i] == base[i]:
			kept++
		case got[i] == base[i]/32:
			divided++
		default:
			mixed++
		}
	}
	if kept == 0 || divided == 0 || mixed == 0 {
		t.Errorf("regimes: %d kept, %d divided, %d mixed; want each", kept, divided, mixed)
	}
	g.Rope = RopeScaling{Type: "linear", Factor: 4}
	for i, f := range g.InvFreq() {
		if f != base[i]/4 {
			t.Fatalf("linear: inv_freq[%d] = %g, want %g", i, f, base[i]/4)
		}
	}
}

// Each layer's window as transformers derives it from the config.
func TestWindows(t *testing.T) {
	yes, no, w, one := true, false, 4096, 1
	qwen := func(use *bool, maxWindow *int, types []string) checkpoint.Config {
		return checkpoint.Config{Architectures: []string{"Qwen2ForCausalLM"}, NumHiddenLayers: 3, SlidingWindow: &w,
			UseSlidingWindow: use, MaxWindowLayers: maxWindow, LayerTypes: types}
	}
	for _, c := range []struct {
		name string
		cfg  checkpoint.Config
		want []int
	}{
		// Qwen2.5's configs: sliding_window set, use_sliding_window false.
		{"qwen2 off", qwen(&no, &one, nil), []int{0, 0, 0}},
		{"qwen2 from max_window_layers", qwen(&yes, &one, nil), []int{0, w, w}},
		{"qwen2 default max_window_layers 28", qwen(&yes, nil, nil), []int{0, 0, 0}},
		{"qwen2 layer_types", qwen(&yes, &one, []string{"sliding_attention", "full_attention", "full_attention"}), []int{w, 0, 0}},
		{"mistral", checkpoint.Config{Architectures: []string{"MistralForCausalLM"}, NumHiddenLayers: 2, SlidingWindow: &w}, []int{w, w}},
		{"mistral null window", checkpoint.Config{Architectures: []string{"MistralForCausalLM"}, NumHiddenLayers: 2}, []int{0, 0}},
		{"llama never slides", checkpoint.Config{Architectures: []string{"LlamaForCausalLM"}, NumHiddenLayers: 2, SlidingWindow: &w}, []int{0, 0}},
		// Qwen3-MoE slides on every layer; Qwen2-MoE on i < max_window_layers
		// with i+1 odd (configuration_qwen2_moe.py, v5).
		{"qwen3-moe", checkpoint.Config{Architectures: []string{"Qwen3MoeForCausalLM"}, NumHiddenLayers: 3, SlidingWindow: &w, UseSlidingWindow: &yes, MaxWindowLayers: &one}, []int{w, w, w}},
		{"qwen3-moe off", checkpoint.Config{Architectures: []string{"Qwen3MoeForCausalLM"}, NumHiddenLayers: 3, SlidingWindow: &w}, []int{0, 0, 0}},
		{"qwen2-moe", checkpoint.Config{Architectures: []string{"Qwen2MoeForCausalLM"}, NumHiddenLayers: 4, UseSlidingWindow: &yes}, []int{w, 0, w, 0}},
		{"qwen2-moe max_window_layers", checkpoint.Config{Architectures: []string{"Qwen2MoeForCausalLM"}, NumHiddenLayers: 4, UseSlidingWindow: &yes, MaxWindowLayers: &one}, []int{w, 0, 0, 0}},
	} {
		g, err := GeometryOf(c.cfg)
		if err != nil || !slices.Equal(g.Window, c.want) {
			t.Errorf("%s: windows %v, %v; want %v", c.name, g.Window, err, c.want)
		}
	}
}

// Gemma 3 as configuration_gemma3.py derives it: layer i slides unless
// (i+1) is a multiple of sliding_window_pattern (default 6, window 4096),
// layer_types overrides the pattern, sliding layers rotate with
// rope_local_base_freq and no rope_scaling, attention scales by
// query_pre_attn_scalar^-½, and embeddings by sqrt(hidden_size) in the
// weights' dtype.
func TestGeometryOfGemma3(t *testing.T) {
	w, two, eight, softcap, yes := 512, 2, 8.0, 30.0, true
	gemma := func(edit func(*checkpoint.Config)) checkpoint.Config {
		c := checkpoint.Config{Architectures: []string{"Gemma3ForCausalLM"}, HiddenSize: 1152, NumHiddenLayers: 7, HeadDim: 256,
			NumAttentionHeads: 4, NumKeyValueHeads: 1, RopeTheta: 1e6, TorchDtype: "bfloat16", SlidingWindow: &w,
			HiddenAct: "gelu_pytorch_tanh", HiddenActivation: "gelu_pytorch_tanh"}
		if edit != nil {
			edit(&c)
		}
		return c
	}
	for _, c := range []struct {
		name   string
		cfg    checkpoint.Config
		window []int
		scale  float32 // EmbedScale
		err    string
	}{
		{"1b", gemma(nil), []int{w, w, w, w, w, 0, w}, 34, ""},
		{"float32 weights", gemma(func(c *checkpoint.Config) { c.TorchDtype = "float32" }), []int{w, w, w, w, w, 0, w}, float32(math.Sqrt(1152)), ""},
		{"default window", gemma(func(c *checkpoint.Config) { c.SlidingWindow = nil }), []int{4096, 4096, 4096, 4096, 4096, 0, 4096}, 34, ""},
		{"pattern 2", gemma(func(c *checkpoint.Config) { c.SlidingWindowPattern = &two }), []int{w, 0, w, 0, w, 0, w}, 34, ""},
		{"layer_types", gemma(func(c *checkpoint.Config) {
			c.NumHiddenLayers = 2
			c.LayerTypes = []string{"full_attention", "sliding_attention"}
		}), []int{0, w}, 34, ""},
		{"gelu", gemma(func(c *checkpoint.Config) { c.HiddenActivation = "gelu" }), nil, 0, `hidden_activation "gelu" is not supported`},
		{"final softcap", gemma(func(c *checkpoint.Config) { c.FinalLogitSoftcapping = &softcap }), nil, 0, "final_logit_softcapping 30 is not supported"},
		{"attn softcap", gemma(func(c *checkpoint.Config) { c.AttnLogitSoftcapping = &softcap }), nil, 0, "attn_logit_softcapping 30 is not supported"},
		{"bidirectional", gemma(func(c *checkpoint.Config) { c.UseBidirectionalAttention = &yes }), nil, 0, "use_bidirectional_attention"},
		{"rope_scaling beside rope_parameters by layer type", gemma(func(c *checkpoint.Config) {
			c.RopeScaling = []byte(`{"rope_type":"linear","factor":8}`)
			c.RopeParameters = []byte(`{"full_attention":{"rope_type":"default","rope_theta":1e6},"sliding_attention":{"rope_type":"default","rope_theta":1e4}}`)
		}), nil, 0, "rope_scaling beside rope_parameters per layer type"},
		{"scaled sliding layers", gemma(func(c *checkpoint.Config) {
			c.RopeParameters = []byte(`{"full_attention":{"rope_type":"default","rope_theta":1e6},"sliding_attention":{"rope_type":"linear","factor":2,"rope_theta":1e4}}`)
		}), nil, 0, `rope_parameters.sliding_attention rope_type "linear" is not supported`},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := GeometryOf(c.cfg)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil || !slices.Equal(g.Window, c.window) || g.EmbedScale != c.scale {
				t.Fatalf("windows %v, embed scale %v, %v; want %v, %v", g.Window, g.EmbedScale, err, c.window, c.scale)
			}
			if !g.QKNorm || !g.NormUnitOffset || !g.GeluTanh || !g.SandwichNorm || g.QKVBias || g.AttnScale() != 1.0/16 {
				t.Fatalf("geometry %+v, attention scale %v", g, g.AttnScale())
			}
		})
	}

	// Sliding layers: base 10000 unscaled; global layers: rope_theta with
	// rope_scaling (Gemma 3 4B's linear factor 8).
	g, err := GeometryOf(gemma(func(c *checkpoint.Config) {
		c.RopeScaling = []byte(fmt.Sprintf(`{"rope_type":"linear","factor":%g}`, eight))
	}))
	if err != nil {
		t.Fatal(err)
	}
	local, global := g.LayerInvFreq(0), g.LayerInvFreq(5)
	for i := range local {
		wantLocal := 1 / math.Pow(1e4, float64(2*i)/256)
		wantGlobal := 1 / math.Pow(1e6, float64(2*i)/256) / eight
		if math.Abs(float64(local[i])-wantLocal) > 1e-6*wantLocal || math.Abs(float64(global[i])-wantGlobal) > 1e-6*wantGlobal {
			t.Fatalf("inv_freq[%d]: local %g, global %g; want %g, %g", i, local[i], global[i], wantLocal, wantGlobal)
		}
	}
	if !slices.Equal(g.LayerInvFreq(5), g.InvFreq()) {
		t.Fatalf("a global layer's frequencies differ from InvFreq")
	}

	// transformers v5 writes the same as rope_parameters by layer type,
	// which replaces the flat fields (here set to other values).
	v5, err := GeometryOf(gemma(func(c *checkpoint.Config) {
		c.RopeTheta, c.RopeLocalBaseFreq = 5, &eight
		c.RopeParameters = []byte(`{"full_attention":{"rope_type":"linear","factor":8,"rope_theta":1e6},"sliding_attention":{"rope_type":"default","rope_theta":1e4}}`)
	}))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []int{0, 5} {
		if !slices.Equal(v5.LayerInvFreq(l), g.LayerInvFreq(l)) {
			t.Fatalf("layer %d: rope_parameters by layer type gives %v, the flat fields %v", l, v5.LayerInvFreq(l)[:3], g.LayerInvFreq(l)[:3])
		}
	}
}

func TestLoadGemma3(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny-gemma3")
	if err := synth.Write(synth.Presets["tiny-gemma3"], dir, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	m, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(m.Window, []int{8, 8, 0}) || m.HeadDim != 32 || m.QueryPreAttnScalar != 24 || m.LocalRopeTheta != 1e4 || m.EmbedScale != 9.8125 || m.Head != m.Embed {
		t.Fatalf("geometry %+v", m.Geometry)
	}
	for i, L := range m.Layers {
		for name, v := range map[string][]float32{"q_norm": L.QNorm, "k_norm": L.KNorm} {
			if len(v) != m.HeadDim {
				t.Errorf("layer %d: %s has %d values", i, name, len(v))
			}
		}
		for name, v := range map[string][]float32{"input": L.AttnNorm, "post_attention": L.PostAttnNorm, "pre_feedforward": L.MLPNorm, "post_feedforward": L.PostMLPNorm} {
			if len(v) != m.Dim {
				t.Errorf("layer %d: %s_layernorm has %d values", i, name, len(v))
			}
		}
	}
	// The four norms are distinct tensors: pre_feedforward is the MLP's
	// input norm, post_attention the attention output's.
	n := m.Names(0)
	if n.MLPNorm != "model.layers.0.pre_feedforward_layernorm.weight" || n.PostAttnNorm != "model.layers.0.post_attention_layernorm.weight" {
		t.Fatalf("names %+v", n)
	}
}

// Qwen2-MoE and Qwen3-MoE as their configs define them: defaults for
// absent fields, decoder_sparse_step and mlp_only_layers picking the
// sparse layers, and out-of-range values refused by field name.
func TestGeometryOfMoE(t *testing.T) {
	yes, no := true, false
	n := func(v int) *int { return &v }
	for _, c := range []struct {
		name   string
		cfg    checkpoint.Config
		check  func(g Geometry) bool
		errMsg string
	}{
		{"qwen3-moe defaults", checkpoint.Config{Architectures: []string{"Qwen3MoeForCausalLM"}, NumHiddenLayers: 2},
			func(g Geometry) bool {
				return g.Experts == 128 && g.TopK == 8 && g.ExpertIntermediate == 768 && !g.NormTopK && g.QKNorm && !g.QKVBias &&
					g.SharedIntermediate == 0 && slices.Equal(g.Sparse, []bool{true, true}) && g.Routes() == 16
			}, ""},
		{"qwen2-moe defaults", checkpoint.Config{Architectures: []string{"Qwen2MoeForCausalLM"}, NumHiddenLayers: 1},
			func(g Geometry) bool {
				return g.Experts == 60 && g.TopK == 4 && g.ExpertIntermediate == 1408 && g.SharedIntermediate == 5632 && g.QKVBias && !g.OBias && !g.QKNorm
			}, ""},
		{"qwen2-moe qkv_bias false", checkpoint.Config{Architectures: []string{"Qwen2MoeForCausalLM"}, NumHiddenLayers: 1, QKVBias: &no},
			func(g Geometry) bool { return !g.QKVBias }, ""},
		{"sparse step and mlp_only_layers", checkpoint.Config{Architectures: []string{"Qwen3MoeForCausalLM"}, NumHiddenLayers: 6, DecoderSparseStep: n(2), MLPOnlyLayers: []int{3}, NormTopKProb: &yes, NumExperts: n(4), NumExpertsPerTok: n(2)},
			func(g Geometry) bool {
				return slices.Equal(g.Sparse, []bool{false, true, false, false, false, true}) && g.NormTopK && g.Routes() == 4
			}, ""},
		{"num_local_experts", checkpoint.Config{Architectures: []string{"Qwen3MoeForCausalLM"}, NumHiddenLayers: 1, NumLocalExperts: n(16), NumExpertsPerTok: n(2)},
			func(g Geometry) bool { return g.Experts == 16 }, ""},
		{"no experts is dense", checkpoint.Config{Architectures: []string{"Qwen3MoeForCausalLM"}, NumHiddenLayers: 2, NumExperts: n(0)},
			func(g Geometry) bool { return g.Routes() == 0 && g.SparseLayers() == 0 }, ""},
		{"top-k over experts", checkpoint.Config{Architectures: []string{"Qwen3MoeForCausalLM"}, NumHiddenLayers: 1, NumExperts: n(4), NumExpertsPerTok: n(5)}, nil,
			"num_experts_per_tok 5 must be between 1 and num_experts 4"},
		{"experts out of bounds", checkpoint.Config{Architectures: []string{"Qwen3MoeForCausalLM"}, NumHiddenLayers: 1, NumExperts: n(1 << 20)}, nil,
			"num_experts 1048576 is outside"},
		{"bad sparse step", checkpoint.Config{Architectures: []string{"Qwen2MoeForCausalLM"}, NumHiddenLayers: 1, DecoderSparseStep: n(0)}, nil,
			"decoder_sparse_step 0 must be at least 1"},
		{"mlp_only_layers out of range", checkpoint.Config{Architectures: []string{"Qwen2MoeForCausalLM"}, NumHiddenLayers: 2, MLPOnlyLayers: []int{2}}, nil,
			"mlp_only_layers lists layer 2 of 2"},
		{"shared expert on qwen3", checkpoint.Config{Architectures: []string{"Qwen3MoeForCausalLM"}, NumHiddenLayers: 1, SharedExpertIntermediateSize: 64}, nil,
			"shared_expert_intermediate_size 64: Qwen3MoeForCausalLM has no shared expert"},
		{"negative moe width", checkpoint.Config{Architectures: []string{"Qwen3MoeForCausalLM"}, NumHiddenLayers: 1, MoEIntermediateSize: -1}, nil,
			"moe_intermediate_size -1 is outside"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g, err := GeometryOf(c.cfg)
			if c.errMsg != "" {
				if err == nil || !strings.Contains(err.Error(), c.errMsg) {
					t.Fatalf("err = %v, want %q", err, c.errMsg)
				}
				return
			}
			if err != nil || !c.check(g) {
				t.Fatalf("geometry %+v, %v", g, err)
			}
		})
	}
}

// A MoE checkpoint loads each expert's tensors; one stored the fused way
// of transformers v5's in-memory layout is refused by name.
func TestLoadMoE(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if err := synth.Write(synth.Presets["tiny-qwen2-moe"], dir, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	m, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	dense, sparse := m.Layers[0], m.Layers[1]
	if dense.Router != nil || dense.Wgate == nil || sparse.Router == nil || len(sparse.Experts) != 6 || sparse.Shared == nil ||
		sparse.SharedGate.Rows != 1 || sparse.Experts[5].Wdown.Cols != 48 || sparse.Wgate != nil {
		t.Fatalf("layers loaded as %+v / %+v", dense, sparse)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	w := extraTensor{CheckpointWeights(ck), "model.layers.1.mlp.experts.gate_up_proj"}
	if _, err := LoadWeights(ck, w, nil); err == nil || !strings.Contains(err.Error(), "mlp.experts.gate_up_proj: fused expert tensors are not supported") {
		t.Fatalf("fused experts: %v", err)
	}
}

// extraTensor adds a name to a checkpoint's weights.
type extraTensor struct {
	Weights
	name string
}

func (e extraTensor) Names() []string { return append(e.Weights.Names(), e.name) }
func (e extraTensor) Shape(name string) ([]int, string, int64, bool) {
	if name == e.name {
		return []int{6, 96, 64}, "model.safetensors", 0, true
	}
	return e.Weights.Shape(name)
}

// RouteLayout names the sparse layers as the config makes them, with
// TopK and the number of experts; a dense model has none.
func TestRouteLayout(t *testing.T) {
	two, three, eight := 2, 3, 8
	cases := []struct {
		name string
		cfg  checkpoint.Config
		want routing.Layout
	}{
		{"dense", checkpoint.Config{Architectures: []string{"Qwen2ForCausalLM"}, NumHiddenLayers: 4}, routing.Layout{}},
		{"qwen3-moe", checkpoint.Config{Architectures: []string{"Qwen3MoeForCausalLM"}, NumHiddenLayers: 3, NumExperts: &eight, NumExpertsPerTok: &two},
			routing.Layout{Layers: []int{0, 1, 2}, TopK: 2, Experts: 8}},
		{"mlp_only_layers", checkpoint.Config{Architectures: []string{"Qwen2MoeForCausalLM"}, NumHiddenLayers: 3, NumExperts: &eight, NumExpertsPerTok: &three, MLPOnlyLayers: []int{0}},
			routing.Layout{Layers: []int{1, 2}, TopK: 3, Experts: 8}},
		{"decoder_sparse_step", checkpoint.Config{Architectures: []string{"Qwen3MoeForCausalLM"}, NumHiddenLayers: 4, NumExperts: &eight, NumExpertsPerTok: &two, DecoderSparseStep: &two},
			routing.Layout{Layers: []int{1, 3}, TopK: 2, Experts: 8}},
	}
	for _, c := range cases {
		g, err := GeometryOf(c.cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := g.RouteLayout(); !reflect.DeepEqual(got, c.want) || got.Width() != g.Routes() {
			t.Errorf("%s: layout %+v (width %d), want %+v (Routes %d)", c.name, got, got.Width(), c.want, g.Routes())
		}
	}
}
