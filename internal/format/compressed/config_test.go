package compressed

import (
	"encoding/json"
	"testing"

	"logitscope/internal/format/lookup/lookuptest"
)

// cfg is a quantization_config with one group whose scheme is given.
func cfg(format, scheme string) string {
	return `{"quant_method":"compressed-tensors","format":"` + format + `","ignore":["lm_head"],"config_groups":{"group_0":` + scheme + `}}`
}

const w4 = `{"targets":["Linear"],"weights":{"num_bits":4,"type":"int","symmetric":true,"strategy":"group","group_size":128}}`

func TestParse(t *testing.T) {
	lookuptest.Parse(t, Parse, lookuptest.Cases([][3]string{
		{cfg("pack-quantized", w4), "compressed-tensors pack-quantized int4 g128", ""},
		{cfg("pack-quantized", `{"targets":["Linear"],"weights":{"num_bits":8,"group_size":-1,"symmetric":false}}`), "compressed-tensors pack-quantized int8 channel asym", ""},
		{cfg("pack-quantized", `{"targets":["Linear"],"weights":{"num_bits":2,"strategy":"group","group_size":64}}`), "compressed-tensors pack-quantized int2 g64", ""},
		{cfg("naive-quantized", `{"targets":["Linear"],"weights":{"num_bits":4,"strategy":"tensor"}}`), "compressed-tensors naive-quantized int4 tensor", ""},
		{cfg("float-quantized", `{"targets":["Linear"],"weights":{"num_bits":8,"type":"float","strategy":"block","block_structure":[128,128]},"input_activations":{"num_bits":8,"type":"float","strategy":"token","dynamic":true}}`), "compressed-tensors float-quantized float8 block128x128 acts=fp8", ""},
		{cfg("float-quantized", `{"targets":["Linear"],"weights":{"num_bits":8,"type":"float","strategy":"block","block_structure":"64x32"}}`), "compressed-tensors float-quantized float8 block64x32", ""},
		{cfg("pack-quantized", `{"targets":["Linear"],"weights":{"num_bits":4,"group_size":128,"actorder":true}}`), "compressed-tensors pack-quantized int4 g128 actorder=group", ""},
		{cfg("pack-quantized", `{"targets":["Linear"],"weights":{"num_bits":4,"group_size":128,"actorder":"static"}}`), "compressed-tensors pack-quantized int4 g128 actorder=weight", ""},
		{`{"quant_method":"compressed-tensors","format":"mixed-precision","config_groups":{"group_0":{"format":"pack-quantized","targets":["re:.*mlp.*"],"weights":{"num_bits":4,"group_size":128}},"group_1":{"format":"float-quantized","targets":["Linear"],"weights":{"num_bits":8,"type":"float","strategy":"channel"}}}}`,
			"compressed-tensors pack-quantized int4 g128 + float-quantized float8 channel", ""},
		{`{"quant_method":"compressed-tensors","format":"pack-quantized","config_groups":{},"sparsity_config":{},"transform_config":{},"kv_cache_scheme":null}`, "", "config_groups: missing"},

		// Refusals name the group and the field.
		{cfg("pack-quantized", `{"targets":["Linear"],"weights":{"num_bits":3,"group_size":128}}`), "", "config_groups.group_0.weights.num_bits: 3-bit pack-quantized packs differently before and after compressed-tensors' 2026 change"},
		{cfg("pack-quantized", `{"targets":["Linear"],"weights":{"num_bits":6,"group_size":128}}`), "", "weights.num_bits: 6-bit"},
		{cfg("marlin-24", w4), "", `config_groups.group_0: format "marlin-24"`},
		{cfg("sparse-24-bitmask", w4), "", `format "sparse-24-bitmask"`},
		{cfg("mystery", w4), "", `config_groups.group_0: unknown format "mystery"`},
		{cfg("mixed-precision", w4), "", "config_groups.group_0.format: the config is mixed-precision"},
		{`{"quant_method":"compressed-tensors","format":"dense","config_groups":{"g":` + w4 + `},"sparsity_config":{"format":"sparse-24-bitmask","sparsity_structure":"2:4"}}`, "", "sparsity_config"},
		{`{"quant_method":"compressed-tensors","format":"pack-quantized","config_groups":{"g":` + w4 + `},"transform_config":{"config_groups":{}}}`, "", "transform_config"},
		{`{"quant_method":"compressed-tensors","format":"pack-quantized","config_groups":{"g":` + w4 + `},"kv_cache_scheme":{"num_bits":8,"type":"float"}}`, "", "kv_cache_scheme"},
		{`{"quant_method":"compressed-tensors","format":"pack-quantized","config_groups":{"W4A16":["Linear"]}}`, "", "config_groups.W4A16: a preset scheme name"},
		{cfg("int-quantized", `{"targets":["Linear"],"weights":{"num_bits":8,"strategy":"channel"},"input_activations":{"num_bits":8,"strategy":"tensor","dynamic":false}}`), "", "config_groups.group_0.input_activations: int 8-bit, strategy \"tensor\", dynamic \"\""},
		{cfg("int-quantized", `{"targets":["Linear"],"weights":{"num_bits":8,"strategy":"channel"},"input_activations":{"num_bits":8,"strategy":"token","dynamic":true,"symmetric":false}}`), "", "symmetric false"},
		{cfg("int-quantized", `{"targets":["Linear"],"weights":{"num_bits":8,"strategy":"channel"},"output_activations":{"num_bits":8,"strategy":"token","dynamic":true}}`), "", "config_groups.group_0.output_activations"},
		{cfg("int-quantized", `{"targets":["Linear"],"weights":{"num_bits":8,"type":"float","strategy":"channel"}}`), "", `config_groups.group_0.weights.type: float weights in format "int-quantized"`},
		{cfg("float-quantized", `{"targets":["Linear"],"weights":{"num_bits":4,"type":"float","strategy":"channel"}}`), "", "config_groups.group_0.weights.num_bits: float 4-bit"},
		{cfg("nvfp4-pack-quantized", w4), "", "config_groups.group_0.weights: format \"nvfp4-pack-quantized\" needs float 4-bit"},
		{cfg("pack-quantized", `{"targets":["Linear"],"weights":{"num_bits":4,"strategy":"channel","actorder":"group"}}`), "", "weights.actorder: \"group\" needs strategy \"group\""},
		{cfg("pack-quantized", `{"targets":["Linear"],"weights":{"num_bits":4,"strategy":"group"}}`), "", "weights.group_size: strategy \"group\" needs a positive group_size"},
		{cfg("pack-quantized", `{"targets":["Linear"],"weights":{"num_bits":4,"strategy":"token"}}`), "", "weights.strategy: \"token\""},
		{cfg("pack-quantized", `{"targets":["Linear"],"weights":{"num_bits":4,"group_size":128,"dynamic":true}}`), "", "weights.dynamic"},
		{cfg("float-quantized", `{"targets":["Linear"],"weights":{"num_bits":8,"type":"float","strategy":"block","block_structure":[128]}}`), "", "weights.block_structure"},
		{cfg("pack-quantized", `{"targets":["re:(?!lm_head).*"],"weights":{"num_bits":4,"group_size":128}}`), "", "config_groups.group_0.targets[0]: regex"},
		{cfg("pack-quantized", `{"targets":["LlamaDecoderLayer"],"weights":{"num_bits":4,"group_size":128}}`), "", "targets[0]: \"LlamaDecoderLayer\" is a module class"},
		{cfg("pack-quantized", `{"targets":["Linear"]}`), "", "weights: null"},
		{cfg("pack-quantized", `{"targets":["Linear"],"weights":{"num_bits":4,"type":"ternary"}}`), "", "weights.type"},
		{`{"quant_method":"gptq"}`, "", `quant_method "gptq"`},
		{`{"quant_method":"compressed-tensors","config_groups":{"g":` + w4 + `}}`, "", "format: missing"},
		{`[]`, "", "quantization_config"},
	}))
}

