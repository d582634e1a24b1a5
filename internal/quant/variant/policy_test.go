package variant

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/format/seal"
	"logitscope/internal/quant"
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
	if !reflect.DeepEqual(v.Manifest.Policy, p) {
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
		{Policy{Rules: []Rule{{`mlp`, "q8"}, {`self_attn\.(`, "q8"}}}, `policy rules[1] "self_attn\\.(=q8": error parsing regexp: missing closing )`},
		{Policy{Rules: []Rule{{`lm_head`, "q3"}}}, `policy rules[0] "lm_head=q3": scheme "q3": want q8, q6, q4, exl3-kK[-CODEBOOK] or f32`},
		{Policy{Rules: []Rule{{`lm_head`, ""}}}, `policy rules[0] "lm_head=": scheme "": want q8, q6, q4, exl3-kK[-CODEBOOK] or f32`},
		{Policy{Rules: []Rule{{``, "q8"}}}, `policy rules[0] "=q8": empty regexp`},
	} {
		err := Write(ck, quant.Q4, filepath.Join(t.TempDir(), "q4"), Options{Policy: &c.policy})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("write %+v: %v, want %q", c.policy, err, c.want)
		}
		// A manifest whose policy does not parse is refused when opened.
		m := &Manifest{Format: Format, Scheme: "q4", GroupSize: quant.GroupSize, Policy: &c.policy}
		if err := m.check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("check %+v: %v, want %q", c.policy, err, c.want)
		}
	}
}

// The first rule that matches decides, whatever comes after it and
// whatever Only and Keep say; a matrix no rule matches falls to Only, Keep
// and the variant's scheme as without rules.
func TestPolicySchemeOf(t *testing.T) {
	const (
		q   = "model.layers.0.self_attn.q_proj.weight"
		k   = "model.layers.0.self_attn.k_proj.weight"
		up  = "model.layers.0.mlp.up_proj.weight"
		emb = "model.embed_tokens.weight"
	)
	attn8 := Rule{`self_attn\.`, "q8"}
	for _, c := range []struct {
		policy *Policy
		name   string
		want   string // in a q4 variant
		rule   int
	}{
		{nil, q, "q4", -1},
		{&Policy{Rules: []Rule{attn8}}, q, "q8", 0},
		{&Policy{Rules: []Rule{attn8}}, up, "q4", -1},
		{&Policy{Rules: []Rule{{`q_proj`, "f32"}, attn8}}, q, "f32", 0},
		{&Policy{Rules: []Rule{{`q_proj`, "f32"}, attn8}}, k, "q8", 1},
		{&Policy{Rules: []Rule{attn8, {`q_proj`, "f32"}}}, q, "q8", 0}, // the narrower rule comes too late
		{&Policy{Rules: []Rule{{`mlp`, "q6"}, {`up_proj`, "f32"}}}, up, "q6", 0},
		{&Policy{Rules: []Rule{{`embed_tokens`, "q4"}}}, emb, "q4", 0}, // the variant's own scheme
		{&Policy{Keep: `embed_tokens`, Rules: []Rule{{`embed_tokens`, "q8"}}}, emb, "q8", 0},
		{&Policy{Keep: `embed_tokens`, Rules: []Rule{attn8}}, emb, "f32", -1},
		{&Policy{Only: `mlp\.`, Rules: []Rule{attn8}}, q, "q8", 0},
		{&Policy{Only: `mlp\.`, Rules: []Rule{attn8}}, up, "q4", -1},
		{&Policy{Only: `mlp\.`, Rules: []Rule{attn8}}, emb, "f32", -1},
		{&Policy{Only: `mlp\.`, Keep: `up_proj`, Rules: []Rule{{`up_proj`, "q6"}}}, up, "q6", 0},
	} {
		if got := c.policy.SchemeOf(c.name, quant.Q4); got != c.want {
			t.Errorf("%v on %s: %s, want %s", c.policy, c.name, got, c.want)
		}
		if got := c.policy.RuleOf(c.name); got != c.rule {
			t.Errorf("%v on %s: rule %d, want %d", c.policy, c.name, got, c.rule)
		}
	}
}

