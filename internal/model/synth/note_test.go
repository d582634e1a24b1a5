package synth

import (
	"os"
	"path/filepath"
	"testing"

	"logitscope/internal/format/sidecar"
)

// A cached checkpoint always carries the current note: one cached before
// Write wrote sidecars, or with an older note, gets it on the next Cached
// without being regenerated.
func TestCachedNote(t *testing.T) {
	t.Setenv("LOGITSCOPE_CACHE", t.TempDir())
	want := Note(Presets["tiny"], 0)
	check := func(when string) {
		t.Helper()
		dir, err := Cached("tiny", 0)
		if err != nil {
			t.Fatal(err)
		}
		if got, err := sidecar.Read(dir); err != nil || got != want {
			t.Errorf("%s: note %+v, %v; want %+v", when, got, err, want)
		}
	}
	check("generated")
	dir, _ := Cached("tiny", 0)
	weights, _ := os.Stat(filepath.Join(dir, "model.safetensors"))
	os.Remove(filepath.Join(dir, sidecar.File))
	check("without a sidecar")
	sidecar.Write(dir, sidecar.Note{Nature: sidecar.Synthetic, Panel: "an older panel"})
	check("with an older note")
	if again, _ := os.Stat(filepath.Join(dir, "model.safetensors")); !again.ModTime().Equal(weights.ModTime()) {
		t.Error("the checkpoint was regenerated for its note")
	}
	if want.Nature != sidecar.Synthetic || want.Prompt == "" || want.Panel == "" {
		t.Errorf("note %+v: want a synthetic nature and ready texts", want)
	}
}