// TestTargets checks which group quantizes which module: ignore first,
// then an exact name over a regex over a class, and Acts per group.
func TestTargets(t *testing.T) {
	f, err := Parse(json.RawMessage(`{"quant_method":"compressed-tensors","format":"mixed-precision",
		"ignore":["lm_head","re:.*mlp.gate$","re:model.visual"],
		"config_groups":{
			"group_0":{"format":"int-quantized","targets":["Linear"],"weights":{"num_bits":8,"strategy":"channel"},
				"input_activations":{"num_bits":8,"strategy":"token","dynamic":true}},
			"group_1":{"format":"pack-quantized","targets":["re:.*self_attn\\.(q|k)_proj"],"weights":{"num_bits":4,"group_size":128}},
			"group_2":{"format":"float-quantized","targets":["model.layers.0.self_attn.q_proj"],"weights":{"num_bits":8,"type":"float"},
				"input_activations":{"num_bits":8,"type":"float","strategy":"token","dynamic":true}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	c := f.(*Format)
	for _, tc := range []struct {
		module, group, acts string
	}{
		{"model.layers.0.self_attn.q_proj", "group_2", "fp8"},
		{"model.layers.1.self_attn.q_proj", "group_1", ""},
		{"model.layers.1.self_attn.k_proj", "group_1", ""},
		{"model.layers.1.self_attn.v_proj", "group_0", "int8"},
		{"model.layers.1.mlp.experts.3.down_proj", "group_0", "int8"},
		{"model.layers.1.mlp.gate", "", ""},
		{"model.layers.1.mlp.gate_proj", "group_0", "int8"},
		{"lm_head", "", ""},
		{"model.embed_tokens", "", ""},
		{"model.visual.blocks.0.attn.qkv", "", ""},
	} {
		g := c.scheme(tc.module)
		name := ""
		if g != nil {
			name = g.name
		}
		if name != tc.group || f.Quantized(tc.module) != (tc.group != "") || f.Acts(tc.module) != tc.acts {
			t.Errorf("%s: group %q Quantized %v Acts %q, want group %q, acts %q", tc.module, name, f.Quantized(tc.module), f.Acts(tc.module), tc.group, tc.acts)
		}
	}
	// A class target "Embedding" takes embeddings only.
	e, err := Parse(json.RawMessage(cfg("int-quantized", `{"targets":["Embedding"],"weights":{"num_bits":8,"strategy":"channel"}}`)))
	if err != nil {
		t.Fatal(err)
	}
	if !e.Quantized("model.embed_tokens") || e.Quantized("model.layers.0.mlp.up_proj") {
		t.Error("Embedding target")
	}
}

// TestConfig checks the writers' quantization_config field for field
// against what llm-compressor (compressed-tensors 0.12.2) writes for the
// W4A16 preset, and that each writer's config parses back to itself.
func TestConfig(t *testing.T) {
	f, err := ByName("ct-w4a16")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"config_groups":{"group_0":{"format":"pack-quantized","input_activations":null,"output_activations":null,"targets":["Linear"],` +
		`"weights":{"actorder":null,"block_structure":null,"dynamic":false,"group_size":128,"num_bits":4,"observer":"minmax","observer_kwargs":{},"strategy":"group","symmetric":true,"type":"int"}}},` +
		`"format":"pack-quantized","global_compression_ratio":null,"ignore":["lm_head"],"kv_cache_scheme":null,"quant_method":"compressed-tensors",` +
		`"quantization_status":"compressed","sparsity_config":{},"transform_config":{},"version":"0.12.2"}`
	if got := string(f.Config()); got != want {
		t.Errorf("Config() =\n%s\nwant\n%s", got, want)
	}
	for _, name := range []string{"ct-w4a16", "ct-w8a8", "ct-fp8", "ct-nvfp4"} {
		f, err := ByName(name)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(f.Config())
		if err != nil || back.Name() != f.Name() {
			t.Errorf("%s: Parse(Config()) = %v, %v; want %q", name, back, err, f.Name())
		}
	}
	if _, err := ByName("ct-w3a16"); err == nil {
		t.Error("ByName accepted an unknown name")
	}
	if _, err := FP8("block", false); err == nil {
		t.Error("FP8 accepted strategy block")
	}
}
