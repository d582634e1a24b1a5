package bnb

import (
	"testing"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/lookup/lookuptest"
	"logitscope/internal/format/safetensors"
)

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"quant_method": "bitsandbytes", "load_in_4bit": true, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": true, "llm_int8_skip_modules": ["lm_head"]}`))
	f.Add([]byte(`{"quant_method": "bitsandbytes", "load_in_8bit": true}`))
	f.Fuzz(func(t *testing.T, data []byte) { lookuptest.FuzzConfig(t, Parse, data) })
}

// FuzzParseState: any quant-state bytes are refused or give a state whose
// Encode parses back to the same state.
func FuzzParseState(f *testing.F) {
	f.Add([]byte(`{"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [4, 96], "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0.0123}`))
	f.Add([]byte(`{"quant_type": "fp4", "blocksize": 4096, "dtype": "float16", "shape": [1, 1]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseState(data, "x")
		if err != nil {
			return
		}
		back, err := ParseState(s.Encode(), "x")
		if err != nil {
			t.Fatalf("Encode %s of %s does not parse: %v", s.Encode(), data, err)
		}
		if string(back.Encode()) != string(s.Encode()) {
			t.Fatalf("%s reads back as %s", s.Encode(), back.Encode())
		}
	})
}

// FuzzMatrix feeds Matrix a hostile quant state and tensors of any dtype
// and length: it must refuse or return a matrix that passes Check and
// decodes.
func FuzzMatrix(f *testing.F) {
	f.Add([]byte(`{"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [3, 5]}`), uint8(0), uint16(8), uint16(1), []byte{1, 2, 3, 4})
	f.Add([]byte(`{"quant_type": "nf4", "blocksize": 32, "dtype": "float32", "shape": [2, 40], "nested_blocksize": 2, "nested_dtype": "float32", "nested_offset": -1}`), uint8(5), uint16(40), uint16(3), []byte{200, 0, 7})
	f.Fuzz(func(t *testing.T, state []byte, sel uint8, wlen, alen uint16, data []byte) {
		bytesOf := func(n int) []byte {
			b := make([]byte, n)
			copy(b, data)
			return b
		}
		adt := safetensors.F32
		if sel&1 != 0 {
			adt = safetensors.U8
		}
		nested := int(sel>>1) % 4
		m := lookup.Memory{}.Put(
			safetensors.Tensor{Name: "m.weight.quant_state.bitsandbytes__nf4", DType: safetensors.U8, Shape: []int{len(state)}, Data: state},
			safetensors.Tensor{Name: "m.weight", DType: safetensors.U8, Shape: []int{int(wlen % 512), 1}, Data: bytesOf(int(wlen % 512))},
			safetensors.Tensor{Name: "m.weight.quant_map", DType: safetensors.F32, Shape: []int{16}, Data: safetensors.EncodeF32(nf4)},
			safetensors.Tensor{Name: "m.weight.absmax", DType: adt, Shape: []int{int(alen % 64)}, Data: bytesOf(int(alen%64) * adt.Size())},
			safetensors.Tensor{Name: "m.weight.nested_absmax", DType: safetensors.F32, Shape: []int{nested}, Data: bytesOf(4 * nested)},
			safetensors.Tensor{Name: "m.weight.nested_quant_map", DType: safetensors.F32, Shape: []int{256}, Data: bytesOf(1024)},
		)
		mat, err := NF4(false).Matrix(m, "m")
		if err != nil {
			return
		}
		if err := mat.Check(); err != nil {
			t.Fatalf("Matrix returned a matrix that fails Check: %v", err)
		}
		mat.Dequantize()
	})
}
