package variant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/exl3"
	"logitscope/internal/format/safetensors"
	"logitscope/internal/quant"
)

// An EXL3 variant holds each matrix its policy picks as one layer's blob
// (exl3.Format.Rows reads back its W, near the checkpoint's) and every
// other tensor as the checkpoint has it.
func TestWriteEXL3(t *testing.T) {
	ck := tinyCheckpoint(t, 0)
	const picked = "model.layers.0.self_attn.q_proj.weight"
	dir := filepath.Join(t.TempDir(), "exl3")
	scheme, err := ParseScheme("exl3-k4")
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(ck, scheme, dir, Options{Policy: &Policy{Only: `layers\.0\.self_attn\.q_proj`}}); err != nil {
		t.Fatal(err)
	}
	v, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if v.Manifest.Scheme != "exl3-k4-mcg" {
		t.Errorf("scheme %q, want the canonical exl3-k4-mcg", v.Manifest.Scheme)
	}
	for _, name := range ck.Names() {
		want, shape, _ := ck.Float32(name)
		got, _, err := v.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		ps := v.Pieces(name)
		if name != picked {
			if fmt.Sprint(got) != fmt.Sprint(want) || ps[0].Scheme != SchemeF32 {
				t.Fatalf("%s (%s) changed", name, ps[0].Scheme)
			}
			continue
		}
		k4 := exl3.Format{K: 4, Codebook: exl3.MCG}
		if len(ps) != 1 || ps[0].Scheme != "exl3-k4-mcg" || ps[0].Length != k4.Bytes(shape[1], shape[0]) {
			t.Fatalf("%s: pieces %+v, want one exl3-k4-mcg blob", name, ps)
		}
		blob, _ := v.Raw(ps[0])
		rows, _ := EXL3(ps[0].Scheme).Rows(blob, shape[1], shape[0])
		var e2, w2 float64
		for i := range want {
			if got[i] != rows[i] {
				t.Fatalf("%s[%d] = %g, the blob's W has %g", name, i, got[i], rows[i])
			}
			e2 += float64(got[i]-want[i]) * float64(got[i]-want[i])
			w2 += float64(want[i]) * float64(want[i])
		}
		// 4 bits a weight without a Hessian: about 0.1 of the RMS.
		if rel := math.Sqrt(e2 / w2); rel > 0.2 {
			t.Errorf("%s: K4 error %.3f of the RMS", name, rel)
		} else {
			t.Logf("%s: K4 error %.3f of the RMS", name, rel)
		}
	}
}

func TestWriteEXL3Refuses(t *testing.T) {
	ck := tinyCheckpoint(t, 0)
	for _, c := range []struct {
		scheme quant.Scheme
		opt    Options
		err    string
	}{
		{"exl3-k4-mcg", Options{Policy: &Policy{Only: `embed_tokens`}}, "exl3-k4-mcg quantizes linear layers, and the embedding is a lookup table"},
		{"exl3-k4-mcg", Options{Policy: &Policy{Only: `layers\.0\.mlp\.down_proj`}, MaxShardBytes: 4096}, "exl3-k4-mcg of 64×176 takes 17152 bytes, over a shard's 4096"},
		{"exl3-k4", Options{}, `variant: scheme "exl3-k4": write it "exl3-k4-mcg"`},
		{"exl3-k12", Options{}, `exl3: format "exl3-k12": "12" bits per weight: want 1 to 8`},
	} {
		err := Write(ck, c.scheme, filepath.Join(t.TempDir(), "v"), c.opt)
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s %+v: %v, want %q", c.scheme, c.opt.Policy, err, c.err)
		}
	}
}

// exllamav3Dir writes a directory as exllamav3's converter leaves one: a
// config.json with its quantization_config and a safetensors file of
// EXL3 layers, one for each of names (random ones of format f, sized for
// ck's matrices).
func exllamav3Dir(t *testing.T, ck *checkpoint.Checkpoint, f exl3.Format, names ...string) (string, map[string]exl3.Layer) {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, 2))
	layers := map[string]exl3.Layer{}
	var ts []safetensors.Tensor
	for _, name := range names {
		info, _, _ := ck.Info(name)
		l := exl3.Layer{In: exl3.Pad(info.Shape[1]), Out: exl3.Pad(info.Shape[0]), K: f.K, Codebook: f.Codebook}
		l.Trellis = make([]uint16, f.TrellisBytes(info.Shape[1], info.Shape[0])/2)
		for i := range l.Trellis {
			l.Trellis[i] = uint16(rng.Uint32())
		}
		l.Suh, l.Svh = make([]uint16, l.In), make([]uint16, l.Out)
		for i := range l.Suh {
			l.Suh[i] = 0x2000 // 2⁻⁷
		}
		for i := range l.Svh {
			l.Svh[i] = 0xbc00 // −1
		}
		layers[name] = l
		ts = append(ts, l.Tensors(strings.TrimSuffix(name, ".weight"))...)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	cfg := `{"architectures": ["Qwen2ForCausalLM"], "quantization_config": {"quant_method": "exl3", "version": "0.0.7", "bits": 4.0}}`
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, layers
}

