package mlx

import (
	"encoding/json"
	"testing"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/lookup/lookuptest"
	"logitscope/internal/format/safetensors"
)

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"group_size": 64, "bits": 4, "mode": "affine", "lm_head": false, "a.b": {"bits": 8, "group_size": 32}}`))
	f.Add([]byte(`{"group_size": 32, "bits": 3, "x": true}`))
	f.Add([]byte(`{"bits": 4}`))
	f.Fuzz(func(t *testing.T, data []byte) { lookuptest.FuzzConfig(t, Parse, data) })
}

// FuzzMatrix feeds Matrix hostile tensors: any dtypes, shapes and byte
// counts for the weight, scales and biases, stacked or not. It must refuse
// or return a matrix that passes Check and decodes.
func FuzzMatrix(f *testing.F) {
	good, _ := New(4, 32).Quantize("m", make([]float32, 64), 2, 32)
	// bits is 2 + bits%7: a 4-bit (2, 32) matrix, and 3-bit experts 1 of 2.
	f.Add(uint8(0), uint8(2), uint8(2), uint8(4), uint8(1), uint8(0), uint8(0), good[0].Data)
	f.Add(uint8(4), uint8(1), uint8(2), uint8(3), uint8(1), uint8(2), uint8(1), make([]byte, 48))
	f.Fuzz(func(t *testing.T, sel, bits, rows, words, groups, experts, e uint8, data []byte) {
		dtypes := []safetensors.DType{safetensors.F16, safetensors.BF16, safetensors.F32, safetensors.U8}
		q, err := Parse(json.RawMessage(`{"group_size": 32, "bits": ` + string('2'+rune(bits%7)) + `}`))
		if err != nil {
			return // 7 and 9 bits
		}
		dt := dtypes[int(sel)%len(dtypes)]
		lead := []int{}
		module, stem := "m", "m"
		if sel&4 != 0 {
			lead = []int{int(experts % 5)}
			module, stem = "l.mlp.experts."+string('0'+rune(e%6))+".up_proj", "l.mlp.switch_mlp.up_proj"
		}
		cut := func(n int) []byte {
			if n > len(data) {
				n = len(data)
			}
			return data[:max(n, 0)]
		}
		wShape := append(append([]int{}, lead...), int(rows%5), int(words%9))
		sShape := append(append([]int{}, lead...), int(rows%5), int(groups%4))
		n := 1
		for _, d := range sShape {
			n *= d
		}
		m := lookup.Memory{
			stem + ".weight": {DType: safetensors.U32, Shape: wShape, Data: cut(len(data) - int(sel>>3))},
			stem + ".scales": {DType: dt, Shape: sShape, Data: cut(n * dt.Size())},
			stem + ".biases": {DType: dt, Shape: sShape, Data: cut(n * dt.Size())},
		}
		mat, err := q.Matrix(m, module)
		if err != nil {
			return
		}
		if err := mat.Check(); err != nil {
			t.Fatalf("Matrix returned a matrix that fails Check: %v", err)
		}
		mat.Dequantize()
	})
}
