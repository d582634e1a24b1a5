package download_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/model/hub"
	"logitscope/internal/model/hub/download"
	"logitscope/internal/model/hub/hubtest"
	"logitscope/internal/model/synth"
)

// tinyRepo writes the tiny preset (seed) into a folder for the hub to
// serve.
func tinyRepo(t *testing.T, seed uint64) string {
	t.Helper()
	dir := t.TempDir()
	if err := synth.Write(synth.Presets["tiny"], dir, synth.Options{Seed: seed}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// client is a client of srv with its own cache, recording progress.
type client struct {
	*download.Client
	mu    sync.Mutex
	heard []download.Progress
}

func newClient(t *testing.T, srv *hubtest.Server, cache string) *client {
	c := &client{Client: &download.Client{Endpoint: srv.URL, Cache: cache}}
	c.Progress = func(p download.Progress) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.heard = append(c.heard, p)
	}
	return c
}

// states lists the files that reached state, in order.
func (c *client) states(state download.State) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var files []string
	for _, p := range c.heard {
		if p.State == state {
			files = append(files, p.File)
		}
	}
	c.heard = nil
	return files
}

func open(t *testing.T, c *client, id string) (string, error) {
	t.Helper()
	parsed, err := hub.Parse(id)
	if err != nil {
		t.Fatal(err)
	}
	return c.Open(context.Background(), parsed)
}

func sameFile(t *testing.T, a, b string) {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if string(x) != string(y) {
		t.Errorf("%s differs from %s", a, b)
	}
}

