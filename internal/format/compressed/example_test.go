package compressed_test

import (
	"fmt"

	"logitscope/internal/format/compressed"
	"logitscope/internal/format/lookup/lookuptest"
)

// Write a weight as llm-compressor's W4A16 stores it (pack-quantized
// int4, groups of 128), then read it back as a lookup matrix.
func Example() {
	f, err := compressed.ByName("ct-w4a16")
	if err != nil {
		panic(err)
	}
	const rows, cols = 4, 128
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(i%15 - 7)
	}
	for r := range rows {
		w[r*cols] = 7.5 // absmax 7.5: s = 7.5/7.5 = 1, and 7.5 clamps to 7
	}
	tensors, err := f.Quantize("model.layers.0.mlp.up_proj", w, rows, cols)
	if err != nil {
		panic(err)
	}
	m := lookuptest.Map{}
	for _, t := range tensors {
		fmt.Println(t.Name, t.DType, t.Shape)
		m[t.Name] = t
	}
	mat, err := f.Matrix(m, "model.layers.0.mlp.up_proj")
	if err != nil {
		panic(err)
	}
	row := make([]float32, cols)
	mat.Row(0, row)
	fmt.Println(f.Name())
	fmt.Println(f.Quantized("lm_head"), mat.Bits, mat.Groups, row[:3])
	// Output:
	// model.layers.0.mlp.up_proj.weight_scale BF16 [4 1]
	// model.layers.0.mlp.up_proj.weight_packed I32 [4 16]
	// model.layers.0.mlp.up_proj.weight_shape I64 [2]
	// compressed-tensors pack-quantized int4 g128
	// false 4 1 [7 -6 -5]
}
