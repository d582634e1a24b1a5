package compressed

import (
	"encoding/json"
	"testing"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/lookup/lookuptest"
	"logitscope/internal/format/safetensors"
)

func FuzzParse(f *testing.F) {
	for _, name := range []string{"ct-w4a16", "ct-w8a8", "ct-fp8", "ct-nvfp4"} {
		fm, _ := ByName(name)
		f.Add([]byte(fm.Config()))
	}
	f.Add([]byte(`{"quant_method":"compressed-tensors","format":"mixed-precision","ignore":["re:.*gate$"],"config_groups":{"a":{"format":"float-quantized","targets":["re:.*"],"weights":{"num_bits":8,"type":"float","strategy":"block","block_structure":"128x128"}}}}`))
	f.Fuzz(func(t *testing.T, qc []byte) {
		fm, err := Parse(json.RawMessage(qc))
		if err != nil {
			return
		}
		fm.Name()
		fm.Quantized("model.layers.0.mlp.gate")
		fm.Acts("lm_head")
		back, err := Parse(fm.Config())
		if err != nil || back.Name() != fm.Name() {
			t.Fatalf("Config() %s parses back to %v, %v", fm.Config(), back, err)
		}
	})
}

// fuzzFormats are one format per reading path.
var fuzzFormats = func() []lookup.Format {
	var out []lookup.Format
	add := func(f lookup.Format, err error) {
		if err != nil {
			panic(err)
		}
		out = append(out, f)
	}
	add(W4A16(4, false, "group"))
	add(W8A8())
	add(FP8("channel", false))
	add(NVFP4(1))
	add(Parse(json.RawMessage(cfg("pack-quantized", `{"targets":["Linear"],"weights":{"num_bits":2,"strategy":"channel","symmetric":false}}`))))
	add(Parse(json.RawMessage(cfg("naive-quantized", `{"targets":["Linear"],"weights":{"num_bits":4,"strategy":"tensor","symmetric":false}}`))))
	add(Parse(json.RawMessage(cfg("float-quantized", `{"targets":["Linear"],"weights":{"num_bits":8,"type":"float","strategy":"block","block_structure":[2,3]}}`))))
	return out
}()

// FuzzMatrix reads hostile tensors (any dtype, shape and bytes) with
// each format: Matrix must refuse them or return a matrix that passes
// Check and decodes, never panic.
func FuzzMatrix(f *testing.F) {
	f.Add(byte(0), 8, 8, 2, byte(0), byte(2), []byte("0123456789abcdef0123456789abcdef0123456789abcdef"))
	f.Add(byte(3), 2, 4, 1, byte(5), byte(5), []byte{0x21, 0xF7, 0, 0, 0x38, 0x48, 0, 0, 0, 0, 0, 0x40})
	f.Add(byte(1), 2, 3, 1, byte(3), byte(1), []byte{1, 2, 3, 4, 5, 6, 0, 0x3f, 0, 0x3f})
	f.Fuzz(func(t *testing.T, which byte, a, b, c int, d1, d2 byte, data []byte) {
		fm := fuzzFormats[int(which)%len(fuzzFormats)]
		dtypes := []safetensors.DType{safetensors.I32, safetensors.BF16, safetensors.I64, safetensors.I8, safetensors.U8, safetensors.F8E4M3, safetensors.F32}
		dt := func(x byte) safetensors.DType { return dtypes[int(x)%len(dtypes)] }
		part := func(i int) []byte { // slices of data, possibly mismatching their shapes
			n := len(data) / 6
			return data[i*n : (i+1)*n]
		}
		shape := []byte{byte(a), 0, 0, 0, 0, 0, 0, 0, byte(b), 0, 0, 0, 0, 0, 0, 0}
		m := lookuptest.Map{
			"m.weight_packed":       {DType: dt(d1), Shape: []int{a, b}, Data: part(0)},
			"m.weight":              {DType: dt(d2), Shape: []int{a, b}, Data: part(1)},
			"m.weight_scale":        {DType: dt(d2 + d1), Shape: []int{a, c}, Data: part(2)},
			"m.weight_zero_point":   {DType: dt(d1 + 3), Shape: []int{c, b}, Data: part(3)},
			"m.weight_g_idx":        {DType: safetensors.I32, Shape: []int{b}, Data: part(4)},
			"m.weight_global_scale": {DType: dt(d2 + 1), Shape: []int{c}, Data: part(5)},
			"m.weight_shape":        {DType: safetensors.I64, Shape: []int{2}, Data: shape},
		}
		mat, err := fm.Matrix(m, "m")
		if err != nil {
			return
		}
		lookuptest.Sound(t, fm.Name(), mat)
	})
}

// FuzzMatrixEdit starts from a writer's valid tensors and corrupts one:
// its dtype, a dim, and bytes overwritten from patch, reaching the checks
// deep inside each reader. Matrix must refuse or return a sound matrix.
func FuzzMatrixEdit(f *testing.F) {
	f.Add(byte(0), byte(0), byte(0), 0, 0, []byte{})
	f.Add(byte(0), byte(3), byte(0), 0, 0, []byte{0xff, 0xff, 0xff, 0xff})
	f.Add(byte(3), byte(1), byte(5), 1, 2, []byte{0x7f})
	f.Add(byte(2), byte(0), byte(5), 0, 0, []byte{0xff})
	f.Fuzz(func(t *testing.T, which, tensor, dtype byte, dim, size int, patch []byte) {
		fm := fuzzFormats[int(which)%len(fuzzFormats)]
		w := make([]float32, 8*32)
		for i := range w {
			w[i] = float32(i%13) - 6
		}
		ts, err := fm.Quantize("m", w, 8, 32)
		if err != nil {
			return // the block-scale format has no writer
		}
		x := &ts[int(tensor)%len(ts)]
		if dtype != 0 {
			x.DType = []safetensors.DType{safetensors.I32, safetensors.BF16, safetensors.I64, safetensors.I8, safetensors.U8, safetensors.F8E4M3, safetensors.F32}[int(dtype)%7]
		}
		if size != 0 && len(x.Shape) > 0 {
			x.Shape = append([]int(nil), x.Shape...)
			x.Shape[((dim%len(x.Shape))+len(x.Shape))%len(x.Shape)] = size
		}
		x.Data = append([]byte(nil), x.Data...)
		copy(x.Data, patch)
		m := lookuptest.Map{}
		for _, t := range ts {
			m[t.Name] = t
		}
		mat, err := fm.Matrix(m, "m")
		if err != nil {
			return
		}
		lookuptest.Sound(t, fm.Name(), mat)
	})
}
