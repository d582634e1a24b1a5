package serve

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"logitscope/variant"
)

func TestModelList(t *testing.T) {
	f := newFixture(t)
	v, err := variant.Open(variant.DefaultDir(f.model, "q4"))
	if err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{"/models/", "/models"} {
		w := f.do(t, url, nil)
		if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s: status %d, Content-Type %q", url, w.Code, w.Header().Get("Content-Type"))
		}
		var got []Model
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("%d models, want 1 (secret.json is no model): %s", len(got), w.Body)
		}
		m := got[0]
		if m.Name != "tiny" || m.Architecture != "Qwen2ForCausalLM" || m.Vocab != 512 {
			t.Errorf("model %+v", m)
		}
		if len(m.Variants) != 1 || m.Variants[0].Scheme != "q4" || m.Variants[0].ManifestSHA256 != v.Manifest.Seal || m.Variants[0].Bytes <= 0 {
			t.Errorf("variants %+v, want q4 sealed %s", m.Variants, v.Manifest.Seal)
		}
	}
}

func TestHealthAndUnknownRoutes(t *testing.T) {
	f := newFixture(t)
	if w := f.do(t, "/healthz", nil); w.Code != 200 || w.Body.String() != "ok" {
		t.Errorf("/healthz: %d %q", w.Code, w.Body)
	}
	if c := f.do(t, "/", nil).Code; c != 404 {
		t.Errorf("/ without -static: %d", c)
	}
}

func TestStatic(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "index.html"), "<!doctype html>hi")
	write(t, filepath.Join(dir, "app.js"), "console.log(1)")
	srv, err := New(Options{Models: f.srv.list, Static: dir, Logf: f.logf})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	if w := f.do(t, "/", nil); w.Code != 200 || w.Body.String() != "<!doctype html>hi" {
		t.Errorf("/: %d %q", w.Code, w.Body)
	}
	if w := f.do(t, "/static/app.js", nil); w.Code != 200 || w.Header().Get("Cache-Control") != "no-cache" {
		t.Errorf("/static/app.js: %d %v", w.Code, w.Header())
	}
	if c := f.do(t, "/static/../models/secret.json", nil).Code; c != 404 {
		t.Errorf("static traversal: %d", c)
	}
}
