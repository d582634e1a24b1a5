package model

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"logitscope/internal/format/checkpoint"
)

// glm4Moe is GLM-4.5's architecture: its config rules, tensor names and
// refusals live in this file.
const glm4Moe = "Glm4MoeForCausalLM"

// glm4moe sets the semantics of transformers' models/glm4_moe
// (modeling_glm4_moe.py and configuration_glm4_moe.py, v4.54 to main),
// with Glm4MoeConfig's defaults where a config omits a field:
//
//   - attention: q/k/v biases when attention_bias (default false; the
//     published GLM-4.5 configs set it), never on o_proj; q_norm and
//     k_norm per head when use_qk_norm (default false); RoPE on the first
//     head_dim·partial_rotary_factor values of each head (default 0.5),
//     its frequencies built over that rotary dim, NeoX rotate_half within
//     it, the rest passing unrotated;
//   - MLP: dense (intermediate_size) on the layers before
//     first_k_dense_replace (default 1), else n_routed_experts (128)
//     experts of moe_intermediate_size (1408), num_experts_per_tok (8) per
//     token, chosen by Glm4MoeMoE.route_tokens_to_experts (the CPU
//     engine's RouteGrouped: n_group (1) groups, topk_group (1) kept,
//     norm_topk_prob (true), routed_scaling_factor (1.0)), plus
//     n_shared_experts (1) ungated shared experts as one SwiGLU of
//     moe_intermediate_size·n_shared_experts;
//   - num_nextn_predict_layers multi-token prediction layers stored as
//     layer indices from num_hidden_layers on: checked complete (Check),
//     never loaded or run (transformers' own model skips them too).
//
// decoder_sparse_step and mlp_only_layers, which Glm4MoeConfig does not
// read, are ignored as transformers ignores them.
func glm4moe(c checkpoint.Config, g *Geometry) error {
	g.QKVBias = c.AttentionBias != nil && *c.AttentionBias
	g.QKNorm = c.UseQKNorm != nil && *c.UseQKNorm
	if err := glmRotary(c, g); err != nil {
		return err
	}
	g.Sigmoid, g.SharedUngated = true, true
	g.Experts, g.TopK, g.ExpertIntermediate = 128, 8, 1408
	g.Groups, g.TopKGroup, g.RoutedScale, g.NormTopK = 1, 1, 1, true
	shared, dense := 1, 1
	for _, f := range []struct {
		field    string
		v        *int
		to       *int
		min, max int
	}{
		{"n_routed_experts", c.NRoutedExperts, &g.Experts, 1, MaxExperts},
		{"num_experts_per_tok", c.NumExpertsPerTok, &g.TopK, 1, MaxExperts},
		{"moe_intermediate_size", nilIfZero(c.MoEIntermediateSize), &g.ExpertIntermediate, 1, checkpoint.MaxIntermediateSize},
		{"n_shared_experts", c.NSharedExperts, &shared, 0, MaxExperts},
		{"n_group", c.NGroup, &g.Groups, 1, MaxExperts},
		{"topk_group", c.TopKGroup, &g.TopKGroup, 1, MaxExperts},
		{"first_k_dense_replace", c.FirstKDenseReplace, &dense, 0, c.NumHiddenLayers},
		{"num_nextn_predict_layers", c.NumNextnPredictLayers, &g.MTPLayers, 0, checkpoint.MaxLayers},
	} {
		if f.v == nil {
			continue
		}
		if *f.v < f.min || *f.v > f.max {
			return fmt.Errorf("config.json: %s %d is outside [%d, %d]", f.field, *f.v, f.min, f.max)
		}
		*f.to = *f.v
	}
	switch {
	case g.TopK > g.Experts:
		return fmt.Errorf("config.json: num_experts_per_tok %d must be at most n_routed_experts %d", g.TopK, g.Experts)
	case g.Experts%g.Groups != 0:
		return fmt.Errorf("config.json: n_group %d does not divide n_routed_experts %d", g.Groups, g.Experts)
	case g.Experts/g.Groups < 2:
		// route_tokens_to_experts scores a group by its top 2 (torch.topk
		// of 2 fails on a group of one).
		return fmt.Errorf("config.json: n_group %d leaves groups of %d expert of n_routed_experts %d: a group is scored by its top 2 experts", g.Groups, g.Experts/g.Groups, g.Experts)
	case g.TopKGroup > g.Groups:
		return fmt.Errorf("config.json: topk_group %d is more than n_group %d", g.TopKGroup, g.Groups)
	}
	if f := c.RoutedScalingFactor; f != nil {
		if !(*f > 0) || math.IsInf(*f, 0) || *f > math.MaxFloat32 {
			return fmt.Errorf("config.json: routed_scaling_factor %g must be a positive float32", *f)
		}
		g.RoutedScale = float32(*f) // a Python float times a float32 tensor: rounded to float32
	}
	if c.NormTopKProb != nil {
		g.NormTopK = *c.NormTopKProb
	}
	if int64(shared)*int64(g.ExpertIntermediate) > checkpoint.MaxIntermediateSize {
		return fmt.Errorf("config.json: n_shared_experts %d × moe_intermediate_size %d is more than %d", shared, g.ExpertIntermediate, checkpoint.MaxIntermediateSize)
	}
	g.SharedIntermediate = shared * g.ExpertIntermediate
	g.Sparse = make([]bool, c.NumHiddenLayers)
	for i := range g.Sparse {
		g.Sparse[i] = i >= dense
	}
	return nil
}

