package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/model/synth"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
)

// secret is written next to the models directory; no response may ever
// contain it.
const secret = "TOP-SECRET-do-not-serve"

type fixture struct {
	root   string // holds models/ and secret.txt
	model  string // models/tiny
	shard  string // the q4 variant's first shard
	static string // web/, once withPage has run
	runs   string // data/runs, once withPage has run
	srv    *Server
	mu     sync.Mutex
	logged []string
}

// Names of traps that withPage plants in the runs directory: files that
// exist under names a run id must not take, holding the secret.
var (
	upperID = strings.Repeat("AB", idLen/2) // a real file, but not lowercase
	shortID = strings.Repeat("a", idLen-1)  // a real file, one digit short
	linkID  = strings.Repeat("0", idLen)    // a symlink to secret.txt
	wasmBin = "\x00asm\x01\x00\x00\x00" + strings.Repeat("(module)", 512)
)

const indexHTML = "<!doctype html><title>logitscope</title>"

// withPage restarts f's server with a page directory and a data directory,
// so that /, /r/ and /api/runs are live, and plants traps in runs/.
func (f *fixture) withPage(t testing.TB) {
	t.Helper()
	f.static = filepath.Join(f.root, "web")
	if err := os.Mkdir(f.static, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(f.static, "index.html"), indexHTML)
	write(t, filepath.Join(f.static, "engine.wasm"), wasmBin)
	srv, err := New(Options{Models: f.srv.list, Static: f.static, Data: filepath.Join(f.root, "data"), Logf: f.logf})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	f.runs = filepath.Join(f.root, "data", "runs")
	for _, name := range []string{upperID, shortID} {
		write(t, filepath.Join(f.runs, name+".json"), `{"s":"`+secret+`"}`)
	}
	if err := os.Symlink(filepath.Join(f.root, "secret.txt"), filepath.Join(f.runs, linkID+".json")); err != nil {
		t.Fatal(err)
	}
}

// newFixture builds the tiny preset and its q4 variant in t.TempDir, as the
// demo does, plus the traps the traversal tests aim at.
func newFixture(t testing.TB) *fixture {
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
	return f.request(t, http.MethodGet, target, nil, header)
}

// post sends body to target.
func (f *fixture) post(t *testing.T, target string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	return f.request(t, http.MethodPost, target, body, map[string]string{"Content-Type": "application/json"})
}

func (f *fixture) request(t *testing.T, method, target string, body []byte, header map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, target, bytes.NewReader(body))
	for k, v := range header {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	f.srv.ServeHTTP(w, r)
	if strings.Contains(w.Body.String(), secret) {
		t.Fatalf("%s %s leaked the secret", method, target)
	}
	return w
}

func write(t testing.TB, path, data string) {
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

// reload loads f's model afresh, as serve starts, and serves it alone:
// the model and the warnings LoadModel gave.
func (f *fixture) reload(t *testing.T) (*Model, []string) {
	t.Helper()
	var warned []string
	m, err := LoadModel("tiny", f.model, func(format string, args ...any) { warned = append(warned, fmt.Sprintf(format, args...)) })
	if err != nil {
		t.Fatal(err)
	}
	if f.srv, err = New(Options{Models: []*Model{m}, Logf: f.logf}); err != nil {
		t.Fatal(err)
	}
	return m, warned
}

// listed is the one model f's /models/ lists, its variants as kind:name
// and its files by path.
func (f *fixture) listed(t *testing.T) (Model, []string, map[string]ModelFile) {
	t.Helper()
	var got []Model
	if err := json.Unmarshal(f.do(t, "/models/", nil).Body.Bytes(), &got); err != nil || len(got) != 1 {
		t.Fatalf("list: %v, %d models", err, len(got))
	}
	var names []string
	for _, v := range got[0].Variants {
		names = append(names, v.Kind+":"+v.Name)
	}
	files := map[string]ModelFile{}
	for _, fi := range got[0].Files {
		files[fi.Path] = fi
	}
	return got[0], names, files
}
