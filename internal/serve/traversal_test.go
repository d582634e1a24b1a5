package serve

import (
	"net/http"
	"strings"
	"testing"
)

func TestTraversal(t *testing.T) {
	f := newFixture(t)
	f.withPage(t) // so that /r/, /api/runs/ and /static/ are live
	run := runDoc("traversal")
	id := wantID(run)
	if c := f.post(t, "/api/runs", run).Code; c != 201 {
		t.Fatalf("POST: %d", c)
	}
	// Sanity: each route itself works, so a 404 below means "refused".
	for _, ok := range []string{"/models/tiny/config.json", "/api/runs/" + id, "/r/" + id, "/shaders/rope.wgsl", "/static/engine.wasm"} {
		if c := f.do(t, ok, nil).Code; c != 200 {
			t.Fatalf("%s: %d", ok, c)
		}
	}
	targets := []string{
		"/models/tiny/../secret.json",
		"/models/tiny/../../secret.txt",
		"/models/tiny/variants/../../../secret.txt",
		"/models/tiny/%2e%2e/secret.json",
		"/models/tiny/%2e%2e/%2e%2e/secret.txt",
		"/models/tiny/..%2fsecret.json",
		"/models/tiny/..%2f..%2fsecret.txt",
		"/models/tiny/..%5c..%5csecret.txt",
		"/models/tiny/..\\..\\secret.txt",
		"/models/tiny/config.json%00",
		"/models/tiny/%00/../../secret.txt",
		"/models/tiny//etc/passwd",
		"/models/tiny/%2fetc%2fpasswd",
		"/models//secret.json",
		"/models/../secret.txt",
		"/models/%2e%2e/secret.json",
		"/models/tiny/./config.json",
		"/models/tiny/leak.json",                   // symlink to the secret
		"/models/tiny/leak.safetensors",            // same, as a blob
		"/models/tiny/variants/q4/shard-99999.bin", // same, as a shard
		"/models/tiny/.hidden.json",
		"/models/tiny/notes.md", // inside, but not a model file
		"/models/tiny/variants",
		"/models/tiny/variants/q4",
		"/models/tiny/C:/secret.json",
		"/models/nosuch/config.json",
		"/static/../models/secret.json",
		"/static/%2e%2e/secret.txt",
		"/r/../secret.txt",
		"/r/%2e%2e/secret.txt",
		"/r/..%2f..%2fsecret.txt",
		"/r/" + id + "/../../secret.txt",
		"/r/" + upperID, // these three exist in runs/
		"/r/" + shortID,
		"/r/" + linkID,
		"/r/index.html",
		"/api/runs/../x",
		"/api/runs/../../secret.txt",
		"/api/runs/%2e%2e/%2e%2e/secret.txt",
		"/api/runs/..%2f..%2fsecret.txt",
		"/api/runs/..%5c..%5csecret.txt",
		"/api/runs/" + upperID,
		"/api/runs/" + shortID,
		"/api/runs/" + linkID,
		"/api/runs/" + linkID + ".json",
		"/api/runs/" + id + "%00",
		"/shaders/../secret.txt",
		"/shaders/%2e%2e/shaders/rope.wgsl",
		"/shaders/..%2f..%2fsecret.txt",
		"/shaders/rope.wgsl%00",
		"/shaders/./rope.wgsl",
		"/shaders//rope.wgsl",
		"/shaders/RoPE.wgsl",
		"/shaders/matmul.wgsl", // served per format only
		"/shaders/shaders.go",
	}
	for _, target := range targets {
		t.Run(target, func(t *testing.T) {
			w := f.do(t, target, nil)
			if w.Code != http.StatusNotFound {
				t.Errorf("status %d, want 404", w.Code)
			}
			if body := w.Body.String(); strings.Contains(body, f.root) || strings.Contains(body, "symlink") {
				t.Errorf("404 body tells too much: %q", body)
			}
		})
	}
	if len(f.logged) < len(targets) {
		t.Errorf("%d refusals logged for %d refused requests", len(f.logged), len(targets))
	}
}

func TestCleanRel(t *testing.T) {
	for _, bad := range []string{"", "/a", "a//b", "a/./b", "a/../b", "..", ".x", "a/.x/b", "a\\b", "a\x00", "c:x"} {
		if _, err := cleanRel(bad); err == nil {
			t.Errorf("cleanRel(%q) accepted", bad)
		}
	}
	for _, good := range []string{"config.json", "variants/q4/shard-00001.bin", "a..b.json"} {
		if _, err := cleanRel(good); err != nil {
			t.Errorf("cleanRel(%q): %v", good, err)
		}
	}
}
