package variant

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"logitscope/quant"
)

func TestPolicyQuantizes(t *testing.T) {
	for _, c := range []struct {
		policy *Policy
		name   string
		want   bool
	}{
		{nil, "model.layers.0.self_attn.q_proj.weight", true},
		{&Policy{Only: `mlp\.`}, "model.layers.0.mlp.up_proj.weight", true},
		{&Policy{Only: `mlp\.`}, "model.layers.0.self_attn.q_proj.weight", false},
		{&Policy{Keep: `embed_tokens|lm_head`}, "model.embed_tokens.weight", false},
		{&Policy{Keep: `embed_tokens|lm_head`}, "model.layers.1.mlp.down_proj.weight", true},
		{&Policy{Only: `mlp\.`, Keep: `down_proj`}, "model.layers.1.mlp.down_proj.weight", false},
		{&Policy{Only: `mlp\.`, Keep: `down_proj`}, "model.layers.1.mlp.gate_proj.weight", true},
	} {
		if got := c.policy.Quantizes(c.name); got != c.want {
			t.Errorf("%v on %s: %v, want %v", c.policy, c.name, got, c.want)
		}
	}
}

// A policy variant quantizes exactly the matrices it picks, keeps the
// others as the checkpoint's float32 values, records the policy under the
// seal, and opens as any variant does.
func TestWritePolicy(t *testing.T) {
	ck := tinyCheckpoint(t, 0)
	dir := filepath.Join(t.TempDir(), "q4")
	p := &Policy{Only: `mlp\.`, Keep: `layers\.1\.`}
	if err := Write(ck, quant.Q4, dir, Options{Policy: p}); err != nil {
		t.Fatal(err)
	}
	v, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if v.Manifest.Policy == nil || *v.Manifest.Policy != *p {
		t.Fatalf("manifest policy %+v, want %+v", v.Manifest.Policy, p)
	}
	var quantized []string
	for _, name := range v.Names() {
		ps := v.Pieces(name)
		if ps[0].Scheme == string(quant.Q4) {
			quantized = append(quantized, name)
			continue
		}
		got, _, err := v.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		want, _, err := ck.Float32(name)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("%s kept in f32 reads back differently (%v)", name, err)
		}
	}
	want := []string{"model.layers.0.mlp.down_proj.weight", "model.layers.0.mlp.gate_proj.weight", "model.layers.0.mlp.up_proj.weight"}
	slices.Sort(quantized)
	if !slices.Equal(quantized, want) {
		t.Fatalf("quantized %v, want %v", quantized, want)
	}
	if p.String() != `--only "mlp\\." --keep "layers\\.1\\."` {
		t.Errorf("policy reads %s", p)
	}
}

func TestPolicyErrors(t *testing.T) {
	ck := tinyCheckpoint(t, 0)
	for _, c := range []struct {
		policy Policy
		want   string
	}{
		{Policy{Only: `mlp\.(`}, `policy only "mlp\\.(": error parsing regexp`},
		{Policy{Keep: `[`}, `policy keep "["`},
	} {
		err := Write(ck, quant.Q4, filepath.Join(t.TempDir(), "q4"), Options{Policy: &c.policy})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.policy, err, c.want)
		}
	}
	// A manifest whose policy does not parse is refused when opened.
	m := &Manifest{Format: Format, Scheme: "q4", GroupSize: quant.GroupSize, Policy: &Policy{Only: "("}}
	if err := m.check(); err == nil || !strings.Contains(err.Error(), "policy only") {
		t.Errorf("check: %v", err)
	}
}
