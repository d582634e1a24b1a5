package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/safetensors"
	"logitscope/internal/model/hubquant"
)

// gptqWeight is the test's own decoding of a GPTQ module from the file:
// each column of qweight and row of qzeros read as one little-endian
// integer (math/big), a value shifted out of it, W = s·(q−z) in float64.
func gptqWeight(t *testing.T, f *safetensors.File, module string, bits int, v2 bool) (w []float32, rows, cols int) {
	t.Helper()
	read := func(name string) ([]byte, []int) {
		info, _ := f.Info(module + "." + name)
		b, err := f.ReadRaw(module + "." + name)
		if err != nil {
			t.Fatal(err)
		}
		return b, info.Shape
	}
	qw, qwShape := read("qweight")
	qz, qzShape := read("qzeros")
	sc, _ := read("scales")
	gi, _ := read("g_idx")
	stream := func(data []byte, first, stride, n int) *big.Int {
		x := new(big.Int)
		for k := n - 1; k >= 0; k-- {
			x.Lsh(x, 32)
			x.Or(x, big.NewInt(int64(binary.LittleEndian.Uint32(data[4*(first+k*stride):]))))
		}
		return x
	}
	value := func(x *big.Int, i int) int64 {
		v := new(big.Int).Rsh(x, uint(i*bits))
		return v.And(v, big.NewInt(1<<bits-1)).Int64()
	}
	rows, cols = qwShape[1], qwShape[0]*32/bits
	w = make([]float32, rows*cols)
	for r := range rows {
		q := stream(qw, r, rows, qwShape[0])
		for c := range cols {
			g := int(binary.LittleEndian.Uint32(gi[4*c:]))
			z := value(stream(qz, g*qzShape[1], 1, qzShape[1]), r)
			if !v2 {
				z++
			}
			s := float64(safetensors.FromF16(binary.LittleEndian.Uint16(sc[2*(g*rows+r):])))
			w[r*cols+c] = float32(s * float64(value(q, c)-z))
		}
	}
	return w, rows, cols
}

// TestQuantizeFormatGPTQ writes GPTQ checkpoints of the tiny model and
// reads them back as the tools would: every quantized matrix decodes to
// the test's own dequantization of the file, every other tensor and the
// tokenizer files are the source's bytes, and config.json is the
// source's with the quantization_config GPTQModel writes.
func TestQuantizeFormatGPTQ(t *testing.T) {
	src := copyModel(t)
	for _, tc := range []struct {
		flags []string
		bits  int
		v2    bool
		name  string
	}{
		{[]string{"--bits", "4", "--group-size", "32", "--sym=false", "--desc-act"}, 4, false, "gptq 4-bit g32 asym desc_act"},
		{[]string{"--bits", "8", "--group-size", "-1", "--checkpoint-format", "gptq_v2"}, 8, true, "gptq 8-bit per-row sym v2"},
		{[]string{"--bits", "2"}, 2, false, "gptq 2-bit g128 sym"},
	} {
		out := filepath.Join(t.TempDir(), "gptq")
		var stdout, stderr bytes.Buffer
		if err := quantize(append([]string{"--model", src, "--format", "gptq", "--out", out}, tc.flags...), &stdout, &stderr); err != nil {
			t.Fatal(err)
		}
		if want := "wrote " + tc.name + " checkpoint: 14 matrices quantized, 12 tensors as stored,"; !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout %q, want %q", stdout.String(), want)
		}
		w, err := hubquant.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if w.Format() != tc.name {
			t.Errorf("Format() = %q, want %q", w.Format(), tc.name)
		}
		ref, err := checkpoint.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		defer ref.Close()
		file, err := safetensors.Open(filepath.Join(out, "model.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		defer file.Close()
		var quantized int
		for _, name := range ref.Names() {
			module := strings.TrimSuffix(name, ".weight")
			if _, ok := file.Info(module + ".qweight"); ok {
				quantized++
				want, rows, cols := gptqWeight(t, file, module, tc.bits, tc.v2)
				got, shape, err := w.Float32(name)
				if err != nil {
					t.Fatal(err)
				}
				_, refShape, _ := ref.Float32(name)
				if !slices.Equal(shape, refShape) || !slices.Equal(shape, []int{rows, cols}) {
					t.Fatalf("%s: shape %v, file (%d, %d), source %v", name, shape, rows, cols, refShape)
				}
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%s[%d] = %g, the file says %g", name, i, got[i], want[i])
					}
				}
				continue
			}
			a, ai, _ := ref.Raw(name)
			b, err := file.ReadRaw(name)
			bi, _ := file.Info(name)
			if err != nil || !bytes.Equal(a, b) || ai.DType != bi.DType || !slices.Equal(ai.Shape, bi.Shape) {
				t.Errorf("%s: not stored as in the source (%v)", name, err)
			}
		}
		if quantized != 14 {
			t.Errorf("%d modules quantized, want the 14 projections", quantized)
		}
		for _, name := range []string{"tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
			a, _ := os.ReadFile(filepath.Join(src, name))
			b, err := os.ReadFile(filepath.Join(out, name))
			if err != nil || !bytes.Equal(a, b) {
				t.Errorf("%s: not copied (%v)", name, err)
			}
		}
		var srcConfig, config map[string]json.RawMessage
		b, _ := os.ReadFile(filepath.Join(src, "config.json"))
		json.Unmarshal(b, &srcConfig)
		b, _ = os.ReadFile(filepath.Join(out, "config.json"))
		if err := json.Unmarshal(b, &config); err != nil {
			t.Fatal(err)
		}
		for k, v := range srcConfig {
			var x, y any
			json.Unmarshal(v, &x)
			json.Unmarshal(config[k], &y)
			if !reflect.DeepEqual(x, y) {
				t.Errorf("config.json %s: %s, the source's %s", k, config[k], v)
			}
		}
		var qc map[string]any
		json.Unmarshal(config["quantization_config"], &qc)
		for _, field := range []string{"quant_method", "bits", "group_size", "sym", "desc_act", "checkpoint_format", "pack_dtype", "lm_head", "damp_percent", "static_groups", "true_sequential", "meta"} {
			if _, ok := qc[field]; !ok {
				t.Errorf("quantization_config has no %s: %s", field, config["quantization_config"])
			}
		}
		if qc["quant_method"] != "gptq" || qc["bits"] != float64(tc.bits) || qc["checkpoint_format"] != map[bool]string{false: "gptq", true: "gptq_v2"}[tc.v2] {
			t.Errorf("quantization_config %s", config["quantization_config"])
		}
	}
}

