package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"logitscope/internal/model/synth"
)

// tinyModels writes the tiny synthetic checkpoint under root/models and
// keeps the server's caches in root.
func tinyModels(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	t.Chdir(root)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(root, "cache"))
	t.Setenv("LOGITSCOPE_CACHE", "")
	if err := synth.Write(synth.Presets["tiny"], filepath.Join(root, "models", "tiny"), synth.Options{}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, "models")
}

// freePort is a port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

const emptyRun = `{"kind":"logitscope.snapshot","version":1,"report":{"rows":0,"positions":[]},"tokens":[]}`

func post(t *testing.T, base, auth string, body io.Reader) (*http.Response, map[string]string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"api/runs", body)
	req.Header.Set("Content-Type", "application/json")
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep map[string]string
	json.NewDecoder(resp.Body).Decode(&rep)
	return resp, rep
}

// A team's server: the public URL in the banner and the links, the write
// token from a file or the environment (anonymous writes refused, reads
// served), and -read-only.
func TestTeamServer(t *testing.T) {
	tests := []struct {
		name      string
		flags     func(dir string) []string
		env       string
		auth      string
		want      int
		note      string
		anonymous int // an anonymous POST's status
	}{
		{"token file", func(dir string) []string { return []string{"-write-token", filepath.Join(dir, "token")} }, "", "Bearer file-token", 201, "sharing needs the write token", 401},
		{"token from the environment", func(string) []string { return nil }, "env-token", "Bearer env-token", 201, "sharing needs the write token", 401},
		{"file wins over the environment", func(dir string) []string { return []string{"-write-token", filepath.Join(dir, "token")} }, "env-token", "Bearer env-token", 403, "sharing needs the write token", 401},
		{"read-only", func(string) []string { return []string{"-read-only"} }, "", "", 403, "read-only", 403},
		{"open", func(string) []string { return nil }, "", "", 201, "anyone who reaches this server may share", 201},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			models := tinyModels(t)
			mkfile(t, "token", "file-token\n")
			t.Setenv("LOGITSCOPE_WRITE_TOKEN", tc.env)
			port := freePort(t)
			public := "http://localhost:" + port // another name for the listener, as a proxy's would be
			args := append([]string{"-addr", "127.0.0.1:" + port, "-models", models, "-public-url", public, "-access-log=false"}, tc.flags(".")...)
			url, out, stop := start(t, args...)
			defer stop()
			if url != public+"/" || !strings.Contains(out, tc.note) {
				t.Errorf("banner URL %q, want %s/; a note %q:\n%s", url, public, tc.note, out)
			}
			resp, rep := post(t, url, tc.auth, strings.NewReader(emptyRun))
			if resp.StatusCode != tc.want {
				t.Fatalf("POST with %q: %d, want %d", tc.auth, resp.StatusCode, tc.want)
			}
			if tc.want == 201 && !strings.HasPrefix(rep["link"], public+"/r/") {
				t.Errorf("link %q does not name the public URL %s", rep["link"], public)
			}
			if resp, _ := post(t, url, "", strings.NewReader(emptyRun+" ")); resp.StatusCode != tc.anonymous {
				t.Errorf("anonymous POST: %d, want %d", resp.StatusCode, tc.anonymous)
			}
			if code, body := get(t, url+"models/"); code != 200 || !strings.Contains(body, "tiny") {
				t.Errorf("GET /models/: %d %q", code, body)
			}
			if code, body := get(t, url+"healthz"); code != 200 || body != "ok" {
				t.Errorf("GET /healthz: %d %q", code, body)
			}
		})
	}
}

// Shutdown (SIGTERM or Ctrl-C end run's context) stops accepting at once
// and lets a request in flight finish: an upload half sent when the
// signal comes is stored and answered.
func TestGracefulShutdown(t *testing.T) {
	models := tinyModels(t)
	url, _, stop := start(t, "-addr", "127.0.0.1:0", "-models", models, "-access-log=false")
	pr, pw := io.Pipe()
	type result struct {
		code int
		rep  map[string]string
	}
	got := make(chan result, 1)
	go func() {
		resp, rep := post(t, url, "", pr)
		got <- result{resp.StatusCode, rep}
	}()
	half := len(emptyRun) / 2
	if _, err := pw.Write([]byte(emptyRun[:half])); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the handler is reading the body
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	// New connections are refused once shutdown has begun.
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/"), time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("still accepting connections 5 s after shutdown began")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case <-stopped:
		t.Fatal("shut down before the request in flight finished")
	default:
	}
	if _, err := pw.Write([]byte(emptyRun[half:])); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	r := <-got
	if r.code != http.StatusCreated || !strings.HasPrefix(r.rep["url"], "/r/") {
		t.Errorf("the upload in flight: %d %v, want 201 and its link", r.code, r.rep)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after the request in flight finished")
	}
	if _, err := os.Stat(filepath.Join("cache", "logitscope", "runs-data", "runs", strings.TrimPrefix(r.rep["url"], "/r/")+".json")); err != nil {
		t.Errorf("the run is not stored: %v", err)
	}
}
