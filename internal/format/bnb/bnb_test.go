package bnb

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/lookup/lookuptest"
	"logitscope/internal/format/safetensors"
)

// TestTables: the tables are bnb's kernel constants, bit for bit (FP4's
// code 8 is −0, as the kernel's sign multiply gives).
func TestTables(t *testing.T) {
	for quant, want := range kernelTables {
		got := table(quant)
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Errorf("%s[%d] = %v, bnb's kernel has %v", quant, i, got[i], want[i])
			}
		}
	}
}

// TestDynamicMap checks the nested absmax's map against what
// create_dynamic_map's construction fixes: 256 sorted values, symmetric,
// 0 and 1, and its smallest magnitude, the mean of linspace(0.1, 1, 2)
// times 1e-6.
func TestDynamicMap(t *testing.T) {
	if len(dynamic) != 256 || !slices.IsSorted(dynamic) {
		t.Fatalf("%d values, sorted %v", len(dynamic), slices.IsSorted(dynamic))
	}
	if dynamic[255] != 1 || !slices.Contains(dynamic, 0) || dynamic[0] != -dynamic[254] {
		t.Errorf("ends %v, %v, %v", dynamic[0], dynamic[254], dynamic[255])
	}
	if i := slices.Index(dynamic, 0); dynamic[i+1] != float32(1e-6)*0.55 || dynamic[i-1] != -dynamic[i+1] {
		t.Errorf("smallest magnitudes %v, %v, want ±%v", dynamic[i-1], dynamic[i+1], float32(1e-6)*0.55)
	}
}

// TestRoundTrip quantizes NF4 and FP4, with and without double
// quantization, at shapes whose blocks fit rows, straddle them, or end
// short with an odd count; Matrix's rows must equal the independent
// dequantizer's, and each weight be within half the table's widest gap of
// its block's absmax of W.
func TestRoundTrip(t *testing.T) {
	for _, quant := range []string{"nf4", "fp4"} {
		for _, double := range []bool{false, true} {
			for _, shape := range [][2]int{{4, 128}, {3, 96}, {5, 7}, {300, 64}} {
				f := NF4(double)
				if quant == "fp4" {
					f = FP4(double)
				}
				t.Run(fmt.Sprintf("%s/double=%v/%dx%d", quant, double, shape[0], shape[1]), func(t *testing.T) {
					rows, cols := shape[0], shape[1]
					w := lookuptest.Weights(rows, cols, uint64(rows*cols))
					ts, err := f.Quantize("model.layers.0.mlp.up_proj", w, rows, cols)
					if err != nil {
						t.Fatal(err)
					}
					m := lookup.Memory{}.Put(ts...)
					mat, err := f.Matrix(m, "model.layers.0.mlp.up_proj")
					if err != nil {
						t.Fatal(err)
					}
					want := dequantize(m, "model.layers.0.mlp.up_proj", quant)
					got := mat.Dequantize()
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("w[%d] = %v, the plain dequantizer gives %v", i, got[i], want[i])
						}
					}
					tab := slices.Sorted(slices.Values(kernelTables[quant]))
					var gap float32
					for i := 1; i < len(tab); i++ {
						gap = max(gap, tab[i]-tab[i-1])
					}
					for b := 0; b < len(w); b += blocksize {
						blk := w[b:min(b+blocksize, len(w))]
						am := max(slices.Max(blk), -slices.Min(blk))
						// Double quantization moves the absmax by up to half
						// a step of the dynamic map: a few percent.
						tol := am * (gap/2 + 0.02)
						for i, v := range blk {
							if d := float32(math.Abs(float64(got[b+i] - v))); d > tol {
								t.Fatalf("w[%d] = %v decodes to %v, %v off (absmax %v)", b+i, v, got[b+i], d, am)
							}
						}
					}
				})
			}
		}
	}
}

// TestQuantizeByHand: a block of 64 holding ±1 at two places and 0.5
// elsewhere scales to ±1 and 0.5; NF4's codes are 15, 0 and the nearest
// to 0.5 (0.44070982 at 12 against 0.5626170 at 13: 12), packed high
// nibble first.
func TestQuantizeByHand(t *testing.T) {
	w := make([]float32, 64)
	for i := range w {
		w[i] = 0.5
	}
	w[0], w[3] = 1, -1
	ts, err := NF4(false).Quantize("m", w, 1, 64)
	if err != nil {
		t.Fatal(err)
	}
	if got := ts[0].Data[:3]; !slices.Equal(got, []byte{0xfc, 0xc0, 0xcc}) {
		t.Errorf("bytes % x, want fc c0 cc", got)
	}
	if got := ts[0].Shape; !slices.Equal(got, []int{32, 1}) {
		t.Errorf("weight shape %v, want [32 1]", got)
	}
	if js := string(ts[3].Data); js != `{"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [1, 64]}` {
		t.Errorf("quant state %s", js)
	}
}

