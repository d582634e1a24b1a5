// Package ggufmodel reads a llama.cpp GGUF file as the weights of a
// Hugging Face model: llama.cpp's tensor names, layouts and metadata mapped
// to the Hugging Face ones that package model reads, with what llama.cpp's
// converter (convert_hf_to_gguf.py) did to them undone on the way: the
// interleaved row order of Llama's q/k projections, Gemma's norm weights
// stored plus one, and the experts of a mixture stacked into one tensor.
package ggufmodel

import (
	"fmt"

	"logitscope/internal/model"
)

// Archs maps config.json architectures to GGUF's general.architecture, as
// llama.cpp's converter names them (Mistral's dense checkpoints convert as
// llama).
var Archs = map[string]string{
	"Qwen2ForCausalLM":    "qwen2",
	"Qwen3ForCausalLM":    "qwen3",
	"LlamaForCausalLM":    "llama",
	"MistralForCausalLM":  "llama",
	"Gemma3ForCausalLM":   "gemma3",
	"Qwen2MoeForCausalLM": "qwen2moe",
	"Qwen3MoeForCausalLM": "qwen3moe",
}

// mapping is where one Hugging Face tensor lives in a GGUF file.
type mapping struct {
	hf, gguf string
	// expert is the index into a stacked expert tensor (blk.N.ffn_*_exps),
	// -1 for a tensor of its own.
	expert int
	// interleaved is the head dim when the converter permuted the rows
	// within each head for llama.cpp's RoPE (Llama's q and k, weights and
	// biases); 0 otherwise.
	interleaved int
	// shift is what the converter added (Gemma's norms: 1).
	shift float32
}

// mappings lists every tensor of g with its GGUF name, in g.Specs' order.
func mappings(g model.Geometry) ([]mapping, error) {
	arch, ok := Archs[g.Arch]
	if !ok {
		return nil, fmt.Errorf("GGUF: architecture %s has no llama.cpp mapping here", g.Arch)
	}
	permuted := arch == "llama"
	var shift float32
	if g.NormUnitOffset {
		shift = 1
	}
	m := []mapping{{hf: model.EmbedName, gguf: "token_embd.weight", expert: -1}}
	add := func(hf, gguf string) { m = append(m, mapping{hf: hf, gguf: gguf, expert: -1}) }
	norm := func(hf, gguf string) { m = append(m, mapping{hf: hf, gguf: gguf, expert: -1, shift: shift}) }
	for i := 0; i < g.NumLayers; i++ {
		n := g.Names(i)
		blk := fmt.Sprintf("blk.%d.", i)
		norm(n.AttnNorm, blk+"attn_norm.weight")
		for _, p := range []struct {
			w, b, name string
			perm       bool
		}{{n.Wq, n.Bq, "attn_q", permuted}, {n.Wk, n.Bk, "attn_k", permuted}, {n.Wv, n.Bv, "attn_v", false}, {n.Wo, n.Bo, "attn_output", false}} {
			hd := 0
			if p.perm {
				hd = g.HeadDim
			}
			m = append(m, mapping{hf: p.w, gguf: blk + p.name + ".weight", expert: -1, interleaved: hd},
				mapping{hf: p.b, gguf: blk + p.name + ".bias", expert: -1, interleaved: hd})
		}
		norm(n.QNorm, blk+"attn_q_norm.weight")
		norm(n.KNorm, blk+"attn_k_norm.weight")
		if g.SandwichNorm {
			norm(n.PostAttnNorm, blk+"post_attention_norm.weight")
			norm(n.PostMLPNorm, blk+"post_ffw_norm.weight")
		}
		norm(n.MLPNorm, blk+"ffn_norm.weight")
		for _, p := range []struct{ w, b, name string }{{n.Wgate, n.Bgate, "ffn_gate"}, {n.Wup, n.Bup, "ffn_up"}, {n.Wdown, n.Bdown, "ffn_down"}} {
			add(p.w, blk+p.name+".weight")
			add(p.b, blk+p.name+".bias")
		}
		add(n.Router, blk+"ffn_gate_inp.weight")
		for e := 0; e < g.Experts; e++ {
			x := n.Expert(e)
			m = append(m, mapping{hf: x.Wgate, gguf: blk + "ffn_gate_exps.weight", expert: e},
				mapping{hf: x.Wup, gguf: blk + "ffn_up_exps.weight", expert: e},
				mapping{hf: x.Wdown, gguf: blk + "ffn_down_exps.weight", expert: e})
		}
		add(n.Shared.Wgate, blk+"ffn_gate_shexp.weight")
		add(n.Shared.Wup, blk+"ffn_up_shexp.weight")
		add(n.Shared.Wdown, blk+"ffn_down_shexp.weight")
		add(n.SharedGate, blk+"ffn_gate_inp_shexp.weight")
	}
	norm(model.NormName, "output_norm.weight")
	add(model.HeadName, "output.weight")
	// Only the tensors g has: the list above names every tensor any
	// architecture might hold.
	specs := map[string]bool{}
	for _, s := range g.Specs() {
		specs[s.Name] = true
	}
	out := m[:0]
	for _, p := range m {
		if specs[p.hf] {
			out = append(out, p)
		}
	}
	return out, nil
}

// Names maps each of g's Hugging Face tensors to the GGUF tensor that holds
// it in llama.cpp's files: a mixture's experts map, all of them, to their
// layer's stacked tensor (blk.N.ffn_down_exps.weight).
func Names(g model.Geometry) (map[string]string, error) {
	ms, err := mappings(g)
	if err != nil {
		return nil, err
	}
	names := make(map[string]string, len(ms))
	for _, m := range ms {
		names[m.hf] = m.gguf
	}
	return names, nil
}
