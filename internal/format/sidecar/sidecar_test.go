package sidecar

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadWrite(t *testing.T) {
	dir := t.TempDir()
	n, err := Read(dir)
	if err != nil || n != (Note{Nature: User}) {
		t.Fatalf("no sidecar: %+v, %v; want the user's model", n, err)
	}
	want := Note{Nature: TrainedDemo, About: "a 2-layer model trained on the corpus", Prompt: "Say hi.", Panel: "Some text.\nMore."}
	if err := Write(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := Read(dir)
	if err != nil || got != want {
		t.Fatalf("read back %+v, %v; want %+v", got, err, want)
	}
	a, _ := os.ReadFile(filepath.Join(dir, File))
	if err := Write(dir, want); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, File)); string(a) != string(b) {
		t.Error("the same note gave other bytes")
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("Write left %d entries, want the sidecar alone", len(ents))
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, data, err string // err "": parses
	}{
		{"synthetic", `{"nature":"synthetic","about":"random weights"}`, ""},
		{"unknown field ignored", `{"nature":"user","hub_id":"org/name"}`, ""},
		{"no nature", `{"about":"x"}`, `nature "": want one of synthetic, trained-demo, user`},
		{"other nature", `{"nature":"real"}`, `nature "real"`},
		{"two lines", `{"nature":"user","about":"a\nb"}`, "one line"},
		{"not json", `nature: user`, "m/logitscope.json: invalid character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.data), "m/logitscope.json")
			switch {
			case tc.err == "" && err != nil:
				t.Fatal(err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
		})
	}
}

func TestReadRefusesBadSidecar(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, File), []byte(`{"nature":"maybe"}`), 0o644)
	if _, err := Read(dir); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, File)) {
		t.Fatalf("error %v, want one naming the file", err)
	}
}
