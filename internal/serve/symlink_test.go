package serve

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSymlinkedModelDir: a model directory that is a link out of -models
// is neither listed nor served, like any link leaving a served directory.
func TestSymlinkedModelDir(t *testing.T) {
	f := newFixture(t)
	outside := filepath.Join(f.root, "outside")
	if err := os.CopyFS(outside, os.DirFS(f.model)); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(outside, "notes.json"), `{"s":"`+secret+`"}`)
	if err := os.Symlink(outside, filepath.Join(f.root, "models", "evil")); err != nil {
		t.Fatal(err)
	}
	var warned []string
	models, err := ScanModels(filepath.Join(f.root, "models"), func(format string, args ...any) {
		warned = append(warned, fmt.Sprintf(format, args...))
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range models {
		if m.Name == "evil" {
			t.Errorf("the link to %s is listed as a model", outside)
		}
	}
	if len(models) != 1 || models[0].Name != "tiny" {
		t.Errorf("models %v, want tiny alone", models)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "evil") {
		t.Errorf("warnings %q, want one naming evil", warned)
	}
	f.srv, err = New(Options{Models: models, Logf: f.logf})
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"/models/evil/config.json", "/models/evil/notes.json"} {
		if c := f.do(t, target, nil).Code; c != 404 {
			t.Errorf("%s: %d", target, c)
		}
	}
}
