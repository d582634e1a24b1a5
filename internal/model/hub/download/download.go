// Package download opens a model by its hub id (package hub) as
// huggingface_hub's hf_hub_download does: it asks the hub's API which commit
// the revision names and which files the repo holds, reads each chosen
// file's ETag and size from a HEAD of its resolve URL (X-Linked-Etag and
// X-Linked-Size for an LFS file, whose GET redirects to a CDN), and
// downloads it into the standard cache (CacheDir): models--ORG--NAME/
// blobs/<etag>, snapshots/<commit>/FILE a relative link to its blob,
// refs/<REV> holding the commit. A blob is written as <etag>.incomplete,
// which the next download resumes with a Range request, and is checked
// (hub.Check) before it takes its name. A snapshot already complete in the
// cache opens with no network when the revision is a commit, with
// HF_HUB_OFFLINE=1, or when the hub cannot be reached.
//
// Two processes downloading the same blob at once are not kept apart (no
// lock file, unlike huggingface_hub): the check refuses what they mix up.
package download

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"logitscope/internal/model/hub"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Client downloads models from a hub into a cache.
type Client struct {
	Endpoint string // the hub: hub.DefaultEndpoint or $HF_ENDPOINT
	Token    string // sent as Authorization: Bearer, when set
	Cache    string // the hub cache (CacheDir)
	// Offline opens from the cache only ($HF_HUB_OFFLINE=1).
	Offline bool
	HTTP    *http.Client
	// Progress, when set, hears of every file: when it starts, as its
	// bytes arrive (at most every Every), and when it is done.
	Progress func(Progress)
	Every    time.Duration
}

// Progress is a file's state.
type Progress struct {
	ID    hub.ID
	File  string
	Done  int64 // bytes on disk, a resumed part included
	Total int64
	State State
	Note  string // what a StateNote says
}

// State is what a Progress reports.
type State int

const (
	StateStart  State = iota // the file's download starts (Done: bytes resumed)
	StateBytes               // bytes arrived
	StateDone                // the file is in the cache, checked
	StateCached              // the file was in the cache already
	StateNote                // something the user should know (Note)
)

// FromEnv is a client set as huggingface_hub's environment says:
// HF_ENDPOINT, HF_TOKEN (or the login's token file), the cache (CacheDir)
// and HF_HUB_OFFLINE.
func FromEnv() (*Client, error) {
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	c := &Client{Endpoint: hub.DefaultEndpoint, Token: token(), Cache: cache, Every: 500 * time.Millisecond}
	if e := os.Getenv("HF_ENDPOINT"); e != "" {
		c.Endpoint = strings.TrimRight(e, "/")
	}
	switch strings.ToLower(os.Getenv("HF_HUB_OFFLINE")) {
	case "1", "true", "yes", "on":
		c.Offline = true
	}
	return c, nil
}

// StatusError is an HTTP answer other than the one wanted.
type StatusError struct {
	ID     hub.ID
	File   string // "" for the API's
	Method string
	URL    string
	Status int
	Code   string // the hub's X-Error-Code (RepoNotFound, GatedRepo, …)
	Msg    string // its X-Error-Message or the body's start
	Token  bool   // a token was sent
}

