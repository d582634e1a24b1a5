package gptq

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/safetensors"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.txt")

// tensors is a module's stored tensors in memory, as a checkpoint serves
// them.
type tensors map[string]safetensors.Tensor

func (t tensors) Raw(name string) ([]byte, safetensors.TensorInfo, error) {
	x, ok := t[name]
	if !ok {
		return nil, safetensors.TensorInfo{}, fmt.Errorf("no tensor %q", name)
	}
	return x.Data, safetensors.TensorInfo{Name: name, DType: x.DType, Shape: x.Shape}, nil
}

func tensorsOf(ts []safetensors.Tensor) tensors {
	m := tensors{}
	for _, t := range ts {
		m[t.Name] = t
	}
	return m
}

// weights is a deterministic test matrix with uneven columns, so that
// act-order permutes.
func weights(rows, cols int, seed uint32) []float32 {
	w := make([]float32, rows*cols)
	x := seed*2654435761 + 1
	for i := range w {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		w[i] = (float32(x%2001)/1000 - 1) * float32(1+(i%cols)%5) / 4
	}
	return w
}

// configs is every layout: each bit width, group sizes including −1 and
// a ragged last group, sym and asym, act-order, v1 and v2.
func configs() []Config {
	var out []Config
	for _, bits := range Bits {
		for _, gs := range []int{32, -1, 24} {
			for _, sym := range []bool{false, true} {
				for _, desc := range []bool{false, true} {
					for _, v2 := range []bool{false, true} {
						out = append(out, Config{Bits: bits, GroupSize: gs, Sym: sym, DescAct: desc, V2: v2})
					}
				}
			}
		}
	}
	return out
}

// dequantize is the test's own reading of GPTQ's tensors: each column of
// qweight and row of qzeros spelled out bit by bit, W = s·(q−z) in
// float64, the zero point plus one in v1.
func dequantize(t *testing.T, ts tensors, module string, c Config) (w []float32, rows, cols int) {
	t.Helper()
	qw, qz, sc, gi := ts[module+".qweight"], ts[module+".qzeros"], ts[module+".scales"], ts[module+".g_idx"]
	u32 := func(b []byte, i int) uint32 { return binary.LittleEndian.Uint32(b[4*i:]) }
	bitsOf := func(word func(k int) uint32, n int) []int {
		var out []int
		for k := range n {
			for b := range 32 {
				out = append(out, int(word(k)>>b&1))
			}
		}
		return out
	}
	value := func(stream []int, i int) int {
		v := 0
		for j := range c.Bits {
			v += stream[i*c.Bits+j] << j
		}
		return v
	}
	words, rows := qw.Shape[0], qw.Shape[1]
	cols = words * 32 / c.Bits
	groups := sc.Shape[0]
	w = make([]float32, rows*cols)
	for r := range rows {
		q := bitsOf(func(k int) uint32 { return u32(qw.Data, k*rows+r) }, words)
		for i := range cols {
			g := int(int32(u32(gi.Data, i)))
			z := value(bitsOf(func(k int) uint32 { return u32(qz.Data, g*qz.Shape[1]+k) }, qz.Shape[1]), r)
			if !c.V2 {
				z++
			}
			s := float64(safetensors.FromF16(binary.LittleEndian.Uint16(sc.Data[2*(g*rows+r):])))
			w[r*cols+i] = float32(s * float64(value(q, i)-z))
		}
	}
	if groups != Groups(cols, c.GroupSize) {
		t.Fatalf("%d groups for %d inputs at group size %d", groups, cols, c.GroupSize)
	}
	return w, rows, cols
}

func (c Config) String() string { f, _ := New(c); return f.Name() }

// TestRoundTrip quantizes a matrix in every layout and reads it back:
// Matrix's rows are exactly the test's own dequantization of the stored
// tensors, and the rounding is to nearest on the grid.
func TestRoundTrip(t *testing.T) {
	const rows, cols = 64, 96
	w := weights(rows, cols, 1)
	for _, c := range configs() {
		t.Run(c.String(), func(t *testing.T) {
			f, err := New(c)
			if err != nil {
				t.Fatal(err)
			}
			ts, err := f.Quantize("m", w, rows, cols)
			if err != nil {
				t.Fatal(err)
			}
			m, err := f.Matrix(tensorsOf(ts), "m")
			if err != nil {
				t.Fatal(err)
			}
			want, r, k := dequantize(t, tensorsOf(ts), "m", c)
			if r != rows || k != cols || m.Rows != rows || m.Cols != cols {
				t.Fatalf("shape (%d, %d), matrix (%d, %d), want (%d, %d)", r, k, m.Rows, m.Cols, rows, cols)
			}
			if (c.DescAct && c.GroupSize != -1) != (m.GIdx != nil) {
				t.Errorf("desc_act %v but per-column groups %v", c.DescAct, m.GIdx != nil)
			}
			got := m.Dequantize()
			var worst float64
			for i := range got {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("W[%d,%d] = %g, the stored tensors say %g", i/cols, i%cols, got[i], want[i])
				}
				worst = max(worst, math.Abs(float64(got[i]-w[i])))
			}
			// RTN on an asymmetric grid holding the whole range misses by
			// at most half a step (a step is at most range/maxq); v1's
			// zero clamp and sym's clipping of the short side may add one.
			step := 2 * 1.25 / float64(c.maxq()) // |w| ≤ 1.25
			if worst > step*1.01 {
				t.Errorf("worst error %g beyond a step %g", worst, step)
			}
		})
	}
}

