package compressed

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"logitscope/internal/format/lookup"
	"logitscope/internal/format/lookup/lookuptest"
	"logitscope/internal/format/safetensors"
)

var _ lookup.Format = (*Format)(nil)

// goldenFile is a hand-worked tiny checkpoint: the tensors as numbers
// (hex strings for packed words and bytes) and the matrix they hold.
type goldenFile struct {
	Config  json.RawMessage
	Module  string
	Tensors []struct {
		Name   string
		DType  safetensors.DType
		Shape  []int
		Values []any
	}
	Want [][]float32
}

// encode turns a golden tensor's values into its stored bytes.
func encode(t *testing.T, dt safetensors.DType, values []any) []byte {
	var out []byte
	for _, v := range values {
		var x float64
		switch v := v.(type) {
		case float64:
			x = v
		case string:
			u, err := strconv.ParseUint(strings.TrimPrefix(v, "0x"), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			x = float64(u)
		}
		switch dt {
		case safetensors.I32:
			out = binary.LittleEndian.AppendUint32(out, uint32(int64(x)))
		case safetensors.I64:
			out = binary.LittleEndian.AppendUint64(out, uint64(int64(x)))
		case safetensors.I8, safetensors.U8, safetensors.F8E4M3:
			out = append(out, byte(int64(x)))
		case safetensors.F32:
			out = append(out, safetensors.EncodeF32([]float32{float32(x)})...)
		case safetensors.F16:
			out = append(out, safetensors.EncodeF16([]float32{float32(x)})...)
		case safetensors.BF16:
			out = append(out, safetensors.EncodeBF16([]float32{float32(x)})...)
		default:
			t.Fatalf("dtype %s in a golden file", dt)
		}
	}
	return out
}

func readGolden(t *testing.T, path string) (goldenFile, []safetensors.Tensor) {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g goldenFile
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for _, x := range g.Tensors {
		ts = append(ts, safetensors.Tensor{Name: g.Module + "." + x.Name, DType: x.DType, Shape: x.Shape, Data: encode(t, x.DType, x.Values)})
	}
	return g, ts
}

// TestGolden reads each hand-worked checkpoint under testdata from a
// real safetensors file and checks every weight, and that the
// independent dequantizer agrees.
func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.json")
	if len(files) < 5 {
		t.Fatalf("%d golden files", len(files))
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			g, ts := readGolden(t, path)
			f, err := Parse(g.Config)
			if err != nil {
				t.Fatal(err)
			}
			m, err := f.Matrix(lookuptest.Write(t, ts), g.Module)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Check(); err != nil {
				t.Fatal(err)
			}
			grp := f.(*Format).scheme(g.Module)
			ref := reference(t, grp.format, grp.raw, ts, g.Module)
			row := make([]float32, m.Cols)
			for r, want := range g.Want {
				m.Row(r, row)
				for c := range want {
					if row[c] != want[c] || float64(want[c]) != ref[r*m.Cols+c] {
						t.Errorf("W[%d,%d] = %v, reference %v, want %v", r, c, row[c], ref[r*m.Cols+c], want[c])
					}
				}
			}
		})
	}
}

// e4m3 decodes an FP8 E4M3FN byte by building the float32's bits: a
// second way, independent of the package's table.
func e4m3(b byte) float64 {
	sign, e, m := uint32(b>>7), uint32(b>>3&15), uint32(b&7)
	if e == 15 && m == 7 {
		return math.NaN()
	}
	var v float32
	if e == 0 {
		v = float32(m) / 512
	} else {
		v = math.Float32frombits((e-7+127)<<23 | m<<20)
	}
	if sign == 1 {
		v = -v
	}
	return float64(v)
}

