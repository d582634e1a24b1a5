package awq

import (
	"encoding/json"
	"testing"

	"logitscope/internal/format/lookup/lookuptest"
	"logitscope/internal/format/safetensors"
)

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"quant_method":"awq","zero_point":true,"group_size":128,"bits":4,"version":"gemm","modules_to_not_convert":null}`))
	f.Add([]byte(`{"w_bit":4,"q_group_size":-1,"version":"GEMV"}`))
	f.Fuzz(func(t *testing.T, qc []byte) {
		fm, err := Parse(json.RawMessage(qc))
		if err != nil {
			return
		}
		fm.Name()
		fm.Quantized("model.layers.0.mlp.up_proj")
		if _, err := Parse(fm.Config()); err != nil {
			t.Fatalf("Config() %s does not parse back: %v", fm.Config(), err)
		}
	})
}

// FuzzMatrix reads hostile tensors: any dtype, shape and bytes. Matrix
// must refuse or return a matrix that passes Check, never panic.
func FuzzMatrix(f *testing.F) {
	f.Add(4, 1, 2, byte(0), byte(0), []byte("0123456789abcdef0123456789abcdef"), 2)
	f.Add(8, 1, 1, byte(0), byte(1), make([]byte, 48), -1)
	f.Fuzz(func(t *testing.T, in, words, ng int, dz, ds byte, data []byte, gs int) {
		dtypes := []safetensors.DType{safetensors.I32, safetensors.F16, safetensors.BF16, safetensors.U8}
		cut := func(n int) []byte {
			if n < 0 || n > len(data) {
				return data
			}
			return data[:n]
		}
		m := lookuptest.Map{
			"m.qweight": {DType: safetensors.I32, Shape: []int{in, words}, Data: cut(4 * in * words)},
			"m.qzeros":  {DType: dtypes[int(dz)%len(dtypes)], Shape: []int{ng, words}, Data: cut(4 * ng * words)},
			"m.scales":  {DType: dtypes[int(ds)%len(dtypes)], Shape: []int{ng, 8 * words}, Data: cut(16 * ng * words)},
		}
		mat, err := New(4, gs, true).Matrix(m, "m")
		if err != nil {
			return
		}
		lookuptest.Sound(t, "awq", mat)
	})
}
