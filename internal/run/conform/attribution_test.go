package conform

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/demo"
)

// Sweep and recipe cases on the trained demo model's own panel: the q4
// sweep's first unit is the embedding, a recipe at q6's size beats q6,
// and a case that names another first unit fails, saying which came
// first. The sweep's and the recipe's JSON are left in the case's
// directory.
func TestSweepAndRecipeCases(t *testing.T) {
	src, err := demo.Dir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "demo")
	if err := os.CopyFS(model, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	var note struct{ Panel string }
	data, _ := os.ReadFile(filepath.Join(model, "logitscope.json"))
	if err := json.Unmarshal(data, &note); err != nil || note.Panel == "" {
		t.Fatalf("the demo's panel: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "panel.txt"), []byte(note.Panel), 0o644); err != nil {
		t.Fatal(err)
	}
	base := func(name string) map[string]any {
		return map[string]any{"name": name, "model": "demo", "test": "q4", "panel": "panel.txt", "window": 64, "thresholds": map[string]any{}}
	}
	good, wrong := base("attribution"), base("wrong-top")
	good["sweep"] = map[string]any{"top_unit": `^model\.embed_tokens\.weight$`}
	good["recipe"] = map[string]any{"target_bpw": 6.5, "beats": "q6", "max_mean_kld": 0.01}
	wrong["sweep"] = map[string]any{"unit": "layer", "top_unit": `^layer 3$`}
	b, _ := json.Marshal(map[string]any{"name": "attribution", "cases": []any{good, wrong}})
	path := filepath.Join(dir, "suite.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := run(t, s, "native", "", t.TempDir(), Shard{})
	a, w := sum.Cases[0], sum.Cases[1]
	if a.Status != "pass" || a.Metrics.TopUnit != "model.embed_tokens.weight" || a.Metrics.RecipeMeanKLD == nil || *a.Metrics.RecipeBPW > 6.5 {
		t.Errorf("the attribution case: %+v %+v", a, a.Metrics)
	}
	for _, f := range []string{"sweep.json", "recipe.json", "recipe/manifest.json"} {
		if _, err := os.Stat(filepath.Join(a.Dir, f)); err != nil {
			t.Error(err)
		}
	}
	if w.Status != "fail" || len(w.Failures) != 1 || !strings.Contains(w.Failures[0], `does not match "^layer 3$"`) {
		t.Errorf("the wrong top unit: %+v", w)
	}
}

func TestSweepAndRecipeChecks(t *testing.T) {
	for _, c := range []struct {
		extra map[string]any
		want  string
	}{
		{map[string]any{"sweep": map[string]any{}}, "top_unit is required"},
		{map[string]any{"sweep": map[string]any{"top_unit": "("}}, "top_unit: error parsing regexp"},
		{map[string]any{"sweep": map[string]any{"top_unit": "x", "unit": "block"}}, `unit "block"`},
		{map[string]any{"recipe": map[string]any{"beats": "q6"}}, "target_bpw 0"},
		{map[string]any{"recipe": map[string]any{"target_bpw": 5}}, "give max_mean_kld or beats"},
		{map[string]any{"recipe": map[string]any{"target_bpw": 5, "beats": "q5"}}, `beats "q5": not one of the schemes swept`},
		{map[string]any{"recipe": map[string]any{"target_bpw": 5, "beats": "q4", "schemes": []string{"q3"}}}, `unknown scheme "q3"`},
		{map[string]any{"recipe": map[string]any{"target_bpw": 5, "max_mean_kld": -1}}, "max_mean_kld -1"},
		{map[string]any{"panel": nil, "prompts": []string{"hi"}, "sweep": map[string]any{"top_unit": "x"}}, "measures over a panel"},
	} {
		cs := map[string]any{"name": "c", "model": "m", "test": "q4", "panel": "p.txt"}
		for k, v := range c.extra {
			if v == nil {
				delete(cs, k)
			} else {
				cs[k] = v
			}
		}
		b, _ := json.Marshal(map[string]any{"cases": []any{cs}})
		if _, err := parse(b, t.TempDir()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.extra, err, c.want)
		}
	}
}
