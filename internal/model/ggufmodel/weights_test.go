package ggufmodel_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"logitscope/internal/format/ggml"
	"logitscope/internal/format/gguf"
	"logitscope/internal/model"
	"logitscope/internal/model/ggufmodel"
	"logitscope/internal/text/tokenizer"
)

// A file that is not the checkpoint's model is refused before anything
// runs, the message naming the key or the tensor.
func TestOpenRefuses(t *testing.T) {
	ck := checkpointOf(t, "tiny")
	g, err := model.GeometryOf(ck.Config)
	if err != nil {
		t.Fatal(err)
	}
	path, _, _ := export(t, ck, "q4")
	for _, c := range []struct {
		name string
		edit edit
		want string
	}{
		{"another architecture", setKV("general.architecture", gguf.StringValue("qwen3")), `general.architecture is "qwen3"; the checkpoint is Qwen2ForCausalLM, which llama.cpp names "qwen2"`},
		{"no architecture", func(kv []gguf.KV, ts []gguf.Tensor) ([]gguf.KV, []gguf.Tensor) {
			return slices.DeleteFunc(kv, func(p gguf.KV) bool { return p.Key == "general.architecture" }), ts
		}, `general.architecture`},
		{"architecture not a string", setKV("general.architecture", gguf.Uint32Value(2)), `general.architecture`},
		{"another layer count", setKV("qwen2.block_count", gguf.Uint32Value(3)), "qwen2.block_count is 3; the model's config says 2"},
		{"another head count", setKV("qwen2.attention.head_count_kv", gguf.Uint32Value(4)), "qwen2.attention.head_count_kv is 4"},
		{"another RoPE base", setKV("qwen2.rope.freq_base", gguf.Float32Value(1)), "qwen2.rope.freq_base is 1; the model's config says 1e+06"},
		{"another RMS epsilon", setKV("qwen2.attention.layer_norm_rms_epsilon", gguf.Float32Value(1e38)), "qwen2.attention.layer_norm_rms_epsilon is 1e+38"},
		{"missing tensor", func(kv []gguf.KV, ts []gguf.Tensor) ([]gguf.KV, []gguf.Tensor) {
			return kv, slices.DeleteFunc(ts, func(x gguf.Tensor) bool { return x.Name == "blk.1.ffn_up.weight" })
		}, "no tensor blk.1.ffn_up.weight (the model's model.layers.1.mlp.up_proj.weight)"},
		{"another shape", editTensor("blk.0.attn_norm.weight", func(x *gguf.Tensor) {
			x.Dims, x.Data = []uint64{32}, x.Data[:32*4]
		}), "tensor blk.0.attn_norm.weight has shape [32]"},
		{"a tensor nothing reads", func(kv []gguf.KV, ts []gguf.Tensor) ([]gguf.KV, []gguf.Tensor) {
			return kv, append(ts, gguf.Tensor{Name: "blk.0.attn_sinks.weight", Dims: []uint64{4}, Type: ggml.F32, Data: make([]byte, 16)})
		}, "1 tensors a Qwen2ForCausalLM forward pass would not read, e.g. blk.0.attn_sinks.weight"},
		{"a type no engine decodes", editTensor("output_norm.weight", func(x *gguf.Tensor) {
			x.Type = ggml.I32
		}), "tensor output_norm.weight: type I32 is not supported"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ggufmodel.Open(rewrite(t, path, c.edit), g)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "edited-") {
				t.Fatalf("err = %v, want one naming the file and %q", err, c.want)
			}
		})
	}
}

// A file converted from another tokenizer of the same size is refused:
// its token ids would mean other words.
func TestCheckTokenizer(t *testing.T) {
	ck := checkpointOf(t, "tiny")
	g, err := model.GeometryOf(ck.Config)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(ck.TokenizerPath())
	if err != nil {
		t.Fatal(err)
	}
	path, _, _ := export(t, ck, "f32")
	w, err := ggufmodel.Open(path, g)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.CheckTokenizer(tok); err != nil {
		t.Fatalf("its own export: %v", err)
	}
	f, _ := gguf.Open(path)
	tokens, _ := f.Strings("tokenizer.ggml.tokens")
	tokens[70] = "not-the-same"
	w, err = ggufmodel.Open(rewrite(t, path, setKV("tokenizer.ggml.tokens", gguf.StringsValue(tokens))), g)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := tok.Token(70)
	if err := w.CheckTokenizer(tok); err == nil || !strings.Contains(err.Error(), `tokenizer.ggml.tokens[70] is "not-the-same"; the checkpoint's tokenizer has `+strconv.Quote(want)) {
		t.Fatalf("err = %v", err)
	}
}
