package mlx_test

import (
	"fmt"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/mlx"
)

// An MLX 3-bit matrix: mlx-lm's tensors for one row of 32 weights, read
// back as a lookup matrix whose rows decode to scale·q + bias.
func ExampleNew() {
	f := mlx.New(3, 32)
	w := make([]float32, 32)
	for c := range w {
		w[c] = float32(c%8) / 7 // 0, 1/7, …, 1: exactly the 8 levels of 3 bits
	}
	tensors, err := f.Quantize("model.layers.0.mlp.up_proj", w, 1, 32)
	if err != nil {
		panic(err)
	}
	ck := lookup.Memory{}.Put(tensors...)
	for _, t := range tensors {
		fmt.Println(t.Name, t.DType, t.Shape)
	}
	m, err := f.Matrix(ck, "model.layers.0.mlp.up_proj")
	if err != nil {
		panic(err)
	}
	fmt.Printf("%s: %d-bit lookup codes, scale %.4f, bias %v\n", f.Name(), m.Bits, m.Scale[0], m.Offset[0])
	// The scale −1/7 is stored in BF16, so 0 comes back as 0.002.
	fmt.Printf("%.3f\n", m.Dequantize()[:8])
	// Output:
	// model.layers.0.mlp.up_proj.weight U32 [1 3]
	// model.layers.0.mlp.up_proj.scales BF16 [1 1]
	// model.layers.0.mlp.up_proj.biases BF16 [1 1]
	// mlx 3-bit g32: 4-bit lookup codes, scale -0.1426, bias 1
	// [0.002 0.145 0.287 0.430 0.572 0.715 0.857 1.000]
}