// reference dequantizes a module's raw tensors as compressed-tensors'
// decompressors and forward.py's dequantize do, in plain loops, reading
// the scheme from the group's JSON itself (format is the group's or the
// config's): W (rows*cols), float64.
func reference(t *testing.T, format string, schemeJSON json.RawMessage, ts []safetensors.Tensor, module string) []float64 {
	var sc struct {
		Weights struct {
			NumBits        int `json:"num_bits"`
			Type           string
			Symmetric      *bool
			Strategy       string
			GroupSize      int   `json:"group_size"`
			BlockStructure []int `json:"block_structure"`
		}
	}
	if err := json.Unmarshal(schemeJSON, &sc); err != nil {
		t.Fatal(err)
	}
	wa := sc.Weights
	sym := wa.Symmetric == nil || *wa.Symmetric
	if wa.Strategy == "" { // QuantizationArgs' rule: group_size absent, > 0 or −1
		wa.Strategy = map[bool]string{true: "group", false: "tensor"}[wa.GroupSize > 0]
		if wa.GroupSize == -1 {
			wa.Strategy = "channel"
		}
	}
	byName := map[string]safetensors.Tensor{}
	for _, x := range ts {
		byName[strings.TrimPrefix(x.Name, module+".")] = x
	}
	floats := func(x safetensors.Tensor) []float64 {
		out := make([]float64, len(x.Data)/x.DType.Size())
		for i := range out {
			switch x.DType {
			case safetensors.F32:
				out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(x.Data[4*i:])))
			case safetensors.F16:
				out[i] = float64(safetensors.FromF16(binary.LittleEndian.Uint16(x.Data[2*i:])))
			case safetensors.BF16:
				out[i] = float64(safetensors.FromBF16(binary.LittleEndian.Uint16(x.Data[2*i:])))
			case safetensors.F8E4M3:
				out[i] = e4m3(x.Data[i])
			}
		}
		return out
	}
	if format == "nvfp4-pack-quantized" {
		p := byName["weight_packed"]
		rows, cols := p.Shape[0], 2*p.Shape[1]
		s := floats(byName["weight_scale"])
		gs := float32(floats(byName["weight_global_scale"])[0])
		kE2M1 := []float32{0, 0.5, 1, 1.5, 2, 3, 4, 6}
		w := make([]float64, rows*cols)
		for i, b := range p.Data {
			for half, nib := range []byte{b & 15, b >> 4} {
				v := kE2M1[nib&7]
				if nib&8 != 0 {
					v = -v
				}
				c := (2*i + half) % cols
				r := (2*i + half) / cols
				scale := float32(s[r*(cols/16)+c/16]) / gs
				w[r*cols+c] = float64(v * scale)
			}
		}
		return w
	}
	// q (rows, cols) as signed integers or E4M3 values.
	var rows, cols int
	var q []float64
	if format == "pack-quantized" {
		shape := byName["weight_shape"].Data
		rows, cols = int(binary.LittleEndian.Uint64(shape)), int(binary.LittleEndian.Uint64(shape[8:]))
		p := byName["weight_packed"]
		b := wa.NumBits
		pf := 32 / b
		q = make([]float64, rows*cols)
		for r := range rows {
			for i := range pf { // unpacked[:, i::pf] = (value >> (b*i)) & mask
				for k := 0; k < p.Shape[1]; k++ {
					c := k*pf + i
					if c >= cols {
						continue
					}
					word := binary.LittleEndian.Uint32(p.Data[4*(r*p.Shape[1]+k):])
					q[r*cols+c] = float64(int(word>>(b*i)&(1<<b-1)) - 1<<(b-1))
				}
			}
		}
	} else {
		x := byName["weight"]
		rows, cols = x.Shape[0], x.Shape[1]
		q = make([]float64, rows*cols)
		for i, b := range x.Data {
			if x.DType == safetensors.F8E4M3 {
				q[i] = e4m3(b)
			} else {
				q[i] = float64(int8(b))
			}
		}
	}
	s := floats(byName["weight_scale"])
	// sidx maps (r, c) to the scale's index.
	var sidx func(r, c int) int
	switch wa.Strategy {
	case "tensor":
		sidx = func(int, int) int { return 0 }
	case "channel":
		sidx = func(r, _ int) int { return r }
	case "block":
		nbc := (cols + wa.BlockStructure[1] - 1) / wa.BlockStructure[1]
		sidx = func(r, c int) int { return r/wa.BlockStructure[0]*nbc + c/wa.BlockStructure[1] }
	case "group":
		ng := (cols + wa.GroupSize - 1) / wa.GroupSize
		group := make([]int, cols)
		for c := range group {
			group[c] = c / wa.GroupSize
		}
		if gi, ok := byName["weight_g_idx"]; ok {
			// forward.py: perm = argsort(g_idx); the permuted columns are
			// cut into runs of group_size, run k taking scale column k.
			perm := make([]int, cols)
			for c := range perm {
				perm[c] = c
			}
			gidx := func(c int) int32 { return int32(binary.LittleEndian.Uint32(gi.Data[4*c:])) }
			sort.SliceStable(perm, func(a, b int) bool { return gidx(perm[a]) < gidx(perm[b]) })
			for p, c := range perm {
				group[c] = p / wa.GroupSize
			}
		}
		sidx = func(r, c int) int { return r*ng + group[c] }
	}
	z := make([]float64, len(s))
	if !sym {
		zp := byName["weight_zero_point"]
		if format == "pack-quantized" && (wa.Strategy == "group" || wa.Strategy == "channel") {
			b := wa.NumBits
			pf := 32 / b
			ng := len(s) / rows
			for k := 0; k < zp.Shape[0]; k++ { // unpacked[i::pf, :] = (value >> (b*i)) & mask
				for i := range pf {
					r := k*pf + i
					if r >= rows {
						continue
					}
					for j := range ng {
						word := binary.LittleEndian.Uint32(zp.Data[4*(k*ng+j):])
						z[r*ng+j] = float64(int(word>>(b*i)&(1<<b-1)) - 1<<(b-1))
					}
				}
			}
		} else {
			for i, b := range zp.Data {
				z[i] = float64(int8(b))
			}
		}
	}
	w := make([]float64, rows*cols)
	for r := range rows {
		for c := range cols {
			i := sidx(r, c)
			w[r*cols+c] = (q[r*cols+c] - z[i]) * s[i]
		}
	}
	return w
}

