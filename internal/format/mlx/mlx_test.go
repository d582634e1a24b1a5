package mlx

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/lookup/lookuptest"
	"logitscope/internal/format/safetensors"
)

// TestRoundTrip quantizes at every bits, group size and scale dtype,
// reads the tensors back through Matrix and compares Row with the
// independent dequantizer, and the result with W to a step.
func TestRoundTrip(t *testing.T) {
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		for _, group := range []int{32, 64, 128} {
			for _, dt := range []safetensors.DType{safetensors.F32, safetensors.F16, safetensors.BF16} {
				name := fmt.Sprintf("%d-bit/g%d/%s", bits, group, dt)
				t.Run(name, func(t *testing.T) {
					f := New(bits, group).WithScales(dt)
					rows, cols := 3, 2*128
					w := lookuptest.Weights(rows, cols, uint64(bits*group))
					ts, err := f.Quantize("model.layers.0.mlp.up_proj", w, rows, cols)
					if err != nil {
						t.Fatal(err)
					}
					m := lookup.Memory{}.Put(ts...)
					mat, err := f.Matrix(m, "model.layers.0.mlp.up_proj")
					if err != nil {
						t.Fatal(err)
					}
					want := dequantize(m, "model.layers.0.mlp.up_proj", -1, bits, group)
					got := make([]float32, cols)
					for r := range rows {
						mat.Row(r, got)
						if !slices.Equal(got, want[r*cols:(r+1)*cols]) {
							t.Fatalf("row %d: Matrix gives %v…, the plain dequantizer %v…", r, got[:4], want[r*cols:r*cols+4])
						}
					}
					if dt != safetensors.F32 {
						return // a rounded scale moves every code's value
					}
					sc := floats(m["model.layers.0.mlp.up_proj.scales"])
					for i, v := range want {
						step := abs(sc[i/group])
						// Half a step, except at the far edge: when rounding
						// q0 shrinks the step, MLX clips the far edge's code,
						// up to a whole step off.
						if d := abs(v - w[i]); d > step*1.0001 {
							t.Fatalf("w[%d] = %v decodes to %v, %v off with a step of %v", i, w[i], v, d, step)
						}
					}
				})
			}
		}
	}
}

// TestQuantizeByHand checks one group against MLX's algorithm worked by
// hand: w = c/31 for c in 0..31 at 4 bits. The larger edge is the max 1,
// so the scale is negative: −(1−0)/15, q0 = rint(1/scale) = −15, scale =
// 1/−15, bias = 1, and code c' = rint((w−1)/scale) = rint(15·(1−w)).
func TestQuantizeByHand(t *testing.T) {
	w := make([]float32, 32)
	for c := range w {
		w[c] = float32(c) / 31
	}
	ts, err := New(4, 32).WithScales(safetensors.F32).Quantize("m", w, 1, 32)
	if err != nil {
		t.Fatal(err)
	}
	m := lookup.Memory{}.Put(ts...)
	if s, b := floats(m["m.scales"]), floats(m["m.biases"]); s[0] != float32(1)/-15 || b[0] != 1 {
		t.Fatalf("scale %v bias %v, want %v and 1", s[0], b[0], float32(1)/-15)
	}
	for c := range 32 {
		want := int(math.RoundToEven(float64((float32(1) - w[c]) / (float32(1) / 15))))
		got := int(m["m.weight"].Data[c/2] >> (4 * (c % 2)) & 15)
		if got != want {
			t.Errorf("code %d = %d, want %d", c, got, want)
		}
	}
}

