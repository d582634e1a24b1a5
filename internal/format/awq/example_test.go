package awq_test

import (
	"encoding/json"
	"fmt"

	"logitscope/internal/format/awq"
	"logitscope/internal/format/lookup/lookuptest"
)

// Quantize a weight as AutoAWQ's GEMM stores it, then read it back as a
// lookup matrix.
func Example() {
	f, err := awq.Parse(json.RawMessage(`{"quant_method":"awq","zero_point":true,"group_size":64,"bits":4,"version":"gemm"}`))
	if err != nil {
		panic(err)
	}
	const out, in = 8, 64
	w := make([]float32, out*in)
	for i := range w {
		w[i] = float32(i%16) - 8 // each group spans [−8, 7]: s = 1, z = 8
	}
	tensors, _ := f.Quantize("model.layers.0.mlp.up_proj", w, out, in)
	for _, t := range tensors {
		fmt.Println(t.Name, t.DType, t.Shape)
	}
	m, err := f.Matrix(lookuptest.Map{
		tensors[0].Name: tensors[0], tensors[1].Name: tensors[1], tensors[2].Name: tensors[2],
	}, "model.layers.0.mlp.up_proj")
	if err != nil {
		panic(err)
	}
	row := make([]float32, in)
	m.Row(0, row)
	fmt.Println(f.Name(), row[:4])
	// Output:
	// model.layers.0.mlp.up_proj.qweight I32 [64 1]
	// model.layers.0.mlp.up_proj.qzeros I32 [1 1]
	// model.layers.0.mlp.up_proj.scales F16 [1 8]
	// awq gemm 4-bit g64 [-8 -7 -6 -5]
}