// TestGolden pins the bytes of every layout for one tiny matrix
// (testdata/golden.txt, rewritten by -update), and checks a 3-bit column
// worked out by hand: the codes 0..7 repeated 4 times as one 96-bit
// little-endian stream straddling three words.
func TestGolden(t *testing.T) {
	words := []uint32{0x88fac688, 0xc688fac6, 0xfac688fa}
	for i := range 32 {
		if got := field(func(k int) uint32 { return words[k] }, 3*i, 3); got != i%8 {
			t.Errorf("3-bit value %d = %d, want %d", i, got, i%8)
		}
	}
	var packed [3]uint32
	for i := range 32 {
		put(func(k int) *uint32 { return &packed[k] }, 3*i, 3, i%8)
	}
	if packed != [3]uint32(words) {
		t.Errorf("packed %#x, want %#x", packed, words)
	}

	const rows, cols = 32, 32
	w := weights(rows, cols, 7)
	var b strings.Builder
	for _, c := range configs() {
		if c.GroupSize == 24 {
			continue
		}
		f, _ := New(c)
		ts, err := f.Quantize("m", w, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "%s\n", f.Name())
		for _, x := range ts {
			fmt.Fprintf(&b, "  %s %s %v %s\n", x.Name, x.DType, x.Shape, hex.EncodeToString(x.Data))
		}
	}
	path := filepath.Join("testdata", "golden.txt")
	if *update {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		got := strings.Split(b.String(), "\n")
		for i, line := range strings.Split(string(want), "\n") {
			if i >= len(got) || got[i] != line {
				t.Fatalf("%s line %d differs:\n got %.200s\nwant %.200s", path, i+1, got[min(i, len(got)-1)], line)
			}
		}
		t.Fatalf("%s: output longer than the golden file", path)
	}
}

// TestHandDequant reads a module whose tensors are written out by hand:
// 4-bit v1, 8 inputs, 8 outputs, one group, scale 0.5, stored zero 7
// (zero point 8), output o holding the codes o, o+1, …: W[o,i] =
// 0.5·((o+i)%16 − 8).
func TestHandDequant(t *testing.T) {
	var qw [8]uint32
	for o := range 8 {
		for i := range 8 {
			qw[o] |= uint32((o+i)%16) << (4 * i)
		}
	}
	scales := make([]float32, 8)
	for i := range scales {
		scales[i] = 0.5
	}
	ts := tensors{
		"m.qweight": {DType: safetensors.I32, Shape: []int{1, 8}, Data: words(qw[:])},
		"m.qzeros":  {DType: safetensors.I32, Shape: []int{1, 1}, Data: words([]uint32{0x77777777})},
		"m.scales":  {DType: safetensors.F16, Shape: []int{1, 8}, Data: safetensors.EncodeF16(scales)},
		"m.g_idx":   {DType: safetensors.I32, Shape: []int{8}, Data: make([]byte, 32)},
	}
	f, _ := New(Config{Bits: 4, GroupSize: -1, Sym: true})
	m, err := f.Matrix(ts, "m")
	if err != nil {
		t.Fatal(err)
	}
	for o := range 8 {
		row := make([]float32, 8)
		m.Row(o, row)
		for i, x := range row {
			if want := 0.5 * float32((o+i)%16-8); x != want {
				t.Errorf("W[%d,%d] = %g, want %g", o, i, x, want)
			}
		}
	}
}