func (e *StatusError) Error() string {
	what := e.ID.String()
	if e.File != "" {
		what = "hf:" + e.ID.Repo + "/" + e.File
		if e.ID.Revision != hub.DefaultRevision {
			what += "@" + e.ID.Revision
		}
	}
	s := fmt.Sprintf("%s: %s %s: HTTP %d", what, e.Method, e.URL, e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	switch {
	case (e.Status == 401 || e.Status == 403) && !e.Token:
		s += " (a gated or private repo: accept its terms on the hub, then set HF_TOKEN to a token of yours)"
	case e.Status == 401 || e.Status == 403:
		s += " (the token sent from HF_TOKEN has no access to this repo: accept its terms on the hub, or use another token)"
	case e.Code == "RevisionNotFound":
		s += fmt.Sprintf(" (no branch, tag or commit %q)", e.ID.Revision)
	}
	return s
}

// Open downloads what id's model needs into the cache, unless it is there,
// and returns the path the model opens from: the snapshot folder, or the
// GGUF file for a GGUF id.
func (c *Client) Open(ctx context.Context, id hub.ID) (string, error) {
	if c.Offline {
		return cached(c.Cache, id)
	}
	// A commit's files never change: a complete snapshot needs no network.
	if hub.IsCommit(id.Revision) {
		if p, err := cached(c.Cache, id); err == nil {
			return p, nil
		}
	}
	info, err := c.repoInfo(ctx, id)
	if err != nil {
		var se *StatusError
		if errors.As(err, &se) || ctx.Err() != nil {
			return "", err
		}
		// The hub cannot be reached: a complete snapshot will do, as
		// huggingface_hub falls back on its cache.
		p, cerr := cached(c.Cache, id)
		if cerr != nil {
			return "", fmt.Errorf("%v; and %v", err, cerr)
		}
		c.report(Progress{ID: id, State: StateNote, Note: fmt.Sprintf("%s cannot be reached (%v): opening the cached snapshot", c.Endpoint, err)})
		return p, nil
	}
	files, err := hub.Pick(id.Repo, info.Names(), id.File)
	if err != nil {
		return "", err
	}
	snap := filepath.Join(RepoFolder(c.Cache, id.Repo), "snapshots", info.SHA)
	// Each file once: the list grows by the index's shards, which come
	// from the network.
	seen := map[string]bool{}
	for i := 0; i < len(files); i++ {
		if seen[files[i]] {
			continue
		}
		seen[files[i]] = true
		if err := c.fetch(ctx, id, info.SHA, files[i]); err != nil {
			return "", err
		}
		if files[i] == hub.IndexFile {
			shards, err := indexShards(snap, id)
			if err != nil {
				return "", err
			}
			files = append(files, shards...)
		}
	}
	if id.Revision != info.SHA {
		ref := filepath.Join(RepoFolder(c.Cache, id.Repo), "refs", filepath.FromSlash(id.Revision))
		if err := writeRef(ref, info.SHA); err != nil {
			return "", err
		}
	}
	if id.File != "" || len(files) == 1 {
		return filepath.Join(snap, filepath.FromSlash(files[0])), nil
	}
	return snap, nil
}

// repoInfo asks the API for the commit the revision names and the repo's
// files.
func (c *Client) repoInfo(ctx context.Context, id hub.ID) (hub.RepoInfo, error) {
	u := hub.APIURL(c.Endpoint, id, false)
	resp, err := c.do(ctx, http.MethodGet, u, nil, c.httpClient())
	if err != nil {
		return hub.RepoInfo{}, fmt.Errorf("%s: GET %s: %v", id, u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return hub.RepoInfo{}, c.statusError(id, "", http.MethodGet, u, resp)
	}
	var info hub.RepoInfo
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&info); err != nil {
		return hub.RepoInfo{}, fmt.Errorf("%s: GET %s: %v", id, u, err)
	}
	if !hub.IsCommit(info.SHA) {
		return hub.RepoInfo{}, fmt.Errorf("%s: GET %s: sha %q is not a commit id", id, u, info.SHA)
	}
	return info, nil
}

// fileMeta is what the resolve URL's HEAD says of a file.
type fileMeta struct {
	etag string
	size int64
	url  string // where its bytes are: the CDN's URL for an LFS file
}

// fetch puts file of commit in the cache (blobs/ETAG, and its link in
// snapshots/COMMIT/), resuming a partial blob.
func (c *Client) fetch(ctx context.Context, id hub.ID, commit, file string) error {
	repoDir := RepoFolder(c.Cache, id.Repo)
	pointer := filepath.Join(repoDir, "snapshots", commit, filepath.FromSlash(file))
	if st, err := os.Stat(pointer); err == nil && st.Mode().IsRegular() {
		c.report(Progress{ID: id, File: file, Done: st.Size(), Total: st.Size(), State: StateCached})
		return nil
	}
	meta, err := c.head(ctx, id, commit, file)
	if err != nil {
		return err
	}
	blob := filepath.Join(repoDir, "blobs", meta.etag)
	if st, err := os.Stat(blob); err == nil && st.Size() == meta.size {
		c.report(Progress{ID: id, File: file, Done: meta.size, Total: meta.size, State: StateCached})
		return link(blob, pointer)
	}
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return err
	}
	if err := c.download(ctx, id, file, meta, blob); err != nil {
		return err
	}
	c.report(Progress{ID: id, File: file, Done: meta.size, Total: meta.size, State: StateDone})
	return link(blob, pointer)
}