// A variant takes the layers exllamav3 converted, byte for byte, and
// names the file they came from by its sha256; a layer of another format
// or size, or none, is refused by name.
func TestWriteEXL3FromExllamav3(t *testing.T) {
	ck := tinyCheckpoint(t, 0)
	const q, k = "model.layers.0.self_attn.q_proj.weight", "model.layers.1.self_attn.k_proj.weight"
	f := exl3.Format{K: 6, Codebook: exl3.MUL1}
	src, layers := exllamav3Dir(t, ck, f, q, k)
	d, err := exl3.OpenDir(src)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	out := filepath.Join(t.TempDir(), "v")
	if err := Write(ck, quant.Scheme(f.String()), out, Options{EXL3: d, Policy: &Policy{Only: `self_attn\.(q|k)_proj`}}); err == nil ||
		!strings.Contains(err.Error(), "model.layers.0.self_attn.k_proj.weight: "+src+" holds no EXL3 layer of it (model.layers.0.self_attn.k_proj.trellis)") {
		t.Fatalf("a layer missing from the converted model: %v", err)
	}
	if err := Write(ck, quant.Scheme(f.String()), out, Options{EXL3: d, Policy: &Policy{Only: `layers\.0\.self_attn\.q_proj|layers\.1\.self_attn\.k_proj`}}); err != nil {
		t.Fatal(err)
	}
	v, err := Open(out)
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := checkpoint.FileSHA256(filepath.Join(src, "model.safetensors"))
	if fmt.Sprint(v.Manifest.EXL3Sources) != fmt.Sprint(map[string]string{"model.safetensors": sum}) {
		t.Errorf("exl3_sources %v, want model.safetensors %s", v.Manifest.EXL3Sources, sum)
	}
	for _, name := range []string{q, k} {
		ps := v.Pieces(name)
		blob, _ := v.Raw(ps[0])
		if len(ps) != 1 || ps[0].Scheme != f.String() || string(blob) != string(layers[name].Blob()) {
			t.Errorf("%s: not the converted layer's bytes", name)
		}
	}
	if err := Write(ck, "exl3-k4-mcg", out, Options{EXL3: d, Policy: &Policy{Only: `layers\.0\.self_attn\.q_proj`}}); err == nil ||
		!strings.Contains(err.Error(), "its EXL3 layer is exl3-k6-mul1, the variant's scheme exl3-k4-mcg (quantize --scheme exl3-k6-mul1)") {
		t.Errorf("another format: %v", err)
	}
	// A converted model of other dims: k_proj's layer under q_proj's name.
	other, _ := exllamav3Dir(t, ck, f, k)
	os.Rename(filepath.Join(other, "model.safetensors"), filepath.Join(other, "x"))
	l := layers[k]
	safetensors.WriteFile(filepath.Join(other, "model.safetensors"), l.Tensors("model.layers.0.mlp.down_proj"), nil)
	d2, err := exl3.OpenDir(other)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	if err := Write(ck, quant.Scheme(f.String()), out, Options{EXL3: d2, Policy: &Policy{Only: `layers\.0\.mlp\.down_proj`}}); err == nil ||
		!strings.Contains(err.Error(), "its EXL3 layer is 128×128 (in×out, padded), the matrix 176×64 pads to 256×128") {
		t.Errorf("another size: %v", err)
	}
	os.WriteFile(filepath.Join(other, "config.json"), []byte(`{"quantization_config": {"quant_method": "gptq"}}`), 0o644)
	if _, err := exl3.OpenDir(other); err == nil || !strings.Contains(err.Error(), `no quantization_config with quant_method "exl3"`) {
		t.Errorf("a GPTQ model: %v", err)
	}
}