// TestRoundTrip quantizes random weights with each writer, stores them in
// a safetensors file, and checks the reader's rows against the
// independent reference exactly, and the reference against the input.
func TestRoundTrip(t *testing.T) {
	mk := func(f lookup.Format, err error) lookup.Format {
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, tc := range []struct {
		f lookup.Format
		// tol is the largest |W − Q(W)| as a fraction of max |W|.
		tol float64
	}{
		{mk(ByName("ct-w4a16")), 0.1},
		{mk(W4A16(128, false, "")), 0.1},
		{mk(W4A16(64, false, "group")), 0.1},
		{mk(W4A16(32, true, "group")), 0.1},
		{mk(W4A16(128, true, "weight")), 0.1},
		{mk(ByName("ct-w8a8")), 0.005},
		{mk(ByName("ct-fp8")), 0.04},
		{mk(FP8("tensor", false)), 0.04},
		{mk(ByName("ct-nvfp4")), 0.2},
		{mk(NVFP4(0)), 0.2},
		{mk(Parse(json.RawMessage(cfg("pack-quantized", `{"targets":["Linear"],"weights":{"num_bits":8,"group_size":-1,"symmetric":false}}`)))), 0.01},
		{mk(Parse(json.RawMessage(cfg("pack-quantized", `{"targets":["Linear"],"weights":{"num_bits":2,"group_size":32}}`)))), 0.5},
		{mk(Parse(json.RawMessage(cfg("naive-quantized", `{"targets":["Linear"],"weights":{"num_bits":4,"symmetric":false}}`)))), 0.1},
		{mk(Parse(json.RawMessage(cfg("int-quantized", `{"targets":["Linear"],"weights":{"num_bits":8,"group_size":64}}`)))), 0.01},
	} {
		t.Run(tc.f.Name(), func(t *testing.T) {
			const rows, cols = 24, 256
			const module = "model.layers.3.self_attn.o_proj"
			rng := rand.New(rand.NewPCG(7, uint64(len(tc.f.Name()))))
			w := make([]float32, rows*cols)
			amax := 0.0
			for i := range w {
				w[i] = float32(rng.NormFloat64() * 0.02 * (1 + float64(i%cols)/64))
				amax = max(amax, math.Abs(float64(w[i])))
			}
			ts, err := tc.f.Quantize(module, w, rows, cols)
			if err != nil {
				t.Fatal(err)
			}
			m, err := tc.f.Matrix(lookuptest.Write(t, ts), module)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Check(); err != nil {
				t.Fatal(err)
			}
			grp := tc.f.(*Format).scheme(module)
			ref := reference(t, grp.format, grp.raw, ts, module)
			got := m.Dequantize()
			worst := 0.0
			for i := range got {
				if float64(got[i]) != ref[i] {
					t.Fatalf("W[%d] = %v, reference %v", i, got[i], ref[i])
				}
				worst = max(worst, math.Abs(ref[i]-float64(w[i])))
			}
			if worst > tc.tol*amax {
				t.Errorf("max |W − Q(W)| = %v, over %v of max |W| %v", worst, tc.tol, amax)
			}
		})
	}
}

// TestUpstreamPacking checks the packer and the reader against the words
// compressed-tensors' own test (test_pack_quant.py, test_pack_to_int32)
// expects for the same values.
func TestUpstreamPacking(t *testing.T) {
	for _, tc := range []struct {
		bits   int
		values [][]int8
		words  [][]int32
	}{
		{4, [][]int8{{-8, -7, -6, -5, -4, -3, -2, -1, 1, 2, 3, 4}}, [][]int32{{1985229328, 52137}}},
		{4, [][]int8{{-8, -7, -6, -5, -4, -3, -2, -1, 1, 2, 3, 4, -8, -8, -8, -8}, {1, 2, 3, 4, -8, -8, -8, -8, -8, -7, -6, -5, -4, -3, -2, -1}},
			[][]int32{{1985229328, 52137}, {52137, 1985229328}}},
		{8, [][]int8{{1, 2, 3, 4}, {-128, -127, -126, -125}}, [][]int32{{-2071756159}, {50462976}}},
		{8, [][]int8{{1, 2, 3, 4, -128, -127, -126, -125}, {-128, -127, -126, -125, 1, 2, 3, 4}},
			[][]int32{{-2071756159, 50462976}, {50462976, -2071756159}}},
	} {
		rows, cols := len(tc.values), len(tc.values[0])
		var flat []int8
		var want []int32
		for r := range rows {
			flat = append(flat, tc.values[r]...)
			want = append(want, tc.words[r]...)
		}
		got := packRows(flat, rows, cols, tc.bits)
		if !slices.Equal(got, want) {
			t.Errorf("%d-bit packRows(%v) = %v, want %v", tc.bits, tc.values, got, want)
		}
		f, err := Parse(json.RawMessage(cfg("pack-quantized", `{"targets":["Linear"],"weights":{"num_bits":`+strconv.Itoa(tc.bits)+`,"strategy":"channel"}}`)))
		if err != nil {
			t.Fatal(err)
		}
		shape := binary.LittleEndian.AppendUint64(binary.LittleEndian.AppendUint64(nil, uint64(rows)), uint64(cols))
		ones := make([]float32, rows)
		for i := range ones {
			ones[i] = 1
		}
		m, err := f.Matrix(lookuptest.Write(t, []safetensors.Tensor{
			{Name: "m.weight_packed", DType: safetensors.I32, Shape: []int{rows, len(tc.words[0])}, Data: safetensors.EncodeI32(want)},
			{Name: "m.weight_shape", DType: safetensors.I64, Shape: []int{2}, Data: shape},
			{Name: "m.weight_scale", DType: safetensors.BF16, Shape: []int{rows, 1}, Data: safetensors.EncodeBF16(ones)},
		}), "m")
		if err != nil {
			t.Fatal(err)
		}
		for i, x := range m.Dequantize() {
			if x != float32(flat[i]) {
				t.Errorf("%d-bit: W[%d] = %v, want %d", tc.bits, i, x, flat[i])
			}
		}
	}
}