// TestExperts quantizes three experts one by one, stacks them with Finish
// as mlx-lm stores them, and reads each back by its per-expert name.
func TestExperts(t *testing.T) {
	q, err := Parse(json.RawMessage(`{"bits": 4, "group_size": 64, "model.layers.2.mlp.switch_mlp.down_proj": {"bits": 6, "group_size": 32}}`))
	if err != nil {
		t.Fatal(err)
	}
	f := q.(*Format)
	var all []safetensors.Tensor
	weights := map[string][]float32{}
	for e := range 3 {
		for _, proj := range []string{"gate_proj", "down_proj"} {
			module := fmt.Sprintf("model.layers.2.mlp.experts.%d.%s", e, proj)
			w := lookuptest.Weights(4, 64, uint64(10*e+len(proj)))
			ts, err := f.Quantize(module, w, 4, 64)
			if err != nil {
				t.Fatal(err)
			}
			weights[module] = w
			all = append(all, ts...)
		}
	}
	all = append(all, safetensors.Tensor{Name: "model.norm.weight", DType: safetensors.F32, Shape: []int{1}, Data: make([]byte, 4)})
	stacked, err := f.Finish(all)
	if err != nil {
		t.Fatal(err)
	}
	m := lookup.Memory{}.Put(stacked...)
	var names []string
	for n := range m {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := []string{
		"model.layers.2.mlp.switch_mlp.down_proj.biases", "model.layers.2.mlp.switch_mlp.down_proj.scales", "model.layers.2.mlp.switch_mlp.down_proj.weight",
		"model.layers.2.mlp.switch_mlp.gate_proj.biases", "model.layers.2.mlp.switch_mlp.gate_proj.scales", "model.layers.2.mlp.switch_mlp.gate_proj.weight",
		"model.norm.weight",
	}; !slices.Equal(names, want) {
		t.Fatalf("tensors %v, want %v", names, want)
	}
	if got := m["model.layers.2.mlp.switch_mlp.down_proj.weight"].Shape; !slices.Equal(got, []int{3, 4, 64 * 6 / 32}) {
		t.Errorf("stacked 6-bit down_proj has shape %v", got)
	}
	for module := range weights {
		bits, group := 4, 64
		if strings.HasSuffix(module, "down_proj") {
			bits, group = 6, 32
		}
		var e int
		fmt.Sscanf(strings.TrimPrefix(module, "model.layers.2.mlp.experts."), "%d", &e)
		stem := "model.layers.2.mlp.switch_mlp." + module[strings.LastIndex(module, ".")+1:]
		mat, err := f.Matrix(m, module)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := mat.Dequantize(), dequantize(m, stem, e, bits, group); !slices.Equal(got, want) {
			t.Errorf("%s: Matrix differs from the plain dequantizer of the stack", module)
		}
	}
	// An expert past the stack.
	if _, err := f.Matrix(m, "model.layers.2.mlp.experts.3.gate_proj"); err == nil || !strings.Contains(err.Error(), "expert 3 of 3") {
		t.Errorf("expert 3 of 3: %v", err)
	}
}

func TestFinishRefuses(t *testing.T) {
	f := New(4, 32)
	a, _ := f.Quantize("model.layers.0.mlp.experts.0.up_proj", lookuptest.Weights(2, 32, 1), 2, 32)
	b, _ := f.Quantize("model.layers.0.mlp.experts.2.up_proj", lookuptest.Weights(2, 32, 2), 2, 32)
	c, _ := f.Quantize("model.layers.0.mlp.experts.1.up_proj", lookuptest.Weights(4, 32, 2), 4, 32)
	for _, tc := range []struct {
		name string
		in   []safetensors.Tensor
		want string
	}{
		{"gap", append(slices.Clone(a), b...), "expert 1 of 2 is missing"},
		{"shape", append(slices.Clone(a), c...), "experts.1.up_proj.weight: U32 [4 4], expert 0's is U32 [2 4]"},
		{"twice", append(slices.Clone(a), a...), "appears twice"},
	} {
		if _, err := f.Finish(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	lookuptest.Parse(t, Parse, []lookuptest.Case{
		{Config: `{"group_size": 64, "bits": 4}`, Name: "mlx 4-bit g64", Quantized: []string{"model.embed_tokens", "lm_head"}},
		{Config: `{"group_size": 32, "bits": 3, "mode": "affine", "lm_head": false, "model.layers.0.mlp.switch_mlp.up_proj": false, "model.layers.1.mlp.gate": {"group_size": 64, "bits": 8}}`,
			Name: "mlx 3-bit g32 +3 per-layer", Floats: []string{"lm_head", "model.layers.0.mlp.experts.7.up_proj"}, Quantized: []string{"model.layers.0.mlp.experts.7.gate_proj", "model.layers.1.mlp.gate"}},
		{Config: `{"group_size": 128, "bits": 8, "model.embed_tokens": true}`, Name: "mlx 8-bit g128 +1 per-layer"},
		{Config: `{"group_size": 32, "bits": 4, "mode": "mxfp4"}`, Err: `quantization.mode = "mxfp4": only affine`},
		{Config: `{"group_size": 64, "bits": 4, "x.y": {"mode": "nvfp4"}}`, Err: `quantization.x.y.mode = "nvfp4"`},
		{Config: `{"group_size": 64, "bits": 7}`, Err: "quantization.bits = 7"},
		{Config: `{"group_size": 16, "bits": 4}`, Err: "quantization.group_size = 16"},
		{Config: `{"group_size": 64}`, Err: "quantization.bits is missing"},
		{Config: `{"group_size": 64, "bits": "4"}`, Err: `quantization.bits = "4"`},
		{Config: `{"group_size": 64, "bits": 4, "quant_method": "mlx"}`, Err: `quantization.quant_method = "mlx": not bits`},
		{Config: `{"group_size": 64, "bits": 4, "a.b": {"bits": 2, "scale": 1}}`, Err: "quantization.a.b.scale: unknown setting"},
		{Config: `{"group_size": 64, "bits": 4, "a.b": {"bits": 5, "group_size": 48}}`, Err: "quantization.a.b.group_size = 48"},
		{Config: `{"group_size": 64, "bits": 4, "quantize_input": true}`, Err: "quantization.quantize_input = true"},
		{Config: `[1]`, Err: "not a JSON object"},
		{Config: `null`, Err: "not a JSON object"},
	})
}

// TestMatrixRefuses: each broken checkpoint is refused naming the tensor
// or setting and the values.
func TestMatrixRefuses(t *testing.T) {
	f := New(4, 32)
	good, _ := f.Quantize("m", lookuptest.Weights(2, 64, 3), 2, 64)
	for _, tc := range []struct {
		name   string
		change func(lookup.Memory)
		module string
		want   string
	}{
		{"missing scales", func(m lookup.Memory) { delete(m, "m.scales") }, "m", `m: no tensor "m.scales"`},
		{"weight dtype", func(m lookup.Memory) {
			m["m.weight"] = safetensors.Tensor{DType: safetensors.I32, Shape: []int{2, 8}, Data: make([]byte, 64)}
		}, "m", "m.weight: dtype I32, want [U32]"},
		{"weight bytes", func(m lookup.Memory) {
			m["m.weight"] = safetensors.Tensor{DType: safetensors.U32, Shape: []int{2, 8}, Data: make([]byte, 60)}
		}, "m", "m.weight: 60 bytes for shape [2 8] of U32, want 64"},
		{"bits", func(m lookup.Memory) {
			m["m.weight"] = safetensors.Tensor{DType: safetensors.U32, Shape: []int{2, 6}, Data: make([]byte, 48)}
		}, "m", "m.weight: 6 words a row for 2 groups of 32 at 4-bit g32"},
		{"biases dtype", func(m lookup.Memory) {
			b := m["m.biases"]
			m["m.biases"] = safetensors.Tensor{DType: safetensors.F32, Shape: b.Shape, Data: make([]byte, 16)}
		}, "m", "m.biases: dtype F32, want [BF16]"},
		{"scales shape", func(m lookup.Memory) {
			m["m.scales"] = safetensors.Tensor{DType: safetensors.BF16, Shape: []int{3, 2}, Data: make([]byte, 12)}
		}, "m", "m.scales: shape [3 2], want [2 2]"},
		{"scales int", func(m lookup.Memory) {
			m["m.scales"] = safetensors.Tensor{DType: safetensors.I16, Shape: []int{2, 2}, Data: make([]byte, 8)}
		}, "m", "m.scales: I16 [2 2], want a float tensor"},
		{"not stacked", func(m lookup.Memory) {
			for _, s := range []string{"weight", "scales", "biases"} {
				m["x.mlp.switch_mlp.up_proj."+s] = m["m."+s]
			}
		}, "x.mlp.experts.0.up_proj", "x.mlp.switch_mlp.up_proj.weight: shape [2 8], want 3 dimensions"},
	} {
		m := lookup.Memory{}.Put(good...)
		tc.change(m)
		if _, err := f.Matrix(m, tc.module); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	q, _ := Parse(json.RawMessage(`{"group_size": 32, "bits": 4, "m": false}`))
	if _, err := q.Matrix(lookup.Memory{}.Put(good...), "m"); err == nil || !strings.Contains(err.Error(), "m is left float") {
		t.Errorf("a module set to false: %v", err)
	}
	if _, err := f.Quantize("m", lookuptest.Weights(2, 48, 3), 2, 48); err == nil || !strings.Contains(err.Error(), "48 columns are not whole groups of 32") {
		t.Errorf("48 columns: %v", err)
	}
	if _, err := New(7, 64).Matrix(lookup.Memory{}, "m"); err == nil || !strings.Contains(err.Error(), "bits = 7") {
		t.Errorf("New(7, 64): %v", err)
	}
}

var _ lookup.Finisher = (*Format)(nil)