func TestParseRule(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Rule
		err  string
	}{
		{`self_attn\.=q8`, Rule{`self_attn\.`, "q8"}, ""},
		{`lm_head=f32`, Rule{`lm_head`, "f32"}, ""},
		{`(?P<a>x)=y=q6`, Rule{`(?P<a>x)=y`, "q6"}, ""}, // a regexp may hold "="
		{`self_attn`, Rule{}, `want REGEX=SCHEME, e.g. 'self_attn\.=q8'`},
		{`experts=exl3-k4`, Rule{`experts`, "exl3-k4-mcg"}, ""}, // in its canonical spelling
		{`experts=exl3-k6-mul1`, Rule{`experts`, "exl3-k6-mul1"}, ""},
		{`self_attn=Q8`, Rule{}, `scheme "Q8": want q8, q6, q4, exl3-kK[-CODEBOOK] or f32`},
		{`experts=exl3-k9`, Rule{}, `scheme "exl3-k9": want q8, q6, q4, exl3-kK[-CODEBOOK] or f32`},
		{`=q8`, Rule{}, `empty regexp (use --scheme for every matrix)`},
		{`self_attn(=q8`, Rule{}, "error parsing regexp: missing closing ): `self_attn(`"},
	} {
		got, err := ParseRule(c.in)
		switch {
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: %+v, %v; want %+v", c.in, got, err, c.want)
		case c.err != "" && (err == nil || err.Error() != c.err):
			t.Errorf("%s: %v, want %q", c.in, err, c.err)
		}
	}
}

func TestPolicyString(t *testing.T) {
	for _, c := range []struct {
		policy *Policy
		want   string
	}{
		{nil, ""},
		{&Policy{Keep: `lm_head`}, `--keep "lm_head"`},
		{&Policy{Rules: []Rule{{`self_attn\.`, "q8"}, {`lm_head`, "f32"}}}, `--as "self_attn\\.=q8" --as "lm_head=f32"`},
		{&Policy{Only: `mlp`, Keep: `down`, Rules: []Rule{{`up`, "q6"}}}, `--only "mlp" --keep "down" --as "up=q6"`},
	} {
		if got := c.policy.String(); got != c.want {
			t.Errorf("%+v: %s, want %s", c.policy, got, c.want)
		}
	}
}

// mixed is a q4 policy with each other scheme somewhere: attention in q8,
// the MLP's down projection in q6, the embedding (the tied head) kept.
var mixed = &Policy{Rules: []Rule{{`self_attn\.`, "q8"}, {`mlp\.down_proj`, "q6"}, {`embed_tokens`, "f32"}}}

// mixedScheme is the scheme mixed gives a tiny tensor, spelled out.
func mixedScheme(name string, shape []int) string {
	switch {
	case len(shape) == 1:
		return SchemeF32
	case strings.Contains(name, "self_attn."):
		return "q8"
	case strings.Contains(name, "mlp.down_proj"):
		return "q6"
	case strings.Contains(name, "embed_tokens"):
		return SchemeF32
	}
	return "q4"
}

// A mixed variant stores each matrix, in every piece, in the scheme its
// rule picks, and reads each back as that scheme's quantizer gives it:
// the CPU engine decodes per piece (Float32), whatever the variant's scheme.
func TestWriteMixed(t *testing.T) {
	ck := tinyCheckpoint(t, 0)
	dir := filepath.Join(t.TempDir(), "q4")
	if err := Write(ck, quant.Q4, dir, Options{Policy: mixed, MaxShardBytes: 4096}); err != nil {
		t.Fatal(err)
	}
	v, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(v.Manifest.Policy, mixed) || v.Manifest.Scheme != "q4" {
		t.Fatalf("manifest scheme %s, policy %+v", v.Manifest.Scheme, v.Manifest.Policy)
	}
	count := map[string]int{}
	for _, name := range ck.Names() {
		want, shape, err := ck.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		scheme := mixedScheme(name, shape)
		count[scheme]++
		for _, p := range v.Pieces(name) {
			if p.Scheme != scheme {
				t.Fatalf("%s rows %v: %s, want %s", name, p.Rows, p.Scheme, scheme)
			}
		}
		if scheme != SchemeF32 {
			s := quant.Scheme(scheme)
			blob, _ := quant.Quantize(s, want, shape[0], shape[1])
			quant.Dequantize(s, blob, shape[0], shape[1], want)
		}
		got, _, err := v.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s reads back other values than %s's", name, scheme)
		}
	}
	if count["q8"] == 0 || count["q6"] == 0 || count["q4"] == 0 || len(v.Manifest.Tensors) <= len(v.Names()) {
		t.Fatalf("tensors per scheme %v, %d pieces of %d tensors: want every scheme and split matrices", count, len(v.Manifest.Tensors), len(v.Names()))
	}
}

