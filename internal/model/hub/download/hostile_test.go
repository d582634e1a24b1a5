package download_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"logitscope/internal/model/hub"
	"logitscope/internal/model/hub/download"
)

const commit = "0123456789abcdef0123456789abcdef01234567"

// repoAPI answers the API's repo info: one GGUF file, m.gguf.
func repoAPI(w http.ResponseWriter) {
	fmt.Fprintf(w, `{"id": "o/m", "sha": %q, "siblings": [{"rfilename": "m.gguf"}]}`, commit)
}

// The token goes to the hub's own origin only: a redirect to the same
// host on another port (or scheme) takes it off, where Go's client keeps
// it.
func TestTokenStaysOnTheHubsOrigin(t *testing.T) {
	var mu sync.Mutex
	var leaked []string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if a := r.Header.Get("Authorization"); a != "" {
			leaked = append(leaked, r.Method+" "+r.URL.Path+": "+a)
		}
		mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/api/") {
			repoAPI(w)
			return
		}
		http.NotFound(w, r)
	}))
	defer other.Close()
	hubSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer secret" {
			t.Errorf("%s %s reached the hub without the token", r.Method, r.URL.Path)
		}
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusFound) // 127.0.0.1, another port
	}))
	defer hubSrv.Close()
	c := &download.Client{Endpoint: hubSrv.URL, Cache: t.TempDir(), Token: "secret"}
	id, err := hub.Parse("hf:o/m")
	if err != nil {
		t.Fatal(err)
	}
	c.Open(context.Background(), id) // fails on the missing file; what matters is who saw the token
	if len(leaked) > 0 {
		t.Fatalf("the token went to another origin: %v", leaked)
	}
}

// A download is capped at the size its HEAD announced: a server that
// sends more is refused at one byte past it, and nothing is kept.
func TestDownloadCappedAtAnnouncedSize(t *testing.T) {
	const announced = 1000
	var sent int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/"):
			repoAPI(w)
		case r.Method == http.MethodHead:
			w.Header().Set("ETag", `"abc"`)
			w.Header().Set("X-Linked-Size", fmt.Sprint(announced))
		default:
			chunk := make([]byte, 1<<16)
			for range 512 { // 32 MiB, far past the announced size
				n, err := w.Write(chunk)
				sent += int64(n)
				if err != nil {
					return
				}
			}
		}
	}))
	defer srv.Close()
	cache := t.TempDir()
	c := &download.Client{Endpoint: srv.URL, Cache: cache}
	id, err := hub.Parse("hf:o/m")
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Open(context.Background(), id)
	if err == nil || !strings.Contains(err.Error(), "more than the 1000 bytes its HEAD announced") {
		t.Fatalf("got %v", err)
	}
	var kept int64
	filepath.Walk(cache, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			kept += info.Size()
		}
		return nil
	})
	if kept > 0 {
		t.Errorf("%d bytes left in the cache", kept)
	}
}

// FuzzHubAnswers downloads from a hub that answers anything: repo info,
// ETag, size and bytes. Whatever it says, the cache writes nothing outside
// itself, links only inside itself, keeps no blob larger than what was
// sent, and Open ends.
func FuzzHubAnswers(f *testing.F) {
	sibs := func(names ...string) string {
		var b strings.Builder
		for i, n := range names {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"rfilename": %q}`, n)
		}
		return fmt.Sprintf(`{"sha": %q, "siblings": [%s]}`, commit, b.String())
	}
	f.Add(sibs("m.gguf"), `"abc"`, "5", []byte("hello"))
	f.Add(sibs("config.json", "tokenizer.json", hub.IndexFile), "W/\"e\"", "60", []byte(`{"weight_map": {"a": "model.safetensors.index.json"}}`))
	f.Add(sibs("../../x/PWNED.gguf"), `"abc"`, "3", []byte("abc"))
	f.Add(sibs("m.gguf"), `"../blob"`, "-1", []byte{})
	f.Add(`{"sha": "../../..", "siblings": [{"rfilename": "m.gguf"}]}`, `"abc"`, "1", []byte("x"))
	var mu sync.Mutex
	var answer struct {
		info, etag, size string
		body             []byte
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		a := answer
		mu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/"):
			fmt.Fprint(w, a.info)
		case r.Method == http.MethodHead:
			w.Header().Set("ETag", a.etag)
			w.Header().Set("X-Linked-Size", a.size)
		default:
			w.Write(a.body)
		}
	}))
	defer srv.Close()
	id, err := hub.Parse("hf:o/m")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, info, etag, size string, body []byte) {
		mu.Lock()
		answer.info, answer.etag, answer.size, answer.body = info, etag, size, body
		mu.Unlock()
		root := t.TempDir()
		cache := filepath.Join(root, "cache")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p, err := (&download.Client{Endpoint: srv.URL, Cache: cache}).Open(ctx, id)
		if ctx.Err() != nil {
			t.Fatalf("Open did not end: %v", err)
		}
		inside := func(p string) bool {
			rel, err := filepath.Rel(cache, p)
			return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
		}
		if err == nil && !inside(p) {
			t.Fatalf("Open returned %s, outside the cache", p)
		}
		filepath.Walk(root, func(path string, st os.FileInfo, err error) error {
			switch {
			case err != nil || path == root:
			case !inside(path):
				t.Errorf("%s written outside the cache", path)
			case st.Mode()&os.ModeSymlink != 0:
				to, err := filepath.EvalSymlinks(path)
				if err == nil && !inside(to) {
					t.Errorf("%s links to %s, outside the cache", path, to)
				}
			case st.Mode().IsRegular() && st.Size() > int64(max(len(body), len(commit))):
				t.Errorf("%s holds %d bytes; the hub sent %d", path, st.Size(), len(body))
			}
			return nil
		})
	})
}
