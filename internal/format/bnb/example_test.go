package bnb_test

import (
	"fmt"

	"logitscope/internal/format/bnb"
	"logitscope/internal/format/lookup"
)

// A bitsandbytes NF4 matrix as transformers saves it, read back as a
// lookup matrix: codes into NF4's table times each block's absmax.
func ExampleNF4() {
	f := bnb.NF4(true)
	w := make([]float32, 2*64)
	for i := range w {
		w[i] = float32(i%9-4) / 8 // -0.5 … 0.5
	}
	tensors, err := f.Quantize("model.layers.0.mlp.up_proj", w, 2, 64)
	if err != nil {
		panic(err)
	}
	for _, t := range tensors {
		fmt.Println(t.Name, t.DType, t.Shape)
	}
	m, err := f.Matrix(lookup.Memory{}.Put(tensors...), "model.layers.0.mlp.up_proj")
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %d groups of %d a row, absmax %.4f\n", f.Name(), m.Groups, m.GroupSize, m.Scale[0])
	fmt.Printf("%.3f\n", m.Dequantize()[:9])
	// Output:
	// model.layers.0.mlp.up_proj.weight U8 [64 1]
	// model.layers.0.mlp.up_proj.weight.quant_map F32 [16]
	// model.layers.0.mlp.up_proj.weight.absmax U8 [2]
	// model.layers.0.mlp.up_proj.weight.nested_absmax F32 [1]
	// model.layers.0.mlp.up_proj.weight.nested_quant_map F32 [256]
	// model.layers.0.mlp.up_proj.weight.quant_state.bitsandbytes__nf4 U8 [151]
	// bnb nf4 double-quant: 1 groups of 64 a row, absmax 0.5000
	// [-0.500 -0.348 -0.263 -0.142 0.000 0.123 0.220 0.361 0.500]
}
