package attribution

import (
	"bytes"
	"strings"
	"testing"
)

func sealed(t testing.TB, r *Result) []byte {
	t.Helper()
	data, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParse(t *testing.T) {
	res := &Result{Kind: Kind, Version: Version, Unit: ByTensor, Windows: 2, NumLayers: 1,
		Units:  []UnitResult{{Unit: Unit{Name: "lm_head.weight", Layer: 1, Kind: "lm_head"}}},
		Layers: []Divergence{{Layer: 0}}}
	data := sealed(t, res)
	got, rec, err := Parse(data, "sweep.json")
	if err != nil || rec != nil || got == nil || got.Windows != 2 || got.Units[0].Name != "lm_head.weight" {
		t.Fatalf("Parse: %+v, %v, %v", got, rec, err)
	}
	recipe := &Recipe{Kind: RecipeKind, Version: RecipeVersion, Budget: 7}
	rdata, err := recipe.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, r, err := Parse(rdata, "recipe.json"); err != nil || r == nil || r.Budget != 7 {
		t.Fatalf("Parse a recipe: %+v, %v", r, err)
	}
	far := *res
	far.Units = []UnitResult{{Unit: Unit{Name: "x", Layer: 5}}}
	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"not JSON", []byte("{"), "sweep.json: unexpected end"},
		{"another kind", []byte(`{"kind":"logitscope.snapshot","version":1}`), `kind "logitscope.snapshot": want "logitscope-sensitivity"`},
		{"another version", []byte(`{"kind":"logitscope-sensitivity","version":3}`), "version 3: this build reads version 1"},
		{"unsealed", []byte(`{"kind":"logitscope-recipe","version":1}`), "not sealed"},
		{"tampered", bytes.Replace(data, []byte(`"windows": 2`), []byte(`"windows": 3`), 1), "modified after it was sealed"},
		{"a unit past the model", sealed(t, &far), "unit x: layer 5 of a model of 1"},
	} {
		if _, _, err := Parse(c.data, "sweep.json"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// Whatever it is given, Parse returns a document or an error, never both
// or neither, and never panics.
func FuzzParse(f *testing.F) {
	res := &Result{Kind: Kind, Version: Version, NumLayers: 1, Layers: []Divergence{{}}, Units: []UnitResult{{Unit: Unit{Name: "a"}}}}
	data, _ := res.Marshal()
	f.Add(data)
	f.Add([]byte(`{"kind":"logitscope-recipe","version":1,"seal":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, rec, err := Parse(data, "fuzz")
		if (err == nil) == (r == nil && rec == nil) || r != nil && rec != nil {
			t.Fatalf("Parse: %v, %v, %v", r, rec, err)
		}
	})
}