// A resealed manifest whose piece is in another scheme than the recorded
// policy gives its tensor is refused, naming the piece: the policy shown
// in receipts, reports and the page then always describes the weights.
func TestOpenRefusesForgedScheme(t *testing.T) {
	ck := tinyCheckpoint(t, 0)
	for _, c := range []struct {
		name   string // the first piece whose tensor's name holds it is forged
		scheme string
		policy *Policy // the recorded policy, replaced when not nil
		want   string
	}{
		{"self_attn.q_proj.weight", "q4", nil, `scheme "q4", but the policy --as "self_attn\\.=q8" --as "mlp\\.down_proj=q6" --as "embed_tokens=f32" gives it q8`},
		{"mlp.up_proj", "q8", nil, `scheme "q8", but the policy`}, // a scheme a rule names, not this tensor's
		{"mlp.up_proj", "q6", nil, `gives it q4`},
		{"mlp.up_proj", "f32", nil, `scheme "f32", but the policy`},
		{"embed_tokens", "q4", nil, `scheme "q4", but the policy`},
		{"input_layernorm", "q4", nil, `scheme "q4" for a vector, which variants store in f32`},
		{"embed_tokens", "f32", &Policy{}, `scheme "f32" in a q4 variant`}, // the policy dropped, the pieces left mixed
	} {
		t.Run(c.name+"="+c.scheme, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "q4")
			if err := Write(ck, quant.Q4, dir, Options{Policy: mixed}); err != nil {
				t.Fatal(err)
			}
			v, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			m := v.Manifest
			i := slices.IndexFunc(m.Tensors, func(p Piece) bool { return strings.Contains(p.Name, c.name) })
			m.Tensors[i].Scheme = c.scheme
			if c.policy != nil {
				m.Policy = c.policy
			}
			data, err := seal.Marshal(m, "manifest_sha256", func(s string) { m.Seal = s })
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "manifest.json")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err = Open(dir)
			for _, want := range []string{path + ": ", fmt.Sprintf("tensors[%d] (%s): ", i, m.Tensors[i].Name), c.want} {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("err = %v, want it to hold %q", err, want)
				}
			}
		})
	}
	// Without a policy, a matrix in another scheme than the variant's is refused as before.
	m := &Manifest{Format: Format, Scheme: "q4", GroupSize: quant.GroupSize, Tensors: []Piece{
		{Name: "w", Scheme: "q8", Shape: []int{2, 32}, Rows: [2]int{0, 2}, Shard: "s", Length: 68}}, Shards: []Shard{{Name: "s", Size: 68}}}
	if err := m.check(); err == nil || err.Error() != `tensors[0] (w): scheme "q8" in a q4 variant` {
		t.Errorf("check: %v", err)
	}
}

// Rules that decide nothing leave a variant as it would be without them;
// rules that keep every matrix in f32 leave nothing to quantize, which is
// refused as a policy picking no matrix is.
func TestWriteRulesPickNothing(t *testing.T) {
	ck := tinyCheckpoint(t, 0)
	for _, c := range []struct {
		policy Policy
		err    string
	}{
		{Policy{Rules: []Rule{{`no_such_tensor`, "q8"}}}, ""},
		{Policy{Only: `mlp\.`, Rules: []Rule{{`mlp\.`, "f32"}}}, "picks no matrix to quantize"},
		{Policy{Rules: []Rule{{`self_attn`, "q8"}, {`.`, "f32"}}}, ""},
		{Policy{Rules: []Rule{{`.`, "f32"}, {`self_attn`, "q8"}}}, "picks no matrix to quantize"},
	} {
		dir := filepath.Join(t.TempDir(), "q4")
		err := Write(ck, quant.Q4, dir, Options{Policy: &c.policy})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want %q", &c.policy, err, c.err)
			}
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("%s: refused, but wrote %s", &c.policy, dir)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", &c.policy, err)
			continue
		}
		if _, err := Open(dir); err != nil {
			t.Errorf("%s: %v", &c.policy, err)
		}
	}
}
