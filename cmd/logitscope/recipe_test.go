package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"logitscope/internal/analysis/attribution"
	"logitscope/internal/format/gguf"
	"logitscope/internal/format/seal"
	"logitscope/internal/model/synth"
	"logitscope/internal/peer/llamacpp"
	"logitscope/internal/quant/variant"
)

func recipeCmd(args []string, out, errb *bytes.Buffer) error { return recipeCommand(args, out, errb) }

// A recipe for the tiny model at 6 bits per weight: three sweeps, a
// frontier, a variant built and measured against the uniform schemes, a
// sealed JSON, and rules that `quantize --as` turns into the same variant.
func TestRecipeCommand(t *testing.T) {
	model := copyModel(t)
	dir := t.TempDir()
	out, js := filepath.Join(dir, "recipe"), filepath.Join(dir, "recipe.json")
	text, err := run(t, recipeCmd, "--model", model, "--panel", "../../internal/model/synth/corpus.txt", "--window", "32",
		"--target-bpw", "6", "--out", out, "--json", js)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"frontier", "picked: ", "measured", "q8 ", "q6 ", "q4 ", "recipe ", "the recipe against q6",
		"logitscope quantize --model", "llama-quantize", "--tensor-type", "model-f32.gguf model-recipe.gguf", "wrote " + js} {
		if !strings.Contains(text, want) {
			t.Errorf("the output has no %q:\n%s", want, text)
		}
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := seal.Verify(data, "seal", js); err != nil {
		t.Error(err)
	}
	var r attribution.Recipe
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	if r.Kind != attribution.RecipeKind || r.BPW > 6 || r.Measured == nil || len(r.Uniform) != 3 || len(r.Frontier) < 2 || r.GGUFBase == "" || len(r.GGUFRules) == 0 {
		t.Fatalf("the recipe: %+v", r)
	}
	v, err := variant.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range r.Assignment() {
		if got := v.Pieces(name)[0].Scheme; got != want {
			t.Errorf("%s is %s in the variant, %s in the recipe", name, got, want)
		}
	}
	for _, p := range []string{".q8.partial", ".q6.partial", ".q4.partial"} {
		if _, err := os.Stat(js + p); !os.IsNotExist(err) {
			t.Errorf("%s is left: %v", p, err)
		}
	}

	// The rules as printed, given to quantize, make the same variant.
	again := filepath.Join(dir, "again")
	args := []string{"--model", model, "--scheme", r.Base, "--out", again}
	for _, x := range r.Rules {
		args = append(args, "--as", x.String())
	}
	if _, err := run(t, quantizeCmd, args...); err != nil {
		t.Fatal(err)
	}
	w, err := variant.Open(again)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range v.Names() {
		a, b := v.Pieces(name)[0], w.Pieces(name)[0]
		x, err := v.Raw(a)
		if err != nil {
			t.Fatal(err)
		}
		y, err := w.Raw(b)
		if err != nil {
			t.Fatal(err)
		}
		if a.Scheme != b.Scheme || !bytes.Equal(x, y) {
			t.Errorf("%s: %s from the recipe, %s from quantize --as, or other bytes", name, a.Scheme, b.Scheme)
		}
	}
}

func TestRecipeRefusals(t *testing.T) {
	model := copyModel(t)
	panel := "../../internal/model/synth/corpus.txt"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", model, "--panel", panel}, "--target-bpw B or --target-size S"},
		{[]string{"--model", model, "--panel", panel, "--target-bpw", "5", "--target-size", "1MB"}, "one of them"},
		{[]string{"--model", model, "--panel", panel, "--target-bpw", "-1"}, "--target-bpw -1"},
		{[]string{"--model", model, "--panel", panel, "--target-size", "12 parsecs"}, `--target-size "12 parsecs"`},
		{[]string{"--model", model, "--target-bpw", "5"}, "--panel FILE is required"},
		{[]string{"--model", model, "--panel", panel, "--target-bpw", "5", "--schemes", "q8,q5"}, `--schemes: quant: unknown scheme "q5"`},
		{[]string{"--model", model, "--panel", panel, "--window", "32", "--target-bpw", "4", "--schemes", "q4"}, "below the smallest recipe"},
	} {
		_, err := run(t, recipeCmd, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.args, err, c.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"4096", 4096}, {"12.5MB", 12_500_000}, {"3GB", 3_000_000_000}, {"800MiB", 800 << 20}, {"1.5 GiB", 3 << 29}, {"2kB", 2000}, {"2KB", 2000}, {"7B", 7},
	} {
		if got, err := parseSize(c.in); err != nil || got != c.want {
			t.Errorf("%q: %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "MB", "-1MB", "1.2.3", "5 PB", "0", "1e3"} {
		if _, err := parseSize(bad); err == nil {
			t.Errorf("%q was taken", bad)
		}
	}
}

// The recipe's llama-quantize rules, given to llama.cpp's own quantizer
// (export --type --tensor-type: llama_model_quantize with tt_overrides,
// as llama-quantize --tensor-type does), make a GGUF in which every
// matrix has the type the recipe names, at the size it says. The model's
// rows are whole 256-weight blocks, so q6 takes Q6_K.
func TestRecipeInLlamaCpp(t *testing.T) {
	llamacpp.Harness(t)
	model := filepath.Join(t.TempDir(), "small")
	if err := synth.Write(synth.Presets["small-llama3"], model, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	js := filepath.Join(t.TempDir(), "recipe.json")
	if _, err := run(t, recipeCmd, "--model", model, "--panel", "../../internal/model/synth/corpus.txt", "--window", "32",
		"--target-bpw", "6.5", "--json", js); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var r attribution.Recipe
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	types := map[string]bool{}
	for _, x := range r.GGUFRules {
		types[x.Scheme] = true
	}
	if !types["q6_K"] || len(types) < 2 {
		t.Fatalf("the recipe's GGUF types %v: want q6_K among others", types)
	}
	out := filepath.Join(t.TempDir(), "recipe.gguf")
	args := []string{"--model", model, "--type", r.GGUFBase, "--gguf", out}
	for _, x := range r.GGUFRules {
		args = append(args, "--tensor-type", x.String())
	}
	if _, err := run(t, exportCmd, args...); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	var matrices int64
	for _, tensor := range f.Tensors {
		var rule *attribution.Rule
		for _, x := range r.GGUFRules {
			if regexp.MustCompile(x.Match).MatchString(tensor.Name) {
				rule = &x
				break
			}
		}
		if rule == nil {
			continue // a norm: F32, no rule
		}
		if !strings.EqualFold(tensor.Type.String(), rule.Scheme) {
			t.Errorf("%s is %s in llama.cpp's file, %s in the recipe", tensor.Name, tensor.Type, rule.Scheme)
		}
		matrices += tensor.Size
	}
	if matrices != r.GGUFBytes {
		t.Errorf("the GGUF's matrices take %d bytes, the recipe says %d", matrices, r.GGUFBytes)
	}
}