// glmRotary reads partial_rotary_factor (default 0.5), where transformers
// v4 writes it or, v5, inside rope_parameters: the rotary dim is
// int(head_dim · factor), and must be even and positive.
func glmRotary(c checkpoint.Config, g *Geometry) error {
	f := 0.5
	var v5 struct {
		Factor *float64 `json:"partial_rotary_factor"`
	}
	if json.Unmarshal(c.RopeParameters, &v5) == nil && v5.Factor != nil {
		f = *v5.Factor
	}
	if c.PartialRotaryFactor != nil {
		f = *c.PartialRotaryFactor
	}
	if !(f > 0 && f <= 1) {
		return fmt.Errorf("config.json: partial_rotary_factor %g must be in (0, 1]", f)
	}
	dim := int(float64(g.HeadDim) * f)
	if dim < 2 || dim%2 != 0 {
		return fmt.Errorf("config.json: partial_rotary_factor %g of head_dim %d rotates %d values: RoPE needs an even number, at least 2", f, g.HeadDim, dim)
	}
	if dim < g.HeadDim {
		g.RotaryDim = dim
	}
	return nil
}

// mtpSpecs lists the tensors of the multi-token prediction layers that
// config.json announces (num_nextn_predict_layers), as GLM-4.5's and
// DeepSeek-V3's checkpoints store them: at layer index num_hidden_layers
// + j, a whole sparse decoder layer plus eh_proj (d, 2d), enorm, hnorm,
// and shared_head's norm and head (Vocab, d). Check requires them all; no
// engine loads them.
func (g Geometry) mtpSpecs() []Spec {
	var s []Spec
	d := g.Dim
	for j := range g.MTPLayers {
		n := g.Names(g.NumLayers + j)
		s = append(s, g.layerSpecs(n, true)...)
		s = append(s, Spec{n.prefix + "eh_proj.weight", []int{d, 2 * d}}, Spec{n.prefix + "enorm.weight", []int{d}},
			Spec{n.prefix + "hnorm.weight", []int{d}}, Spec{n.prefix + "shared_head.norm.weight", []int{d}},
			Spec{n.prefix + "shared_head.head.weight", []int{g.Vocab, d}})
	}
	return s
}

// mtpOptional tells a tensor that a multi-token prediction layer may
// store but need not: DeepSeek-V3's converter writes a copy of the
// embedding into each (model.layers.N.embed_tokens.weight).
func (g Geometry) mtpOptional(name string) bool {
	for j := range g.MTPLayers {
		if name == g.Names(g.NumLayers+j).prefix+"embed_tokens.weight" {
			return true
		}
	}
	return false
}

// mtpMissing says which multi-token prediction layer a missing tensor
// belongs to, and the file holding its other tensors, if any.
func (g Geometry) mtpMissing(dir, name string, w Weights) error {
	rest, _ := strings.CutPrefix(name, layerPrefix)
	layer, _, _ := strings.Cut(rest, ".")
	where := dir
	for _, n := range w.Names() {
		if strings.HasPrefix(n, layerPrefix+layer+".") {
			_, file, _, _ := w.Shape(n)
			where = file
			break
		}
	}
	return fmt.Errorf("%s: missing tensor %s of multi-token prediction layer %s (config.json: num_nextn_predict_layers %d; they are checked, never run)", where, name, layer, g.MTPLayers)
}

// layerCountHint explains a layer count that differs from the config's
// where multi-token prediction layers are the likely cause.
func (g Geometry) layerCountHint(held int) string {
	switch {
	case g.Arch != glm4Moe:
		return ""
	case held > g.NumLayers+g.MTPLayers:
		return fmt.Sprintf(" (layers from %d on look like multi-token prediction layers: set num_nextn_predict_layers to %d if so)", g.NumLayers+g.MTPLayers, held-g.NumLayers)
	case g.MTPLayers > 0 && held >= g.NumLayers:
		return fmt.Sprintf(" (num_nextn_predict_layers %d announces multi-token prediction layers from %d on that the weights lack)", g.MTPLayers, g.NumLayers)
	}
	return ""
}
