package awq

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/lookup/lookuptest"
	"logitscope/internal/format/safetensors"
)

type golden struct {
	In, Out   int
	GroupSize int `json:"group_size"`
	QWeight   []string
	QZeros    []string
	Scales    [][]float32
	Want      [][]float32
}

func words(t *testing.T, hex []string) []int32 {
	var out []int32
	for _, h := range hex {
		v, err := strconv.ParseUint(strings.TrimPrefix(h, "0x"), 16, 32)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, int32(uint32(v)))
	}
	return out
}

// TestGolden decodes a hand-packed GEMM matrix whose values were worked
// out by hand in testdata/gemm_g2.json.
func TestGolden(t *testing.T) {
	raw, err := os.ReadFile("testdata/gemm_g2.json")
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	var sc []float32
	for _, row := range g.Scales {
		sc = append(sc, row...)
	}
	ng := g.In / g.GroupSize
	file := lookuptest.Write(t, []safetensors.Tensor{
		{Name: "m.qweight", DType: safetensors.I32, Shape: []int{g.In, g.Out / 8}, Data: safetensors.EncodeI32(words(t, g.QWeight))},
		{Name: "m.qzeros", DType: safetensors.I32, Shape: []int{ng, g.Out / 8}, Data: safetensors.EncodeI32(words(t, g.QZeros))},
		{Name: "m.scales", DType: safetensors.F16, Shape: []int{ng, g.Out}, Data: safetensors.EncodeF16(sc)},
	})
	m, err := New(4, g.GroupSize, true).Matrix(file, "m")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Check(); err != nil {
		t.Fatal(err)
	}
	row := make([]float32, g.In)
	for o, want := range g.Want {
		m.Row(o, row)
		for i := range want {
			if row[i] != want[i] {
				t.Errorf("W[%d,%d] = %v, want %v", o, i, row[i], want[i])
			}
		}
	}
}

// dequantize is AutoAWQ's dequantize_gemm written out in loops, from the
// raw tensors: unpack each word in shift order, undo the interleave with
// AWQ_REVERSE_ORDER, then (q − z)·s. It returns W (out, in) in float64.
func dequantize(t *testing.T, ts []safetensors.Tensor, in, out, gs int) []float64 {
	reverse := [8]int{0, 4, 1, 5, 2, 6, 3, 7}
	byName := map[string][]byte{}
	for _, x := range ts {
		byName[x.Name[strings.LastIndex(x.Name, ".")+1:]] = x.Data
	}
	unpack := func(data []byte, n int) [][]int {
		cols := make([][]int, n)
		for i := range n {
			shifted := make([]int, out)
			for j := range out / 8 {
				w := binary.LittleEndian.Uint32(data[4*(i*out/8+j):])
				for k := range 8 {
					shifted[8*j+k] = int(w>>(4*k)) & 15
				}
			}
			cols[i] = make([]int, out)
			for c := range out {
				cols[i][c] = shifted[c/8*8+reverse[c%8]]
			}
		}
		return cols
	}
	q := unpack(byName["qweight"], in)
	z := unpack(byName["qzeros"], in/gs)
	w := make([]float64, out*in)
	for i := range in {
		for o := range out {
			s := float64(safetensors.FromF16(binary.LittleEndian.Uint16(byName["scales"][2*(i/gs*out+o):])))
			w[o*in+i] = float64(q[i][o]-z[i/gs][o]) * s
		}
	}
	return w
}

// TestRoundTrip quantizes random weights, writes them to a safetensors
// file, and checks that the reader's Row equals an independent
// dequantization of the stored tensors exactly, and that it is close to
// the input.
func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		gs   int
		zero bool
	}{{64, true}, {128, true}, {128, false}, {-1, true}, {32, false}} {
		t.Run(New(4, tc.gs, tc.zero).Name(), func(t *testing.T) {
			const out, in = 16, 256
			rng := rand.New(rand.NewPCG(1, uint64(tc.gs)))
			w := make([]float32, out*in)
			for i := range w {
				w[i] = float32(rng.NormFloat64() * 0.05)
			}
			f := New(4, tc.gs, tc.zero)
			ts, err := f.Quantize("layer.q_proj", w, out, in)
			if err != nil {
				t.Fatal(err)
			}
			gs := tc.gs
			if gs == -1 {
				gs = in
			}
			want := dequantize(t, ts, in, out, gs)
			m, err := f.Matrix(lookuptest.Write(t, ts), "layer.q_proj")
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Check(); err != nil {
				t.Fatal(err)
			}
			got := m.Dequantize()
			var maxErr float64
			for i := range got {
				if float64(got[i]) != want[i] {
					t.Fatalf("W[%d] = %v, independent dequantization %v", i, got[i], want[i])
				}
				maxErr = max(maxErr, math.Abs(float64(got[i]-w[i])))
			}
			// A 4-bit step of a group spanning about ±4σ: half a step is under 0.03.
			if maxErr > 0.03 {
				t.Errorf("max |W − Q(W)| = %v", maxErr)
			}
		})
	}
}

