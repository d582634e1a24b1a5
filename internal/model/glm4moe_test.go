package model

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/model/synth"
)

// glmConfig is a Glm4MoeForCausalLM config.json with the fields
// ParseConfig requires, and more set or removed (nil) as given.
func glmConfig(t *testing.T, fields map[string]any) checkpoint.Config {
	t.Helper()
	c := map[string]any{"architectures": []string{"Glm4MoeForCausalLM"}, "hidden_size": 64, "intermediate_size": 160,
		"num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 512}
	for k, v := range fields {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := checkpoint.ParseConfig(b, "config.json")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// What a GLM-4.5 config omits takes Glm4MoeConfig's defaults; the fields
// it sets replace them, partial_rotary_factor also where transformers v5
// writes it, inside rope_parameters.
func TestGeometryOfGLM4Moe(t *testing.T) {
	g, err := GeometryOf(glmConfig(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := Geometry{Experts: 128, TopK: 8, ExpertIntermediate: 1408, SharedIntermediate: 1408, Groups: 1, TopKGroup: 1, RoutedScale: 1,
		NormTopK: true, Sigmoid: true, SharedUngated: true, RotaryDim: 16, NormEps: 1e-5, MaxPos: 131072, RopeTheta: 10000}
	got := Geometry{Experts: g.Experts, TopK: g.TopK, ExpertIntermediate: g.ExpertIntermediate, SharedIntermediate: g.SharedIntermediate,
		Groups: g.Groups, TopKGroup: g.TopKGroup, RoutedScale: g.RoutedScale, NormTopK: g.NormTopK, Sigmoid: g.Sigmoid,
		SharedUngated: g.SharedUngated, RotaryDim: g.RotaryDim, NormEps: g.NormEps, MaxPos: g.MaxPos, RopeTheta: g.RopeTheta,
		QKVBias: g.QKVBias, OBias: g.OBias, QKNorm: g.QKNorm, MTPLayers: g.MTPLayers}
	if !reflect.DeepEqual(got, want) || !slices.Equal(g.Sparse, []bool{false, true, true}) {
		t.Fatalf("defaults: %+v sparse %v, want %+v", got, g.Sparse, want)
	}
	if f := g.InvFreq(); len(f) != 8 || f[1] != float32(1/math.Pow(10000, float64(float32(2)/16))) {
		t.Fatalf("inverse frequencies over the rotary dim 16: %v", f)
	}
	g, err = GeometryOf(glmConfig(t, map[string]any{"n_routed_experts": 16, "num_experts_per_tok": 3, "moe_intermediate_size": 32,
		"n_shared_experts": 2, "n_group": 4, "topk_group": 2, "routed_scaling_factor": 2.5, "norm_topk_prob": false,
		"first_k_dense_replace": 2, "num_nextn_predict_layers": 1, "use_qk_norm": true, "attention_bias": true,
		"rope_parameters": map[string]any{"rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 0.25}}))
	if err != nil {
		t.Fatal(err)
	}
	if g.Experts != 16 || g.TopK != 3 || g.ExpertIntermediate != 32 || g.SharedIntermediate != 64 || g.Groups != 4 || g.TopKGroup != 2 ||
		g.RoutedScale != 2.5 || g.NormTopK || !slices.Equal(g.Sparse, []bool{false, false, true}) || g.MTPLayers != 1 ||
		!g.QKNorm || !g.QKVBias || g.OBias || g.RotaryDim != 8 || g.RopeTheta != 1e6 || g.Routes() != 3 {
		t.Fatalf("set: %+v", g)
	}
	if g, _ := GeometryOf(glmConfig(t, map[string]any{"partial_rotary_factor": 1.0})); g.RotaryDim != 0 || g.RopeDim() != 32 {
		t.Fatalf("partial_rotary_factor 1 rotates all of head_dim: %d", g.RotaryDim)
	}
}

// A config GLM's router could not run, or would run otherwise than
// transformers, is refused naming the field.
func TestGLM4MoeRefusals(t *testing.T) {
	for _, c := range []struct {
		fields map[string]any
		want   string
	}{
		{map[string]any{"n_group": 3, "n_routed_experts": 8}, "n_group 3 does not divide n_routed_experts 8"},
		{map[string]any{"n_group": 8, "n_routed_experts": 8, "num_experts_per_tok": 2}, "a group is scored by its top 2 experts"},
		{map[string]any{"n_group": 2, "topk_group": 3}, "topk_group 3 is more than n_group 2"},
		{map[string]any{"n_group": 0}, "n_group 0 is outside"},
		{map[string]any{"topk_group": 0}, "topk_group 0 is outside"},
		{map[string]any{"num_experts_per_tok": 9, "n_routed_experts": 8}, "num_experts_per_tok 9 must be at most n_routed_experts 8"},
		{map[string]any{"n_routed_experts": 0}, "n_routed_experts 0 is outside"},
		{map[string]any{"n_shared_experts": -1}, "n_shared_experts -1 is outside"},
		{map[string]any{"first_k_dense_replace": 4}, "first_k_dense_replace 4 is outside [0, 3]"},
		{map[string]any{"num_nextn_predict_layers": -1}, "num_nextn_predict_layers -1 is outside"},
		{map[string]any{"routed_scaling_factor": 0}, "routed_scaling_factor 0 must be a positive float32"},
		{map[string]any{"partial_rotary_factor": 0}, "partial_rotary_factor 0 must be in (0, 1]"},
		{map[string]any{"partial_rotary_factor": 0.1}, "partial_rotary_factor 0.1 of head_dim 32 rotates 3 values"},
		{map[string]any{"hidden_act": "gelu"}, `hidden_act "gelu"`},
	} {
		_, err := GeometryOf(glmConfig(t, c.fields))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.fields, err, c.want)
		}
	}
	// Other architectures still refuse a partial rotary embedding.
	c := glmConfig(t, map[string]any{"partial_rotary_factor": 0.5})
	c.Architectures = []string{"LlamaForCausalLM"}
	if _, err := GeometryOf(c); err == nil || !strings.Contains(err.Error(), "partial_rotary_factor 0.5") {
		t.Errorf("Llama with partial_rotary_factor: %v", err)
	}
}

// The tiny GLM-4.5 checkpoint loads a dense layer, then sparse ones with
// the router's score bias and ungated shared experts; its multi-token
// prediction layer (layer 3) is checked, not loaded. An announced layer
// with a tensor missing is refused naming the tensor and the file; such
// layers unannounced are refused as layers the config does not explain.
func TestLoadGLM4Moe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if err := synth.Write(synth.Presets["tiny-glm4-moe"], dir, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	m, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	dense, sparse := m.Layers[0], m.Layers[1]
	if len(m.Layers) != 3 || dense.Router != nil || dense.Wgate == nil || sparse.Router == nil || len(sparse.ScoreBias) != 16 ||
		len(sparse.Experts) != 16 || sparse.Shared == nil || sparse.SharedGate != nil || sparse.Shared.Wgate.Rows != 32 ||
		sparse.Bq == nil || sparse.Bo != nil || sparse.QNorm == nil {
		t.Fatalf("layers loaded as %+v / %+v", dense, sparse)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	for _, name := range []string{"model.layers.3.eh_proj.weight", "model.layers.3.shared_head.head.weight", "model.layers.3.mlp.experts.15.down_proj.weight"} {
		w := hidden{CheckpointWeights(ck), name}
		_, err := LoadWeights(ck, w, nil)
		if err == nil || !strings.Contains(err.Error(), "model.safetensors: missing tensor "+name+" of multi-token prediction layer 3") {
			t.Errorf("without %s: %v", name, err)
		}
	}

	cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	off := strings.Replace(string(cfg), `"num_nextn_predict_layers": 1`, `"num_nextn_predict_layers": 0`, 1)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(off), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "num_hidden_layers 3, but the weights hold 4 layers (layers from 3 on look like multi-token prediction layers") {
		t.Errorf("unannounced MTP layer: %v", err)
	}
}

// hidden hides a tensor of a checkpoint's weights.
type hidden struct {
	Weights
	name string
}

func (h hidden) Names() []string {
	return slices.DeleteFunc(h.Weights.Names(), func(n string) bool { return n == h.name })
}

func (h hidden) Shape(name string) ([]int, string, int64, bool) {
	if name == h.name {
		return nil, "", 0, false
	}
	return h.Weights.Shape(name)
}
