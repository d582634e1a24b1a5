package safetensors_test

import (
	"bytes"
	"fmt"

	"logitscope/internal/format/safetensors"
)

func Example() {
	var buf bytes.Buffer
	err := safetensors.Write(&buf, []safetensors.Tensor{{
		Name:  "model.norm.weight",
		DType: safetensors.BF16,
		Shape: []int{4},
		Data:  safetensors.EncodeBF16([]float32{1, 0.5, -2, 3.14159}),
	}}, map[string]string{"format": "pt"})
	if err != nil {
		panic(err)
	}

	f, err := safetensors.NewFile(bytes.NewReader(buf.Bytes()), int64(buf.Len()), "example")
	if err != nil {
		panic(err)
	}
	info, _ := f.Info("model.norm.weight")
	w, _ := f.ReadFloat32("model.norm.weight")
	fmt.Println(info.DType, info.Shape, info.Offset, info.Length)
	fmt.Println(w) // 3.14159 rounds to the nearest bfloat16
	fmt.Println(f.Metadata["format"])
	// Output:
	// BF16 [4] 112 8
	// [1 0.5 -2 3.140625]
	// pt
}