// TestQuantizeGolden checks the writer's codes for groups whose scales
// are exact, worked out by hand.
func TestQuantizeGolden(t *testing.T) {
	// Outputs 0..7, one group of 2 inputs each; AutoAWQ does not widen
	// [min, max] to hold 0, so z clamps to [0, 15].
	w := []float32{
		0, 15, // s = 15/15 = 1, z = 0: q = 0, 15
		-1.5, 6, // s = 7.5/15 = 0.5, z = 3: q = 0, 15
		-1, 1, // (not checked: s = 2/15 is not exact in fp16)
		0, 0, // s = fp16(1e-5/15), z = 0: q = 0, 0
		2, 4, // s = 2/15, z = −round(15) = −15 → 0: q = round(15), round(30) → 15, 15
		-3, -3, // s = fp16(1e-5/15), z = −round(−3/s) → 15: q = round(−3/s)+15 → 0, 0
		0.5, 1.5, // (not checked)
		-7.5, 0, // s = 0.5, z = 15: q = 0, 15
	}
	ts, err := New(4, 2, true).Quantize("m", w, 8, 2)
	if err != nil {
		t.Fatal(err)
	}
	q := dequantizeCodes(ts[0].Data, 2, 8)
	z := dequantizeCodes(ts[1].Data, 1, 8)
	for _, c := range []struct{ o, q0, q1, z int }{
		{0, 0, 15, 0}, {1, 0, 15, 3}, {3, 0, 0, 0}, {4, 15, 15, 0}, {5, 0, 0, 15}, {7, 0, 15, 15},
	} {
		if q[0][c.o] != c.q0 || q[1][c.o] != c.q1 || z[0][c.o] != c.z {
			t.Errorf("output %d: q = %d, %d z = %d, want %d, %d z = %d", c.o, q[0][c.o], q[1][c.o], z[0][c.o], c.q0, c.q1, c.z)
		}
	}
}

// dequantizeCodes unpacks (n, out/8) GEMM words into codes[n][out] by
// searching each output's nibble, a third way of reading the order.
func dequantizeCodes(data []byte, n, out int) [][]int {
	pos := map[int]int{0: 0, 2: 1, 4: 2, 6: 3, 1: 4, 3: 5, 5: 6, 7: 7} // output → nibble
	codes := make([][]int, n)
	for i := range n {
		codes[i] = make([]int, out)
		for o := range out {
			w := binary.LittleEndian.Uint32(data[4*(i*out/8+o/8):])
			codes[i][o] = int(w>>(4*pos[o%8])) & 15
		}
	}
	return codes
}

func TestParse(t *testing.T) {
	lookuptest.Parse(t, Parse, lookuptest.Cases([][3]string{
		{`{"quant_method":"awq","zero_point":true,"group_size":128,"bits":4,"version":"gemm","modules_to_not_convert":null}`, "awq gemm 4-bit g128", ""},
		{`{"quant_method":"awq","zero_point":false,"group_size":64,"bits":4,"version":"GEMM"}`, "awq gemm 4-bit g64 sym", ""},
		{`{"zero_point":true,"q_group_size":-1,"w_bit":4,"version":"GEMM"}`, "awq gemm 4-bit g-1", ""},
		{`{"quant_method":"awq","bits":4,"group_size":128,"version":"gemv"}`, "", `version "gemv"`},
		{`{"quant_method":"awq","bits":4,"group_size":128,"version":"gemv_fast"}`, "", `version "gemv_fast"`},
		{`{"quant_method":"awq","bits":4,"group_size":128,"version":"marlin"}`, "", `version "marlin"`},
		{`{"quant_method":"awq","bits":4,"group_size":128,"version":"exllama"}`, "", `version "exllama"`},
		{`{"quant_method":"awq","bits":4,"group_size":128,"version":"wat"}`, "", `unknown version "wat"`},
		{`{"quant_method":"awq","bits":8,"group_size":128,"version":"gemm"}`, "", "bits 8"},
		{`{"quant_method":"awq","bits":4,"group_size":0}`, "", "group_size 0"},
		{`{"quant_method":"gptq","bits":4}`, "", `quant_method "gptq"`},
		{`[1]`, "", "quantization_config"},
	}))
}

