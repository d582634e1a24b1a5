package gguf_test

import (
	"bytes"
	"fmt"

	"logitscope/internal/format/ggml"
	"logitscope/internal/format/gguf"
)

func Example() {
	var buf bytes.Buffer
	err := gguf.Write(&buf, []gguf.KV{
		{Key: "general.architecture", Value: gguf.StringValue("llama")},
		{Key: "llama.block_count", Value: gguf.Uint32Value(1)},
		{Key: "tokenizer.ggml.tokens", Value: gguf.StringsValue([]string{"<s>", "</s>", "hi"})},
	}, []gguf.Tensor{
		// A (2, 32) matrix: two rows of one Q8_0 block each.
		{Name: "output.weight", Dims: []uint64{32, 2}, Type: ggml.Q8_0, Data: make([]byte, 2*34)},
	}, 0)
	if err != nil {
		panic(err)
	}

	f, err := gguf.Parse(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "example.gguf")
	if err != nil {
		panic(err)
	}
	arch, _ := f.String("general.architecture")
	blocks, _ := f.Uint("llama.block_count")
	tokens, _ := f.Strings("tokenizer.ggml.tokens")
	fmt.Println(f.Version, f.Alignment, arch, blocks, tokens)
	t, _ := f.Tensor("output.weight")
	fmt.Println(t.Name, t.Type, t.Dims, t.Shape(), t.Offset, t.Size)
	_, err = f.Float("general.architecture")
	fmt.Println(err)
	// Output:
	// 3 32 llama 1 [<s> </s> hi]
	// output.weight Q8_0 [32 2] [2 32] 256 68
	// gguf: example.gguf: key "general.architecture" is STRING "llama", not a number
}