// TestMatrixRefuses: each broken checkpoint is refused naming the tensor
// and the values.
func TestMatrixRefuses(t *testing.T) {
	f := NF4(true)
	good, _ := f.Quantize("m", lookuptest.Weights(2, 64, 3), 2, 64)
	const key = "m.weight.quant_state.bitsandbytes__nf4"
	state := func(js string) func(lookup.Memory) {
		return func(m lookup.Memory) {
			m[key] = safetensors.Tensor{DType: safetensors.U8, Shape: []int{len(js)}, Data: []byte(js)}
		}
	}
	for _, tc := range []struct {
		name   string
		change func(lookup.Memory)
		want   string
	}{
		{"no state", func(m lookup.Memory) { delete(m, key) }, "m.weight has no quant state"},
		{"state json", state(`{"quant_type": "nf4"`), key + ": unexpected EOF"},
		{"state key", state(`{"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [2, 64], "zero": 1}`), key + `: json: unknown field "zero"`},
		{"state type", state(`{"quant_type": "fp4", "blocksize": 64, "dtype": "bfloat16", "shape": [2, 64]}`), `quant_type "fp4" under a __nf4 key`},
		{"state shape", state(`{"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [128]}`), "shape [128], want (rows, cols)"},
		{"not nested", state(`{"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [2, 64]}`), "m.weight.absmax: dtype U8, want [F32] (no nested_* in the quant state)"},
		{"half nested", state(`{"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [2, 64], "nested_offset": 0.1}`), "nested_blocksize 0"},
		{"shape vs bytes", state(`{"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [4, 64], "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0.1}`), "m.weight: shape [64 1], want [128 1] (for a [4 64] weight)"},
		{"state dtype", func(m lookup.Memory) {
			m[key] = safetensors.Tensor{DType: safetensors.I8, Shape: []int{2}, Data: []byte("{}")}
		}, key + ": dtype I8"},
		{"nested map", func(m lookup.Memory) { delete(m, "m.weight.nested_quant_map") }, `no tensor "m.weight.nested_quant_map"`},
		{"quant map", func(m lookup.Memory) {
			m["m.weight.quant_map"] = safetensors.Tensor{DType: safetensors.F16, Shape: []int{16}, Data: make([]byte, 32)}
		}, "m.weight.quant_map: dtype F16, want [F32]"},
	} {
		m := lookup.Memory{}.Put(good...)
		tc.change(m)
		if _, err := f.Matrix(m, "m"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	lookuptest.Parse(t, Parse, []lookuptest.Case{
		{Config: `{"quant_method": "bitsandbytes", "load_in_4bit": true, "load_in_8bit": false, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": true, "bnb_4bit_compute_dtype": "bfloat16", "bnb_4bit_quant_storage": "uint8", "llm_int8_skip_modules": null, "llm_int8_threshold": 6.0}`,
			Name: "bnb nf4 double-quant", Floats: []string{"lm_head", "model.embed_tokens"}, Quantized: []string{"model.layers.0.mlp.gate", "model.layers.0.mlp.experts.3.up_proj"}},
		{Config: `{"quant_method": "bitsandbytes", "load_in_4bit": true}`, Name: "bnb fp4"},
		{Config: `{"quant_method": "bitsandbytes", "load_in_4bit": true, "bnb_4bit_quant_type": "nf4", "llm_int8_skip_modules": ["mlp.gate", "model.layers.1"]}`,
			Name: "bnb nf4", Floats: []string{"model.layers.0.mlp.gate", "model.layers.1.self_attn.q_proj"}, Quantized: []string{"model.layers.0.mlp.gate_proj", "model.layers.10.self_attn.q_proj"}},
		{Config: `{"quant_method": "bitsandbytes", "load_in_8bit": true}`, Err: "quantization_config.load_in_8bit = true: LLM.int8 is not supported"},
		{Config: `{"quant_method": "bitsandbytes"}`, Err: "quantization_config.load_in_4bit = missing, want true"},
		{Config: `{"quant_method": "gptq", "load_in_4bit": true}`, Err: `quantization_config.quant_method = "gptq"`},
		{Config: `{"quant_method": "bitsandbytes", "load_in_4bit": true, "bnb_4bit_quant_type": "int4"}`, Err: `bnb_4bit_quant_type = "int4"`},
		{Config: `{"quant_method": "bitsandbytes", "load_in_4bit": true, "bnb_4bit_compute_dtype": "float64"}`, Err: `bnb_4bit_compute_dtype = "float64"`},
		{Config: `{"quant_method": "bitsandbytes", "load_in_4bit": true, "bnb_4bit_quant_storage": "bfloat16"}`, Err: `bnb_4bit_quant_storage = "bfloat16": only uint8`},
		{Config: `{"quant_method": "bitsandbytes", "load_in_4bit": "yes"}`, Err: "quantization_config: json: cannot unmarshal string"},
	})
}

func TestPyFloat(t *testing.T) {
	for x, want := range map[float64]string{0.25: "0.25", -3: "-3.0", 1e-05: "1e-05", 0.0001: "0.0001", 1.5e-7: "1.5e-07", 0: "0.0", 0.012345678: "0.012345678"} {
		if got := pyFloat(x); got != want {
			t.Errorf("pyFloat(%v) = %s, Python writes %s", x, got, want)
		}
	}
}
