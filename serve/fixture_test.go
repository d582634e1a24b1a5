package serve

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"logitscope/checkpoint"
	"logitscope/quant"
	"logitscope/synth"
	"logitscope/variant"
)

// secret is written next to the models directory; no response may ever
// contain it.
const secret = "TOP-SECRET-do-not-serve"

type fixture struct {
	root   string // holds models/ and secret.txt
	model  string // models/tiny
	shard  string // the q4 variant's first shard
	srv    *Server
	mu     sync.Mutex
	logged []string
}

// newFixture builds the tiny preset and its q4 variant in t.TempDir, as the
// demo does, plus the traps the traversal tests aim at.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{root: t.TempDir()}
	f.model = filepath.Join(f.root, "models", "tiny")
	if err := synth.Write(synth.Presets["tiny"], f.model, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(f.model)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if err := variant.Write(ck, quant.Q4, variant.DefaultDir(f.model, "q4"), variant.Options{}); err != nil {
		t.Fatal(err)
	}
	f.shard = filepath.Join(variant.DefaultDir(f.model, "q4"), "shard-00001.bin")
	write(t, filepath.Join(f.root, "secret.txt"), secret)
	write(t, filepath.Join(f.root, "models", "secret.json"), `{"s":"`+secret+`"}`)
	write(t, filepath.Join(f.model, ".hidden.json"), `{"s":"`+secret+`"}`)
	write(t, filepath.Join(f.model, "notes.md"), secret)
	for _, link := range []string{"leak.json", "variants/q4/shard-99999.bin", "leak.safetensors"} {
		if err := os.Symlink(filepath.Join(f.root, "secret.txt"), filepath.Join(f.model, link)); err != nil {
			t.Fatal(err)
		}
	}
	models, err := ScanModels(filepath.Join(f.root, "models"), t.Errorf)
	if err != nil {
		t.Fatal(err)
	}
	f.srv, err = New(Options{Models: models, Logf: f.logf})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logged = append(f.logged, format)
}

// do sends a raw request target straight to the handler, as the server
// would receive it, so that no client normalises the path first.
func (f *fixture) do(t *testing.T, target string, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, target, nil)
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	f.srv.ServeHTTP(w, r)
	if strings.Contains(w.Body.String(), secret) {
		t.Fatalf("GET %s leaked the secret", target)
	}
	return w
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
