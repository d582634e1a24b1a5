package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestPageDir(t *testing.T) {
	tests := []struct {
		name    string
		built   bool   // .out/web/index.html exists
		static  string // -static
		want    string
		note    string
		wantErr bool
	}{
		{"built", true, "", builtPage, "page from", false},
		{"not built", false, "", "", "make web", false},
		{"explicit", false, "page", "page", "page from page", false},
		{"explicit wins", true, "page", "page", "page from page", false},
		{"explicit without index.html", true, "empty", "", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			mkfile(t, filepath.Join("page", "index.html"), "<p>page</p>")
			if err := os.Mkdir("empty", 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.built {
				mkfile(t, filepath.Join(builtPage, "index.html"), "<p>built</p>")
			}
			dir, note, err := pageDir(tc.static)
			if (err != nil) != tc.wantErr || dir != tc.want || !strings.Contains(note, tc.note) {
				t.Errorf("pageDir(%q) = %q, %q, %v; want %q, a note with %q", tc.static, dir, note, err, tc.want, tc.note)
			}
		})
	}
}

func TestDefaultData(t *testing.T) {
	tests := []struct{ xdg, cache, want string }{
		{"/xdg", "", "/xdg/logitscope/runs-data"},
		{"/xdg", "/lc", "/lc/runs-data"}, // beside the demo model, as demo.Dir puts it
	}
	for _, tc := range tests {
		t.Setenv("XDG_CACHE_HOME", tc.xdg)
		t.Setenv("LOGITSCOPE_CACHE", tc.cache)
		if got := defaultData(); got != filepath.FromSlash(tc.want) {
			t.Errorf("XDG_CACHE_HOME=%s LOGITSCOPE_CACHE=%s: %q, want %q", tc.xdg, tc.cache, got, tc.want)
		}
	}
}

// TestRun starts the command on a synthetic model with the default -data
// and -static, reads the URL it prints first, and uses it.
func TestRun(t *testing.T) {
	for _, built := range []bool{true, false} {
		t.Run(map[bool]string{true: "page built", false: "page not built"}[built], func(t *testing.T) {
			models := tinyModels(t)
			root := filepath.Dir(models)
			if built {
				mkfile(t, filepath.Join(builtPage, "index.html"), "<p>built</p>")
			}
			url, out, stop := start(t, "-addr", "127.0.0.1:0", "-models", models)
			defer stop()
			if opens := strings.HasPrefix(out, "logitscope serve: open "); opens != built {
				t.Errorf("says open: %v, with the page built: %v:\n%s", opens, built, out)
			}
			wantHome := map[bool]int{true: 200, false: 404}[built]
			if code, body := get(t, url); code != wantHome {
				t.Errorf("GET /: %d %q", code, body)
			}
			if !built && !strings.Contains(out, "make web") {
				t.Errorf("no hint to build the page:\n%s", out)
			}
			id := postRun(t, url)
			runs := filepath.Join(root, "cache", "logitscope", "runs-data", "runs")
			if _, err := os.Stat(filepath.Join(runs, id+".json")); err != nil || !strings.Contains(out, runs) {
				t.Errorf("run not kept where printed (%v):\n%s", err, out)
			}
		})
	}
}

var bannerRE = regexp.MustCompile(`^logitscope serve: (open|serving models at) (http://(?:127\.0\.0\.1|localhost):[0-9]+/) \(models: tiny\)$`)

// start runs the command and waits for its three lines; the first must be
// the URL. stop cancels it and checks that it shut down cleanly.
func start(t *testing.T, args ...string) (url, out string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var buf syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, &buf) }()
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(buf.String(), "\n") < 3 && time.Now().Before(deadline) {
		select {
		case err := <-done:
			cancel()
			t.Fatalf("run: %v\n%s", err, buf.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	out = buf.String()
	first, _, _ := strings.Cut(out, "\n")
	m := bannerRE.FindStringSubmatch(first)
	if m == nil {
		cancel()
		t.Fatalf("first line %q is not the URL:\n%s", first, out)
	}
	return m[2], out, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run after cancel: %v", err)
		}
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func postRun(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Post(url+"api/runs", "application/json", strings.NewReader(`{"kind":"logitscope.snapshot","version":1,"report":{"rows":0,"positions":[]},"tokens":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil || resp.StatusCode != 201 {
		t.Fatalf("POST /api/runs: %d %v", resp.StatusCode, err)
	}
	return rep.ID
}

func mkfile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// syncBuffer is a bytes.Buffer the server goroutine writes while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// make run ADDR=:9000 listens on every interface; the URL printed is one
// a browser on this machine opens.
func TestBrowseAddr(t *testing.T) {
	for in, want := range map[string]string{
		"[::]:9000":      "localhost:9000",
		"0.0.0.0:9000":   "localhost:9000",
		":9000":          "localhost:9000",
		"127.0.0.1:8080": "127.0.0.1:8080",
		"[::1]:8080":     "[::1]:8080",
		"10.1.2.3:80":    "10.1.2.3:80",
	} {
		if got := browseAddr(in); got != want {
			t.Errorf("browseAddr(%q) = %q, want %q", in, got, want)
		}
	}
}