func TestQuantized(t *testing.T) {
	f, err := Parse(json.RawMessage(`{"quant_method":"awq","bits":4,"group_size":128,"version":"gemm","modules_to_not_convert":["visual","mlp.gate"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for module, want := range map[string]bool{
		"model.layers.0.self_attn.q_proj":  true,
		"model.layers.0.mlp.gate_proj":     false, // substring, as AutoAWQ matches
		"model.visual.blocks.0.attn.qkv":   false,
		"model.layers.0.mlp.down_proj":     true,
		"model.layers.12.mlp.experts.3.w1": true,
		"lm_head":                          false, // outside the decoder layers
		"model.embed_tokens":               false,
		"model.norm":                       false,
	} {
		if got := f.Quantized(module); got != want {
			t.Errorf("Quantized(%q) = %v, want %v", module, got, want)
		}
	}
	if f.Acts("x") != "" {
		t.Error("AWQ declares no activation quantization")
	}
}

// TestConfig checks the quantization_config against the one AutoAWQ's
// to_transformers_dict writes, and that it parses back.
func TestConfig(t *testing.T) {
	f := New(4, 128, true)
	want := `{"bits":4,"group_size":128,"modules_to_not_convert":null,"quant_method":"awq","version":"gemm","zero_point":true}`
	if got := string(f.Config()); got != want {
		t.Errorf("Config() = %s, want %s", got, want)
	}
	back, err := Parse(f.Config())
	if err != nil || back.Name() != f.Name() {
		t.Errorf("Parse(Config()) = %v, %v", back, err)
	}
}

func TestMatrixErrors(t *testing.T) {
	good := func() lookuptest.Map {
		ts, err := New(4, 4, true).Quantize("m", make([]float32, 8*8), 8, 8)
		if err != nil {
			t.Fatal(err)
		}
		m := lookuptest.Map{}
		for _, x := range ts {
			m[x.Name] = x
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		edit  func(lookuptest.Map)
		wants string
	}{
		{"missing qzeros", func(m lookuptest.Map) { delete(m, "m.qzeros") }, "m.qzeros"},
		{"qweight dtype", func(m lookuptest.Map) { x := m["m.qweight"]; x.DType = safetensors.U32; m["m.qweight"] = x }, "m.qweight: dtype U32, want I32"},
		{"scales bf16", func(m lookuptest.Map) { x := m["m.scales"]; x.DType = safetensors.BF16; m["m.scales"] = x }, "m.scales: dtype BF16, want F16"},
		{"qzeros shape", func(m lookuptest.Map) { x := m["m.qzeros"]; x.Shape = []int{1, 2}; m["m.qzeros"] = x }, "m.qzeros: shape [1 2], want [2 1]"},
		{"qweight 1-d", func(m lookuptest.Map) { x := m["m.qweight"]; x.Shape = []int{8}; m["m.qweight"] = x }, "m.qweight: shape [8]"},
		{"qweight bytes", func(m lookuptest.Map) { x := m["m.qweight"]; x.Data = x.Data[:4]; m["m.qweight"] = x }, "m.qweight: 4 bytes"},
		{"group size", func(m lookuptest.Map) {
			x := m["m.qweight"]
			x.Shape = []int{6, 1}
			x.Data = x.Data[:24]
			m["m.qweight"] = x
		}, "group_size"},
	} {
		m := good()
		tc.edit(m)
		_, err := New(4, 4, true).Matrix(m, "m")
		if err == nil || !strings.Contains(err.Error(), tc.wants) {
			t.Errorf("%s: %v, want an error containing %q", tc.name, err, tc.wants)
		}
	}
}

func TestQuantizeErrors(t *testing.T) {
	f := New(4, 128, true)
	for _, tc := range []struct {
		rows, cols int
		wants      string
	}{{4, 128, "multiple of 8"}, {8, 100, "groups of 128"}, {0, 0, "shape"}} {
		_, err := f.Quantize("m", make([]float32, tc.rows*tc.cols), tc.rows, tc.cols)
		if err == nil || !strings.Contains(err.Error(), tc.wants) {
			t.Errorf("(%d, %d): %v, want %q", tc.rows, tc.cols, err, tc.wants)
		}
	}
}

var _ lookup.Format = (*Format)(nil)

// BenchmarkMatrix transcodes a 4096 x 4096 g128 GEMM matrix.
func BenchmarkMatrix(b *testing.B) {
	const n = 4096
	w := make([]float32, n*n)
	for i := range w {
		w[i] = float32(i%97) / 97
	}
	f := New(4, 128, true)
	ts, err := f.Quantize("m", w, n, n)
	if err != nil {
		b.Fatal(err)
	}
	m := lookuptest.Map{}
	for _, x := range ts {
		m[x.Name] = x
	}
	b.SetBytes(int64(n * n / 2))
	for b.Loop() {
		if _, err := f.Matrix(m, "m"); err != nil {
			b.Fatal(err)
		}
	}
}