// TestDownload downloads a checkpoint into an empty cache in
// huggingface_hub's layout, opens it, reopens it from the cache with no
// download, then with the hub gone.
func TestDownload(t *testing.T) {
	srv := hubtest.New()
	defer srv.Close()
	src := tinyRepo(t, 0)
	commit, err := srv.Add("org/tiny", "main", src)
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	c := newClient(t, srv, cache)
	dir, err := open(t, c, "hf:org/tiny")
	if err != nil {
		t.Fatal(err)
	}
	repoDir := filepath.Join(cache, "models--org--tiny")
	if want := filepath.Join(repoDir, "snapshots", commit); dir != want {
		t.Fatalf("Open = %s, want %s", dir, want)
	}
	want := []string{"config.json", "tokenizer.json", "generation_config.json", "tokenizer_config.json", "model.safetensors"}
	if got := c.states(download.StateDone); !slices.Equal(got, want) {
		t.Errorf("files downloaded: %v, want %v", got, want)
	}
	for _, f := range want {
		sameFile(t, filepath.Join(dir, f), filepath.Join(src, f))
		target, err := os.Readlink(filepath.Join(dir, f))
		if err != nil || !strings.HasPrefix(target, "../../blobs/") {
			t.Errorf("%s: link %q, %v; want a relative link into blobs/", f, target, err)
		}
	}
	sum, _ := checkpoint.FileSHA256(filepath.Join(src, "model.safetensors"))
	if _, err := os.Stat(filepath.Join(repoDir, "blobs", sum)); err != nil {
		t.Errorf("the safetensors blob is not named by its sha256: %v", err)
	}
	if ref, err := os.ReadFile(filepath.Join(repoDir, "refs", "main")); err != nil || string(ref) != commit {
		t.Errorf("refs/main = %q, %v; want %s", ref, err, commit)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck.Close()
	// The cache layout is the one checkpoint.Resolve reads.
	if got, err := checkpoint.Resolve(repoDir); err != nil || got != dir {
		t.Errorf("checkpoint.Resolve(%s) = %s, %v", repoDir, got, err)
	}

	// Again: only the API is asked (main may have moved), nothing is
	// downloaded.
	srv.Reset()
	if _, err := open(t, c, "hf:org/tiny"); err != nil {
		t.Fatal(err)
	}
	if got := c.states(download.StateCached); len(got) != len(want) {
		t.Errorf("reopened: cached %v", got)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || !strings.HasPrefix(reqs[0], "GET /api/models/org/tiny/revision/main") {
		t.Errorf("reopening asked %v; want the API alone", reqs)
	}

	// By commit, or offline: no request at all.
	srv.Reset()
	if got, err := open(t, c, "hf:org/tiny@"+commit); err != nil || got != dir {
		t.Errorf("by commit: %s, %v", got, err)
	}
	c.Offline = true
	if got, err := open(t, c, "hf:org/tiny"); err != nil || got != dir {
		t.Errorf("offline: %s, %v", got, err)
	}
	if reqs := srv.Requests(); len(reqs) != 0 {
		t.Errorf("by commit and offline, the hub was asked %v", reqs)
	}
	if _, err := open(t, c, "hf:org/tiny@v2"); err == nil || !strings.Contains(err.Error(), "no download of revision v2") {
		t.Errorf("offline, a revision never downloaded: %v", err)
	}
	c.Offline = false

	// The hub gone: the cached snapshot opens, saying so.
	srv.Close()
	if got, err := open(t, c, "hf:org/tiny"); err != nil || got != dir {
		t.Errorf("with the hub gone: %s, %v", got, err)
	}
	if notes := c.states(download.StateNote); len(notes) != 1 {
		t.Errorf("with the hub gone: %d notes, want one", len(notes))
	}
	if _, err := open(t, c, "hf:org/other"); err == nil || !strings.Contains(err.Error(), "GET "+srv.URL+"/api/models/org/other/revision/main") || !strings.Contains(err.Error(), "the cache has no download") {
		t.Errorf("with the hub gone, a model never downloaded: %v", err)
	}
}

// TestResume cuts the connection mid-file: the part stays as
// blobs/SHA256.incomplete and the next download asks for the rest alone.
func TestResume(t *testing.T) {
	srv := hubtest.New()
	defer srv.Close()
	src := tinyRepo(t, 0)
	if _, err := srv.Add("org/tiny", "main", src); err != nil {
		t.Fatal(err)
	}
	const cut = 100_000
	srv.Cut("model.safetensors", cut)
	cache := t.TempDir()
	c := newClient(t, srv, cache)
	_, err := open(t, c, "hf:org/tiny")
	if err == nil || !strings.Contains(err.Error(), "hf:org/tiny/model.safetensors: GET "+srv.URL+"/cdn/") || !strings.Contains(err.Error(), "run again to resume") {
		t.Fatalf("a download cut short: %v", err)
	}
	sum, _ := checkpoint.FileSHA256(filepath.Join(src, "model.safetensors"))
	part := filepath.Join(cache, "models--org--tiny", "blobs", sum+".incomplete")
	st, err := os.Stat(part)
	if err != nil || st.Size() != cut {
		t.Fatalf("the part: %v, %v; want %d bytes", st, err, cut)
	}
	srv.Reset()
	dir, err := open(t, c, "hf:org/tiny")
	if err != nil {
		t.Fatal(err)
	}
	sameFile(t, filepath.Join(dir, "model.safetensors"), filepath.Join(src, "model.safetensors"))
	if !slices.ContainsFunc(srv.Requests(), func(r string) bool {
		return strings.HasPrefix(r, "GET /cdn/"+sum) && strings.HasSuffix(r, " bytes=100000-")
	}) {
		t.Errorf("the resumed download asked %v; want a Range from byte %d", srv.Requests(), cut)
	}
	if _, err := os.Stat(part); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the part is still there: %v", err)
	}
}

// TestCorrupt refuses a file whose bytes are not those the hub's ETag
// names, naming the file, and keeps nothing of it.
func TestCorrupt(t *testing.T) {
	for _, c := range []struct{ file, hash string }{
		{"model.safetensors", "sha256"},
		{"config.json", "git blob sha1"},
	} {
		t.Run(c.file, func(t *testing.T) {
			srv := hubtest.New()
			defer srv.Close()
			if _, err := srv.Add("org/tiny", "main", tinyRepo(t, 0)); err != nil {
				t.Fatal(err)
			}
			srv.Corrupt(c.file)
			cache := t.TempDir()
			_, err := open(t, newClient(t, srv, cache), "hf:org/tiny")
			if err == nil || !strings.Contains(err.Error(), "hf:org/tiny/"+c.file+": "+c.hash+" of the download is") || !strings.Contains(err.Error(), "removed the download") {
				t.Fatalf("a corrupt %s: %v", c.file, err)
			}
			blobs, _ := os.ReadDir(filepath.Join(cache, "models--org--tiny", "blobs"))
			for _, b := range blobs {
				if strings.HasSuffix(b.Name(), ".incomplete") {
					t.Errorf("left %s", b.Name())
				}
			}
		})
	}
}

// TestRevision downloads two revisions side by side: a tag and a commit
// each open their own snapshot.
func TestRevision(t *testing.T) {
	srv := hubtest.New()
	defer srv.Close()
	main, err := srv.Add("org/tiny", "main", tinyRepo(t, 0))
	if err != nil {
		t.Fatal(err)
	}
	v2src := tinyRepo(t, 7)
	v2, err := srv.Add("org/tiny", "v2", v2src)
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	c := newClient(t, srv, cache)
	for _, id := range []string{"hf:org/tiny", "hf:org/tiny@v2", "hf:org/tiny@" + main} {
		if _, err := open(t, c, id); err != nil {
			t.Fatal(err)
		}
	}
	snaps, _ := os.ReadDir(filepath.Join(cache, "models--org--tiny", "snapshots"))
	if len(snaps) != 2 {
		t.Errorf("%d snapshots, want 2", len(snaps))
	}
	dir, err := open(t, c, "hf:org/tiny@v2")
	if err != nil || filepath.Base(dir) != v2 {
		t.Fatalf("@v2: %s, %v; want snapshot %s", dir, err, v2)
	}
	sameFile(t, filepath.Join(dir, "model.safetensors"), filepath.Join(v2src, "model.safetensors"))
	// The files both revisions share are one blob.
	blobs, _ := os.ReadDir(filepath.Join(cache, "models--org--tiny", "blobs"))
	if len(blobs) != 6 { // 4 shared JSON files, two safetensors
		t.Errorf("%d blobs, want 6", len(blobs))
	}
	if _, err := open(t, c, "hf:org/tiny@v3"); err == nil || !strings.Contains(err.Error(), "HTTP 404 RevisionNotFound") || !strings.Contains(err.Error(), `no branch, tag or commit "v3"`) {
		t.Errorf("@v3: %v", err)
	}
}

// TestGated sends HF_TOKEN's token, and says to set it when a repo wants
// one.
func TestGated(t *testing.T) {
	srv := hubtest.New()
	defer srv.Close()
	if _, err := srv.Add("org/tiny", "main", tinyRepo(t, 0)); err != nil {
		t.Fatal(err)
	}
	srv.RequireToken("hf_secret")
	c := newClient(t, srv, t.TempDir())
	_, err := open(t, c, "hf:org/tiny")
	if err == nil || !strings.Contains(err.Error(), "hf:org/tiny: GET "+srv.URL+"/api/models/org/tiny/revision/main: HTTP 401 GatedRepo") || !strings.Contains(err.Error(), "set HF_TOKEN") {
		t.Errorf("without a token: %v", err)
	}
	c.Token = "hf_other"
	if _, err := open(t, c, "hf:org/tiny"); err == nil || !strings.Contains(err.Error(), "HTTP 403") || !strings.Contains(err.Error(), "token sent from HF_TOKEN has no access") {
		t.Errorf("with another token: %v", err)
	}
	c.Token = "hf_secret"
	srv.SplitCDN()
	srv.Reset()
	if _, err := open(t, c, "hf:org/tiny"); err != nil {
		t.Errorf("with the token: %v", err)
	}
	// The hub got the token; the CDN, another host, did not.
	var cdn int
	for _, r := range srv.Requests() {
		switch cdnReq := strings.Contains(r, " /cdn/"); {
		case cdnReq && strings.HasSuffix(r, " +auth"):
			t.Errorf("the CDN got the token: %s", r)
		case cdnReq:
			cdn++
		case !strings.HasSuffix(r, " +auth"):
			t.Errorf("the hub did not get the token: %s", r)
		}
	}
	if cdn != 1 {
		t.Errorf("%d CDN requests, want 1 (model.safetensors): %v", cdn, srv.Requests())
	}
	var se *download.StatusError
	if _, err := open(t, c, "hf:org/none"); !errors.As(err, &se) || se.Code != "RepoNotFound" {
		t.Errorf("a repo that does not exist: %v", err)
	}
}

// TestShardedAndGGUF downloads a sharded checkpoint's index and the
// shards it names, a repo's only GGUF file, and a GGUF file named by the
// id, and refuses a repo of several GGUF files listing them.
func TestShardedAndGGUF(t *testing.T) {
	srv := hubtest.New()
	defer srv.Close()
	write := func(files map[string]string) string {
		dir := t.TempDir()
		for n, s := range files {
			if err := os.WriteFile(filepath.Join(dir, n), []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	sharded := write(map[string]string{"config.json": "{}", "tokenizer.json": `{"model": {}}`, "README.md": "x",
		"model.safetensors.index.json":     `{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}`,
		"model-00001-of-00002.safetensors": "one", "model-00002-of-00002.safetensors": "two", "model-Q8_0.gguf": "gguf"})
	for repo, dir := range map[string]string{
		"org/sharded": sharded,
		"org/one":     write(map[string]string{"README.md": "x", "m-Q4_0.gguf": "q4"}),
		"org/two":     write(map[string]string{"m-Q4_0.gguf": "q4", "m-Q8_0.gguf": "q8"}),
	} {
		if _, err := srv.Add(repo, "main", dir); err != nil {
			t.Fatal(err)
		}
	}
	c := newClient(t, srv, t.TempDir())
	dir, err := open(t, c, "hf:org/sharded")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"config.json", "tokenizer.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}
	if got := c.states(download.StateDone); !slices.Equal(got, want) {
		t.Errorf("sharded: downloaded %v, want %v", got, want)
	}
	c.Offline = true
	if got, err := open(t, c, "hf:org/sharded"); err != nil || got != dir {
		t.Errorf("sharded, offline: %s, %v", got, err)
	}
	os.Remove(filepath.Join(dir, "model-00002-of-00002.safetensors"))
	if _, err := open(t, c, "hf:org/sharded"); err == nil || !strings.Contains(err.Error(), "incomplete: no model-00002-of-00002.safetensors") {
		t.Errorf("sharded, offline, a shard missing: %v", err)
	}
	c.Offline = false
	for id, file := range map[string]string{"hf:org/one": "m-Q4_0.gguf", "hf:org/two/m-Q8_0.gguf": "m-Q8_0.gguf", "hf:org/sharded/model-Q8_0.gguf": "model-Q8_0.gguf"} {
		got, err := open(t, c, id)
		if err != nil || filepath.Base(got) != file {
			t.Errorf("%s: %s, %v; want the path of %s", id, got, err, file)
		}
	}
	if _, err := open(t, c, "hf:org/two"); err == nil || !strings.Contains(err.Error(), "name one: hf:org/two/FILE.gguf (its GGUF files: m-Q4_0.gguf, m-Q8_0.gguf)") {
		t.Errorf("two GGUF files: %v", err)
	}
}