// TestQuantizeFormatRefusals: each value quantize --format does not take
// is refused naming the flag and what it takes.
func TestQuantizeFormatRefusals(t *testing.T) {
	src := copyModel(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "awq-gemv"}, `--format "awq-gemv": want one of awq, bnb-fp4, bnb-nf4, ct-fp8, ct-nvfp4, ct-w4a16, ct-w8a8, gptq, mlx`},
		{[]string{"--format", "gptq", "--bits", "5"}, "--bits 5: gptq writes 2, 3, 4 or 8"},
		{[]string{"--format", "gptq", "--group-size", "0"}, "--group-size 0: gptq takes a positive size or -1"},
		{[]string{"--format", "gptq", "--checkpoint-format", "marlin"}, `--checkpoint-format "marlin": gptq writes gptq (v1, zero-1 stored) or gptq_v2`},
		{[]string{"--format", "gptq", "--scheme", "q4"}, "--scheme makes a logitscope variant"},
		{[]string{"--format", "gptq", "--keep", "lm_head"}, "--keep makes a logitscope variant"},
		{[]string{"--scheme", "q4", "--bits", "4"}, "--bits sets a hub format's quantization: give --format (awq, bnb-fp4, bnb-nf4, ct-fp8, ct-nvfp4, ct-w4a16, ct-w8a8, gptq, mlx)"},
		{[]string{"--format", "ct-w8a8", "--bits", "4"}, "--bits: ct-w8a8 has no settings (it writes its tool's preset)"},
		{[]string{"--format", "awq", "--desc-act"}, "--desc-act: awq takes only --bits, --group-size, --sym"},
		{[]string{"--format", "awq", "--bits", "3"}, "--bits 3: awq writes 4"},
		{[]string{"--format", "mlx", "--bits", "7"}, "bits = 7, want 2, 3, 4, 5, 6 or 8"},
		{[]string{"--format", "mlx", "--sym=false"}, "--sym: mlx takes only --bits, --group-size"},
		{[]string{"--format", "gptq", "--bits", "3"}, "model.layers.0.mlp.down_proj: shape (64, 176): 3-bit packing needs both dimensions to fill whole 32-bit words (multiples of 32)"},
	} {
		var stdout, stderr bytes.Buffer
		err := quantize(append([]string{"--model", src, "--out", filepath.Join(t.TempDir(), "x")}, tc.args...), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("quantize %v: %v, want %q", tc.args, err, tc.want)
		}
	}
}

// TestCaptureHubVariantPlan: the directory quantize --format writes is a
// --variant capture takes: the plan runs it natively and its chain's
// contract names the format and the directory's fingerprint.
func TestCaptureHubVariantPlan(t *testing.T) {
	src := copyModel(t)
	out := filepath.Join(t.TempDir(), "tiny-gptq")
	if _, err := run(t, func(a []string, o, e *bytes.Buffer) error { return quantize(a, o, e) },
		"--model", src, "--format", "gptq", "--group-size", "32", "--out", out); err != nil {
		t.Fatal(err)
	}
	plan, err := run(t, captureCmd, "--model", src, "--variant", out, "--dry-run", "--dump-logits", filepath.Join(t.TempDir(), "x.dump"), "Hi")
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		Variant string `json:"variant"`
		Runtime string `json:"runtime"`
		Chain   struct {
			Contract struct {
				Scheme string `json:"scheme"`
				Hub    string `json:"hub_sha256"`
			} `json:"contract"`
		} `json:"chain"`
	}
	if err := json.Unmarshal([]byte(plan), &p); err != nil {
		t.Fatalf("%v: %s", err, plan)
	}
	ck, err := checkpoint.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	sum, _ := ck.Fingerprint()
	if p.Variant != "tiny-gptq" || p.Runtime != "native" || p.Chain.Contract.Scheme != "gptq 4-bit g32 sym" || p.Chain.Contract.Hub != sum {
		t.Errorf("plan %s", plan)
	}
}