// TestRefusals: each setting or tensor this package does not read is
// refused naming its field or tensor and value.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct{ qc, want string }{
		{`{"quant_method":"gptq","bits":4,"group_size":128,"sym":true,"checkpoint_format":"marlin"}`, `checkpoint_format "marlin"`},
		{`{"quant_method":"gptq","bits":4,"group_size":128,"sym":true,"checkpoint_format":"bitblas"}`, `checkpoint_format "bitblas"`},
		{`{"quant_method":"gptq","bits":4,"group_size":128,"sym":true,"format":"ipex"}`, `format "ipex"`},
		{`{"quant_method":"gptq","bits":4,"group_size":128,"sym":true,"is_marlin_format":true}`, `is_marlin_format true`},
		{`{"quant_method":"gptq","bits":5,"group_size":128,"sym":true}`, `bits 5`},
		{`{"quant_method":"gptq","bits":6,"group_size":128,"sym":true}`, `bits 6`},
		{`{"quant_method":"gptq","bits":7,"group_size":128,"sym":true}`, `bits 7`},
		{`{"quant_method":"gptq","bits":4,"group_size":128}`, `no sym`},
		{`{"quant_method":"gptq","group_size":128,"sym":true}`, `no bits`},
		{`{"quant_method":"gptq","bits":4,"sym":true}`, `no group_size`},
		{`{"quant_method":"gptq","bits":4,"group_size":0,"sym":true}`, `group_size 0`},
		{`{"quant_method":"gptq","bits":4,"group_size":-2,"sym":true}`, `group_size -2`},
		{`{"quant_method":"gptq","bits":"4","group_size":128,"sym":true}`, `bits "4"`},
		{`{"quant_method":"gptq","bits":4,"group_size":128,"sym":true,"pack_dtype":"int16"}`, `pack_dtype "int16"`},
		{`{"quant_method":"gptq","bits":4,"group_size":128,"sym":true,"dynamic":{"-:.*mlp.*":{}}}`, `dynamic`},
		{`{"quant_method":"awq","bits":4,"group_size":128,"sym":true}`, `quant_method "awq"`},
		{`[1]`, `quantization_config`},
	} {
		_, err := Parse(json.RawMessage(tc.qc))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%s) = %v, want an error naming %s", tc.qc, err, tc.want)
		}
	}

	f, _ := New(Config{Bits: 4, GroupSize: 32, Sym: false})
	good, err := f.Quantize("m", weights(32, 64, 3), 32, 64)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		edit  func(tensors)
		want  string
		other Config
	}{
		{"scales shape", func(ts tensors) { x := ts["m.scales"]; x.Shape = []int{1, 64}; ts["m.scales"] = x }, "m.scales: shape [1 64], want (2, 32)", Config{}},
		{"scales dtype", func(ts tensors) { x := ts["m.scales"]; x.DType = safetensors.BF16; ts["m.scales"] = x }, "m.scales: dtype BF16", Config{}},
		{"qzeros shape", func(ts tensors) { x := ts["m.qzeros"]; x.Shape = []int{4, 2}; ts["m.qzeros"] = x }, "m.qzeros: shape [4 2]", Config{}},
		{"qweight dtype", func(ts tensors) { x := ts["m.qweight"]; x.DType = safetensors.F32; ts["m.qweight"] = x }, "m.qweight: dtype F32", Config{}},
		{"qweight missing", func(ts tensors) { delete(ts, "m.qweight") }, `"m.qweight"`, Config{}},
		{"g_idx shape", func(ts tensors) { x := ts["m.g_idx"]; x.Shape = []int{16}; x.Data = x.Data[:64]; ts["m.g_idx"] = x }, "m.g_idx: shape [16], want (64)", Config{}},
		{"g_idx value", func(ts tensors) {
			x := ts["m.g_idx"]
			x.Data = append([]byte(nil), x.Data...)
			x.Data[4*5] = 9
			ts["m.g_idx"] = x
		}, "m.g_idx: input 5 in group 9", Config{}},
		{"v1 zero 0", func(ts tensors) {
			x := ts["m.qzeros"]
			x.Data = append([]byte(nil), x.Data...)
			x.Data[0] |= 0x0f
			ts["m.qzeros"] = x
		}, "m.qzeros: group 0, output 0 stores 15", Config{}},
		{"other group size", func(tensors) {}, "m.scales: shape [2 32], want (1, 32)", Config{Bits: 4, GroupSize: 64}},
	} {
		ts := tensorsOf(good)
		tc.edit(ts)
		g := f
		if tc.other.Bits != 0 {
			g, _ = New(tc.other)
		}
		_, err := g.Matrix(ts, "m")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	if _, err := f.Quantize("m", weights(32, 60, 1), 32, 60); err == nil || !strings.Contains(err.Error(), "m: shape (32, 60)") {
		t.Errorf("Quantize of 60 inputs at 4 bits: %v", err)
	}
}

