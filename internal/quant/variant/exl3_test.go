package variant

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/format/exl3"
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
