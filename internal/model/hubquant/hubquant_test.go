package hubquant

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/model"
	"logitscope/internal/model/synth"
	"logitscope/internal/model/synth/synthtest"
)

// quantized writes the tiny preset's GPTQ checkpoint with o and opens it
// as the quantized weights of the reference.
func quantized(t *testing.T, ref *checkpoint.Checkpoint, o Options) *Weights {
	t.Helper()
	f, err := Writers["gptq"](o)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "gptq")
	var calls int
	if err := Write(ref, f, dir, func(done, total int) { calls++ }); err != nil {
		t.Fatal(err)
	}
	if calls != len(ref.Names()) {
		t.Errorf("progress told %d times for %d tensors", calls, len(ref.Names()))
	}
	if !Is(dir) {
		t.Fatalf("Is(%s) = false", dir)
	}
	w, err := OpenFor(ref, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// TestOpenFor: a GPTQ checkpoint of the tiny model opens as that model:
// the same names and shapes, float tensors as stored, each quantized
// matrix within a step of the float one and equal to its lookup matrix.
func TestOpenFor(t *testing.T) {
	ref := synthtest.Checkpoint(t, synth.Presets["tiny"], 0)
	for _, o := range []Options{
		{Bits: 4, GroupSize: 32, Sym: false, DescAct: true},
		{Bits: 8, GroupSize: -1, Sym: true, Checkpoint: "gptq_v2"},
	} {
		w := quantized(t, ref, o)
		f, _ := Writers["gptq"](o)
		if w.Format() != f.Name() {
			t.Errorf("Format() = %q, want %q", w.Format(), f.Name())
		}
		if !slices.Equal(w.Names(), ref.Names()) {
			t.Fatalf("names %v, want the float model's %v", w.Names(), ref.Names())
		}
		var nq int
		for _, name := range w.Names() {
			want, shape, err := ref.Float32(name)
			if err != nil {
				t.Fatal(err)
			}
			got, gotShape, err := w.Float32(name)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(shape, gotShape) {
				t.Fatalf("%s: shape %v, want %v", name, gotShape, shape)
			}
			m, err := w.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			if module, ok := strings.CutSuffix(name, ".weight"); !ok || len(shape) != 2 || !f.Quantized(module) {
				if m != nil || !slices.Equal(got, want) {
					t.Errorf("%s: a float tensor changed (lookup %v)", name, m != nil)
				}
				continue
			}
			nq++
			if m == nil || !slices.Equal(m.Dequantize(), got) || w.Acts(name) != "" {
				t.Fatalf("%s: Float32 is not the lookup matrix's values", name)
			}
			var lo, hi, worst float64
			for i := range got {
				lo, hi = min(lo, float64(want[i])), max(hi, float64(want[i]))
				worst = max(worst, math.Abs(float64(got[i]-want[i])))
			}
			if step := (hi - lo) / float64(int(1)<<o.Bits-1); worst > step {
				t.Errorf("%s: off by %g, more than a step (%g)", name, worst, step)
			}
		}
		if nq != 7*2 {
			t.Errorf("%d quantized matrices, want 14 (7 projections in 2 layers)", nq)
		}
	}
}

// TestOpenForRefuses another model's checkpoint and a tokenizer that is
// not the reference's, as Describe does without reading a weight.
func TestOpenForRefuses(t *testing.T) {
	ref := synthtest.Checkpoint(t, synth.Presets["tiny"], 0)
	other := synthtest.Checkpoint(t, synth.Presets["tiny-llama"], 0)
	f, _ := Writers["gptq"](Options{Bits: 4, GroupSize: 32, Sym: true})
	dir := filepath.Join(t.TempDir(), "llama-gptq")
	if err := Write(other, f, dir, nil); err != nil {
		t.Fatal(err)
	}
	refuses := func(what, dir, want string) {
		t.Helper()
		if _, err := OpenFor(ref, dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("OpenFor(tiny, %s) = %v, want %q", what, err, want)
		}
		if _, err := Describe(ref, dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Describe(tiny, %s) = %v, want %q", what, err, want)
		}
	}
	refuses("tiny-llama's gptq", dir, "another model")

	dir = filepath.Join(t.TempDir(), "tiny-gptq")
	if err := Write(ref, f, dir, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := Describe(ref, dir); err != nil || got != f.Name() {
		t.Errorf("Describe(tiny, its gptq) = %q, %v; want %q", got, err, f.Name())
	}
	tok := filepath.Join(dir, "tokenizer.json")
	raw, _ := os.ReadFile(tok)
	var j map[string]any
	json.Unmarshal(raw, &j)
	vocab := j["model"].(map[string]any)["vocab"].(map[string]any)
	var a, c string // tokens 300 and 301, swapped
	for k, v := range vocab {
		switch v.(float64) {
		case 300:
			a = k
		case 301:
			c = k
		}
	}
	vocab[a], vocab[c] = 301.0, 300.0
	b, _ := json.Marshal(j)
	os.WriteFile(tok, b, 0o644)
	refuses("another tokenizer", dir, "token 300")
	if _, err := Open(ref.Dir); err == nil || !strings.Contains(err.Error(), "no quantization_config") {
		t.Errorf("Open of a float checkpoint = %v", err)
	}
	if _, err := Describe(ref, ref.Dir); err == nil || !strings.Contains(err.Error(), "no quantization_config") {
		t.Errorf("Describe of a float checkpoint = %v", err)
	}
	var _ model.Quantized = (*Weights)(nil)
}

// TestFormatOf: the dispatcher reads what it has readers for and names
// the file, field and value of what it refuses.
func TestFormatOf(t *testing.T) {
	for _, tc := range []struct{ config, want string }{
		{`{"architectures":["X"]}`, ""},
		{`{"quantization_config":null}`, ""},
		{`{"quantization_config":{"quant_method":"gptq","bits":4,"group_size":128,"sym":true,"desc_act":false}}`, "=gptq 4-bit g128 sym"},
		{`{"quantization_config":{"quant_method":"GPTQ","bits":3,"group_size":-1,"sym":false,"checkpoint_format":"gptq_v2"}}`, "=gptq 3-bit per-row asym v2"},
		{`{"quantization_config":{"quant_method":"gptq","bits":4,"group_size":128,"sym":true,"checkpoint_format":"marlin"}}`, `config.json: gptq: quantization_config.checkpoint_format "marlin"`},
		{`{"quantization_config":{"quant_method":"hqq"}}`, `quant_method "hqq": HQQ`},
		{`{"quantization_config":{"quant_method":"aqlm"}}`, `quant_method "aqlm": AQLM`},
		{`{"quantization_config":{"quant_method":"exl2"}}`, `quant_method "exl2"`},
		{`{"quantization_config":{"quant_method":"marlin"}}`, `quant_method "marlin"`},
		{`{"quantization_config":{"quant_method":"fbgemm_fp8"}}`, `quant_method "fbgemm_fp8": FBGEMM`},
		{`{"quantization_config":{"quant_method":"compressed-tensors","format":"marlin-24"}}`, `quantization_config.format "marlin-24"`},
		{`{"quantization_config":{"quant_method":"newthing"}}`, `quant_method "newthing" is not a format read here (read: awq, bitsandbytes, compressed-tensors, gptq)`},
		{`{"quantization_config":{"bits":4}}`, `no quant_method (read: awq, bitsandbytes, compressed-tensors, gptq)`},
		{`{"quantization_config":{"quant_method":4}}`, `quant_method 4 is not a string`},
		{`{"quantization":{"group_size":64,"bits":4}}`, "=mlx 4-bit g64"},
		{`{"quantization":{"group_size":64,"bits":4},"quantization_config":{"group_size":64,"bits":4}}`, "=mlx 4-bit g64"},
		{`{"quantization":{"group_size":64,"bits":4,"mode":"mxfp4"}}`, `quantization (MLX's)`},
		{`{"quantization_config":{"quant_method":"awq","bits":4,"group_size":128,"zero_point":true,"version":"gemv"}}`, `"gemv"`},
		{`{"quantization_config":{"quant_method":"bitsandbytes","load_in_8bit":true}}`, `load_in_8bit`},
		{`{"quantization_config":[]}`, `config.json: quantization_config`},
	} {
		f, err := FormatOf([]byte(tc.config), "config.json")
		switch {
		case tc.want == "" && (f != nil || err != nil):
			t.Errorf("%s: %v, %v; want no format", tc.config, f, err)
		case strings.HasPrefix(tc.want, "="):
			if err != nil || f.Name() != tc.want[1:] {
				t.Errorf("%s: %v, %v; want %s", tc.config, f, err, tc.want[1:])
			}
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "config.json: ")):
			t.Errorf("%s: %v; want an error naming config.json and %s", tc.config, err, tc.want)
		}
	}
}