// head reads a file's ETag and size from its resolve URL without following
// the redirect of an LFS file to the CDN (whose own headers describe the
// CDN's object), as huggingface_hub's get_hf_file_metadata does; a
// relative redirect (a renamed repo) is followed.
func (c *Client) head(ctx context.Context, id hub.ID, commit, file string) (fileMeta, error) {
	u := hub.ResolveURL(c.Endpoint, id.Repo, commit, file)
	noFollow := *c.httpClient()
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for hops := 0; ; hops++ {
		resp, err := c.do(ctx, http.MethodHead, u, map[string]string{"Accept-Encoding": "identity"}, &noFollow)
		if err != nil {
			return fileMeta{}, fmt.Errorf("hf:%s/%s: HEAD %s: %v", id.Repo, file, u, err)
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode >= 300 && resp.StatusCode < 400 && resp.Header.Get("X-Linked-Etag") == "" && hops < 5 {
			if next, err := url.Parse(loc); err == nil && !next.IsAbs() {
				u = resp.Request.URL.ResolveReference(next).String()
				continue
			}
		}
		if resp.StatusCode >= 400 {
			return fileMeta{}, c.statusError(id, file, http.MethodHead, u, resp)
		}
		m := fileMeta{url: u}
		m.etag = hub.NormalizeETag(resp.Header.Get("X-Linked-Etag"))
		if m.etag == "" {
			m.etag = hub.NormalizeETag(resp.Header.Get("ETag"))
		}
		sz := resp.Header.Get("X-Linked-Size")
		if sz == "" {
			sz = resp.Header.Get("Content-Length")
		}
		m.size, err = strconv.ParseInt(sz, 10, 64)
		switch {
		case m.etag == "" || strings.ContainsAny(m.etag, `/\`) || m.etag == "." || m.etag == "..":
			return fileMeta{}, fmt.Errorf("hf:%s/%s: HEAD %s: no usable ETag (%q): is %s a hub?", id.Repo, file, u, m.etag, c.Endpoint)
		case err != nil || m.size < 0:
			return fileMeta{}, fmt.Errorf("hf:%s/%s: HEAD %s: no size (X-Linked-Size or Content-Length %q)", id.Repo, file, u, sz)
		}
		if loc != "" && resp.StatusCode >= 300 {
			next, err := url.Parse(loc)
			if err != nil {
				return fileMeta{}, fmt.Errorf("hf:%s/%s: HEAD %s: Location %q: %v", id.Repo, file, u, loc, err)
			}
			m.url = resp.Request.URL.ResolveReference(next).String()
		}
		return m, nil
	}
}

// download writes meta's bytes into blob, by way of blob.incomplete, which
// a download cut short leaves for the next one to resume with a Range
// request. The whole file is checked (Check) before it becomes the blob; a
// part that fails the check is removed, so the next download starts afresh.
func (c *Client) download(ctx context.Context, id hub.ID, file string, meta fileMeta, blob string) error {
	what := "hf:" + id.Repo + "/" + file
	part := blob + ".incomplete"
	f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	if have > meta.size {
		have = 0
	}
	c.report(Progress{ID: id, File: file, Done: have, Total: meta.size, State: StateStart})
	if have < meta.size {
		hdr := map[string]string{"Accept-Encoding": "identity"}
		if have > 0 {
			hdr["Range"] = fmt.Sprintf("bytes=%d-", have)
		}
		resp, err := c.do(ctx, http.MethodGet, meta.url, hdr, c.httpClient())
		if err != nil {
			return fmt.Errorf("%s: GET %s: %v (run again to resume)", what, meta.url, err)
		}
		defer resp.Body.Close()
		switch {
		case resp.StatusCode == http.StatusPartialContent && have > 0 && strings.HasPrefix(resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-", have)):
		case resp.StatusCode == http.StatusOK:
			have = 0 // the server sends the whole file
		default:
			return c.statusError(id, file, http.MethodGet, meta.url, resp)
		}
		if err := f.Truncate(have); err != nil {
			return err
		}
		if _, err := f.Seek(have, io.SeekStart); err != nil {
			return err
		}
		w := &progressWriter{c: c, p: Progress{ID: id, File: file, Done: have, Total: meta.size, State: StateBytes}, last: time.Now()}
		// Never more than the HEAD announced: one byte past it is enough
		// to refuse the file, and a server that keeps sending fills no disk.
		n, err := io.Copy(io.MultiWriter(f, w), io.LimitReader(resp.Body, meta.size-have+1))
		if err != nil {
			return fmt.Errorf("%s: GET %s: %v after %d of %d bytes (run again to resume)", what, meta.url, err, w.p.Done, meta.size)
		}
		if have+n > meta.size {
			f.Close()
			os.Remove(part)
			return fmt.Errorf("%s: GET %s: more than the %d bytes its HEAD announced: refused, and the download removed", what, meta.url, meta.size)
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	chk := hub.NewCheck(what, meta.etag, meta.size)
	if _, err := io.Copy(chk, f); err != nil {
		return err
	}
	if err := chk.Verify(); err != nil {
		f.Close()
		os.Remove(part)
		return fmt.Errorf("%v (%s): removed the download; run again to fetch it afresh", err, meta.url)
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(part, blob)
}

// progressWriter counts bytes and reports them at most every c.Every.
type progressWriter struct {
	c    *Client
	p    Progress
	last time.Time
}

func (w *progressWriter) Write(b []byte) (int, error) {
	w.p.Done += int64(len(b))
	if now := time.Now(); now.Sub(w.last) >= w.c.Every {
		w.last = now
		w.c.report(w.p)
	}
	return len(b), nil
}

func (c *Client) report(p Progress) {
	if c.Progress != nil {
		c.Progress(p)
	}
}

func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// do sends a request, with the token only when it goes to the hub's own
// origin (scheme, host and port): the CDN an LFS file redirects to gets
// none (its URL is signed). Go's client keeps Authorization across a
// redirect to the same host on another port or scheme, and to a
// subdomain: a redirect that leaves the origin has it taken off.
func (c *Client) do(ctx context.Context, method, u string, hdr map[string]string, hc *http.Client) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "logitscope")
	if c.Token != "" && c.hubOrigin(req.URL) {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if c.Token != "" {
		guarded := *hc
		next := hc.CheckRedirect
		guarded.CheckRedirect = func(r *http.Request, via []*http.Request) error {
			if !c.hubOrigin(r.URL) {
				r.Header.Del("Authorization")
			}
			if next != nil {
				return next(r, via)
			}
			if len(via) >= 10 {
				return errors.New("stopped after 10 redirects")
			}
			return nil
		}
		hc = &guarded
	}
	return hc.Do(req)
}

// hubOrigin says whether u is on the endpoint's origin: the same scheme,
// host and port.
func (c *Client) hubOrigin(u *url.URL) bool {
	hub, err := url.Parse(c.Endpoint)
	return err == nil && strings.EqualFold(u.Scheme, hub.Scheme) && strings.EqualFold(u.Host, hub.Host)
}

func (c *Client) statusError(id hub.ID, file, method, u string, resp *http.Response) error {
	msg := resp.Header.Get("X-Error-Message")
	if msg == "" && method != http.MethodHead {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		msg = strings.TrimSpace(string(b))
		var j struct{ Error string }
		if json.Unmarshal(b, &j) == nil && j.Error != "" {
			msg = j.Error
		}
	}
	return &StatusError{ID: id, File: file, Method: method, URL: u, Status: resp.StatusCode,
		Code: resp.Header.Get("X-Error-Code"), Msg: msg, Token: c.Token != ""}
}

// link makes pointer a relative link to blob, as huggingface_hub does (a
// cache moved whole still resolves).
func link(blob, pointer string) error {
	if err := os.MkdirAll(filepath.Dir(pointer), 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(pointer), blob)
	if err != nil {
		return err
	}
	os.Remove(pointer) // a link to a blob that was removed
	return os.Symlink(rel, pointer)
}

// writeRef records the commit a revision named, as refs/REV.
func writeRef(path, commit string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) == commit {
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(commit), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