// TestParseConfig: what Config writes, Parse reads back; and the fields
// GPTQModel and AutoGPTQ write parse to their settings.
func TestParseConfig(t *testing.T) {
	for _, c := range configs() {
		f, _ := New(c)
		g, err := Parse(f.Config())
		if err != nil {
			t.Fatalf("%s: %v", f.Name(), err)
		}
		if g.Name() != f.Name() {
			t.Errorf("config of %s reads back as %s", f.Name(), g.Name())
		}
	}
	autogptq := `{"bits":4,"group_size":128,"damp_percent":0.01,"desc_act":true,"static_groups":false,"sym":false,"true_sequential":true,"model_name_or_path":null,"model_file_base_name":"model","quant_method":"gptq"}`
	f, err := Parse(json.RawMessage(autogptq))
	if err != nil || f.Name() != "gptq 4-bit g128 asym desc_act" {
		t.Errorf("AutoGPTQ's config: %v, %v", f, err)
	}
	only := `{"bits":8,"group_size":-1,"sym":true,"quant_method":"gptq","checkpoint_format":"gptq_v2","modules_in_block_to_quantize":[["self_attn.q_proj"],["mlp.down_proj"]]}`
	f, err = Parse(json.RawMessage(only))
	if err != nil || f.Name() != "gptq 8-bit per-row sym v2" {
		t.Fatalf("%s: %v, %v", only, f, err)
	}
	for module, want := range map[string]bool{
		"model.layers.3.self_attn.q_proj": true, "model.layers.3.mlp.down_proj": true, "model.layers.3.self_attn.k_proj": false,
		"lm_head": false, "model.embed_tokens": false,
	} {
		if f.Quantized(module) != want {
			t.Errorf("Quantized(%s) = %v", module, !want)
		}
	}
}

// FuzzParse: any quantization_config is read or refused with a gptq
// error, and what is read writes a config that reads back the same.
func FuzzParse(f *testing.F) {
	for _, c := range configs() {
		g, _ := New(c)
		f.Add([]byte(g.Config()))
	}
	f.Add([]byte(`{"quant_method":"gptq","bits":3,"group_size":-1,"sym":false,"checkpoint_format":"marlin"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		g, err := Parse(b)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "gptq: ") {
				t.Fatalf("error without the package's prefix: %v", err)
			}
			return
		}
		if err := g.(*Format).c.Check(); err != nil {
			t.Fatalf("parsed %s into settings it refuses: %v", b, err)
		}
		h, err := Parse(g.Config())
		if err != nil || h.Name() != g.Name() {
			t.Fatalf("%s: config %s reads back as %v, %v", b, g.Config(), h, err)
		}
	})
}

// FuzzMatrixShapes: tensors of any shape are refused naming the tensor,
// or transcode to a matrix that holds together.
func FuzzMatrixShapes(f *testing.F) {
	f.Add(uint8(4), int16(32), uint8(8), uint8(32), uint8(1), uint8(4), uint8(1), uint8(32), uint8(64), false)
	f.Add(uint8(3), int16(-1), uint8(3), uint8(32), uint8(1), uint8(3), uint8(1), uint8(32), uint8(32), true)
	f.Fuzz(func(t *testing.T, bits uint8, gs int16, qw0, qw1, qz0, qz1, sc0, sc1, gi uint8, noGIdx bool) {
		g, err := New(Config{Bits: int(bits), GroupSize: int(gs)})
		if err != nil {
			return
		}
		// Small dimensions keep each run quick; the checks do not depend
		// on size.
		qw0, qw1, qz0, qz1, sc0, sc1, gi = qw0%40, qw1%40, qz0%40, qz1%40, sc0%40, sc1%40, gi%160
		fill := func(n int, seed byte) []byte {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(i)*seed + seed
			}
			return b
		}
		ts := tensors{
			"m.qweight": {DType: safetensors.I32, Shape: []int{int(qw0), int(qw1)}, Data: fill(4*int(qw0)*int(qw1), 3)},
			"m.qzeros":  {DType: safetensors.I32, Shape: []int{int(qz0), int(qz1)}, Data: fill(4*int(qz0)*int(qz1), 5)},
			"m.scales":  {DType: safetensors.F16, Shape: []int{int(sc0), int(sc1)}, Data: fill(2*int(sc0)*int(sc1), 7)},
		}
		if !noGIdx {
			ts["m.g_idx"] = safetensors.Tensor{DType: safetensors.I32, Shape: []int{int(gi)}, Data: make([]byte, 4*int(gi))}
		}
		m, err := g.Matrix(ts, "m")
		if err != nil {
			if !strings.Contains(err.Error(), "m.") && !strings.Contains(err.Error(), "gptq: m:") {
				t.Fatalf("error naming no tensor: %v", err)
			}
			return
		}
		if err := m.Check(); err != nil {
			t.Fatal(err)
		}
		m.Dequantize()
	})
}

var _ lookup.Format = (*Format)(nil)