// FuzzFormatOf: any config.json is read, found unquantized, or refused
// naming the file.
func FuzzFormatOf(f *testing.F) {
	f.Add([]byte(`{"quantization_config":{"quant_method":"gptq","bits":4,"group_size":128,"sym":true}}`))
	f.Add([]byte(`{"quantization":{"group_size":64,"bits":4}}`))
	f.Add([]byte(`{"quantization_config":{"quant_method":"compressed-tensors","format":"marlin-24"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		fm, err := FormatOf(b, "config.json")
		if err != nil && !strings.HasPrefix(err.Error(), "config.json: ") {
			t.Fatalf("error not naming the file: %v", err)
		}
		if fm != nil && (err != nil || fm.Name() == "") {
			t.Fatalf("format %v with error %v", fm, err)
		}
	})
}

// TestOpenForNamesTheRefusal: a module the format's reader refuses is
// named with the reader's reason, not as a missing tensor.
func TestOpenForNamesTheRefusal(t *testing.T) {
	ref := synthtest.Checkpoint(t, synth.Presets["tiny"], 0)
	f, _ := Writers["gptq"](Options{Bits: 4, GroupSize: 32, Sym: true})
	dir := filepath.Join(t.TempDir(), "gptq")
	if err := Write(ref, f, dir, nil); err != nil {
		t.Fatal(err)
	}
	// The same files read as 8-bit: qweight holds half the inputs.
	b, _ := os.ReadFile(filepath.Join(dir, "config.json"))
	os.WriteFile(filepath.Join(dir, "config.json"), []byte(strings.Replace(string(b), `"bits": 4`, `"bits": 8`, 1)), 0o644)
	_, err := OpenFor(ref, dir)
	if err == nil || !strings.Contains(err.Error(), "gptq: model.layers.0.mlp.down_proj.scales: shape [6 64], want (3, 64)") {
		t.Errorf("OpenFor: %v", err)
	}
}

func ExampleFormatOf() {
	f, err := FormatOf([]byte(`{"quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": true, "desc_act": true, "checkpoint_format": "gptq"}}`), "config.json")
	fmt.Println(f.Name(), err)
	_, err = FormatOf([]byte(`{"quantization_config": {"quant_method": "hqq"}}`), "config.json")
	fmt.Println(err)
	// Output:
	// gptq 4-bit g128 sym desc_act <nil>
	// config.json: quantization_config.quant_method "hqq": HQQ's half-quadratic layout is not read (read: awq, bitsandbytes, compressed-tensors, gptq)
}
