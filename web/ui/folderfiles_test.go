package main

import "testing"

func TestModelFile(t *testing.T) {
	for _, c := range []struct {
		rel  string
		want bool
	}{
		{"config.json", true},
		{"generation_config.json", true},
		{"tokenizer.json", true},
		{"model.safetensors", true},
		{"model-00001-of-00002.safetensors", true},
		{"model.safetensors.index.json", true},
		{"model-Q4_K_M.GGUF", true},
		{"merges.txt", true},
		{"variants/q4/manifest.json", true},
		{"variants/q4/shard-00001.bin", true},
		{"hub/gptq-4b-g128-sym/config.json", true},
		{"hub/gptq-4b-g128-sym/quantize_config.json", true},
		{"hub/awq/model-00001-of-00002.safetensors", true},
		{"hub/mlx/merges.txt", true},
		{"hub/x/model.gguf", false},
		{"hub/x/README.md", false},
		{"hub/.x/config.json", false},
		{"hub/x/y/config.json", false},
		{"hub/config.json", false},
		{"README.md", false},
		{"pytorch_model.bin", false},
		{"original/consolidated.00.pth", false},
		{"original/params.json", false},
		{"variants/q4/extra/x.bin", false},
		{"variants/q4/notes.txt", false},
		{".gitattributes", false},
		{".cache/huggingface/download/model.safetensors", false},
		{"variants/.q4.tmp123-1/manifest.json", false},
		{"", false},
	} {
		if got := modelFile(c.rel); got != c.want {
			t.Errorf("modelFile(%q) = %v, want %v", c.rel, got, c.want)
		}
	}
}
