// Package hubtest serves model folders in the Hugging Face Hub's URL
// layout, for tests of package hub, the CLI's hf: ids and the page's hub
// field:
//
//	GET  /api/models/ORG/NAME/revision/REV[?blobs=true]   {"id", "sha", "siblings": [{"rfilename", …}]}
//	HEAD /ORG/NAME/resolve/REV/FILE                        X-Repo-Commit, ETag, and for LFS files
//	GET  /ORG/NAME/resolve/REV/FILE                        X-Linked-Etag, X-Linked-Size and a 302 to /cdn/
//	GET  /cdn/SHA256                                       an LFS file's bytes
//
// as huggingface.co answers them: LFS files (*.safetensors, *.gguf, *.bin,
// as the hub's default .gitattributes says) redirect to the CDN, whose
// ETag is the file's sha256; other files are served in place with their
// git blob sha1 as ETag; both take Range requests; errors carry the hub's
// X-Error-Code; every answer carries the CORS headers the hub sends, so a
// page on another origin can read it. Knobs make it misbehave: a token to
// require (a gated repo), a file cut short once, a file served corrupt.
package hubtest

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server is a hub on httptest.
type Server struct {
	*httptest.Server

	mu    sync.Mutex
	repos map[string]*repo
	blobs map[string][]byte // LFS files by sha256, as the CDN holds them
	token string
	cut   map[string]int64 // file name → bytes to send before cutting the connection, once
	bad   map[string]bool  // file name → served with a byte changed
	pad   map[string]int   // file name → bytes sent past its end by GET, more than the API says
	log   []string
	// cdnHost, when set, is the host LFS redirects name instead of the
	// hub's own (SplitCDN).
	cdnHost string
}

type repo struct {
	refs    map[string]string          // branch or tag → commit
	commits map[string]map[string]file // commit → path → file
}

type file struct {
	data    []byte
	lfs     bool
	sha256  string
	gitSHA1 string // the git blob of the file, or of its LFS pointer
}

// New starts a hub with no repos. Close it when done.
func New() *Server {
	s := &Server{repos: map[string]*repo{}, blobs: map[string][]byte{}, cut: map[string]int64{}, bad: map[string]bool{}, pad: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// Add publishes dir's files (every regular file under it, hidden ones
// left out) as a commit of repo ("ORG/NAME") and points rev (a branch or
// tag) at it. It returns the commit id, which depends on the files alone.
func (s *Server) Add(repoID, rev, dir string) (string, error) {
	files := map[string]file{}
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && p != dir {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		names = append(names, rel)
		files[rel] = newFile(rel, data)
		return nil
	})
	if err != nil {
		return "", err
	}
	slices.Sort(names)
	h := sha1.New()
	for _, n := range names {
		fmt.Fprintf(h, "%s %s\n", n, files[n].gitSHA1)
	}
	commit := hex.EncodeToString(h.Sum(nil))
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	if r == nil {
		r = &repo{refs: map[string]string{}, commits: map[string]map[string]file{}}
		s.repos[repoID] = r
	}
	r.commits[commit] = files
	r.refs[rev] = commit
	for _, f := range files {
		if f.lfs {
			s.blobs[f.sha256] = f.data
		}
	}
	return commit, nil
}

func newFile(name string, data []byte) file {
	sum := sha256.Sum256(data)
	f := file{data: data, sha256: hex.EncodeToString(sum[:])}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".safetensors", ".gguf", ".bin":
		f.lfs = true
		pointer := fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", f.sha256, len(data))
		f.gitSHA1 = gitBlob([]byte(pointer))
	default:
		f.gitSHA1 = gitBlob(data)
	}
	return f
}

func gitBlob(data []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil))
}

// RequireToken makes every answer 401 (no token) or 403 (another token)
// unless the request says Authorization: Bearer token, as a gated repo.
func (s *Server) RequireToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.token = token
}

// Cut makes the next download of name (a path in a repo) stop after n
// bytes, the connection closed mid-file.
func (s *Server) Cut(name string, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cut[name] = n
}

// Corrupt makes downloads of name send other bytes than its ETag and size
// say (one byte changed), as a broken proxy would.
func (s *Server) Corrupt(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bad[name] = true
}

// Pad makes GETs of name send n bytes past its end, more than the API's
// size of it, as a server that never stops would; 0 ends it.
func (s *Server) Pad(name string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pad[name] = n
}

// SplitCDN makes LFS redirects name the CDN as localhost (the hub being
// 127.0.0.1), another host, as huggingface.co's cdn-lfs.hf.co is: a
// client must not send it the hub's token. The CDN's URLs need no token
// (the hub's are signed).
func (s *Server) SplitCDN() {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, port, _ := strings.Cut(s.Listener.Addr().String(), ":")
	s.cdnHost = "localhost:" + port
}

// Requests lists the requests served so far, "METHOD PATH", then
// " RANGE" for a Range request and " +auth" when it carried an
// Authorization header; Reset clears it.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.log)
}

// Reset forgets the requests served.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = nil
}

// exposed are the headers huggingface.co lets a page on another origin
// read.
const exposed = "X-Repo-Commit, X-Request-Id, X-Error-Code, X-Error-Message, X-Total-Count, ETag, Link, Accept-Ranges, Content-Range, X-Linked-Size, X-Linked-ETag, Content-Length"

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Expose-Headers", exposed)
	if r.Method == http.MethodOptions {
		h.Set("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
		h.Set("Access-Control-Allow-Headers", "Authorization, Range, Content-Type, Accept-Encoding")
		h.Set("Access-Control-Max-Age", "86400")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	entry := r.Method + " " + r.URL.EscapedPath()
	if rg := r.Header.Get("Range"); rg != "" {
		entry += " " + rg
	}
	if r.Header.Get("Authorization") != "" {
		entry += " +auth"
	}
	s.mu.Lock()
	s.log = append(s.log, entry)
	token := s.token
	s.mu.Unlock()
	if token != "" && !strings.HasPrefix(r.URL.Path, "/cdn/") {
		switch r.Header.Get("Authorization") {
		case "Bearer " + token:
		case "":
			hubError(w, http.StatusUnauthorized, "GatedRepo", "Access to this model is restricted: you must be authenticated.")
			return
		default:
			hubError(w, http.StatusForbidden, "GatedRepo", "Access to this model is restricted and you are not in the authorized list.")
			return
		}
	}
	path := r.URL.EscapedPath()
	switch {
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	case strings.HasPrefix(path, "/api/models/"):
		s.api(w, r, strings.TrimPrefix(path, "/api/models/"))
	case strings.HasPrefix(path, "/cdn/"):
		s.cdn(w, r, strings.TrimPrefix(path, "/cdn/"))
	default:
		s.resolve(w, r, strings.TrimPrefix(path, "/"))
	}
}

func hubError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("X-Error-Code", code)
	w.Header().Set("X-Error-Message", msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// lookup finds repo ORG/NAME and the commit rev names (a ref or a commit).
func (s *Server) lookup(w http.ResponseWriter, repoID, rev string) (map[string]file, string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[repoID]
	if r == nil {
		// The hub answers 401 for a repo that does not exist (or is
		// private) to a request without a token.
		hubError(w, http.StatusUnauthorized, "RepoNotFound", "Repository not found")
		return nil, "", false
	}
	commit := rev
	if c, ok := r.refs[rev]; ok {
		commit = c
	}
	files, ok := r.commits[commit]
	if !ok {
		hubError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return nil, "", false
	}
	return files, commit, true
}

// api answers ORG/NAME/revision/REV (REV escaped whole) and ORG/NAME (main).
func (s *Server) api(w http.ResponseWriter, r *http.Request, rest string) {
	parts := strings.SplitN(rest, "/", 4)
	rev := "main"
	switch {
	case len(parts) == 4 && parts[2] == "revision":
		rev = parts[3]
	case len(parts) != 2:
		hubError(w, http.StatusNotFound, "", "Not Found")
		return
	}
	rev, err := url.PathUnescape(rev)
	if err != nil {
		hubError(w, http.StatusBadRequest, "", "bad revision")
		return
	}
	repoID := parts[0] + "/" + parts[1]
	files, commit, ok := s.lookup(w, repoID, rev)
	if !ok {
		return
	}
	blobs := r.URL.Query().Get("blobs") == "true"
	type lfs struct {
		SHA256      string `json:"sha256"`
		Size        int    `json:"size"`
		PointerSize int    `json:"pointerSize"`
	}
	type sibling struct {
		Name   string `json:"rfilename"`
		Size   int    `json:"size,omitempty"`
		BlobID string `json:"blobId,omitempty"`
		LFS    *lfs   `json:"lfs,omitempty"`
	}
	var sib []sibling
	for _, name := range slices.Sorted(maps.Keys(files)) {
		f := files[name]
		sb := sibling{Name: name}
		if blobs {
			sb.Size, sb.BlobID = len(f.data), f.gitSHA1
			if f.lfs {
				sb.LFS = &lfs{SHA256: f.sha256, Size: len(f.data), PointerSize: 134}
			}
		}
		sib = append(sib, sb)
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": repoID, "modelId": repoID, "sha": commit, "private": false, "siblings": sib})
}

// resolve answers ORG/NAME/resolve/REV/FILE.
func (s *Server) resolve(w http.ResponseWriter, r *http.Request, rest string) {
	parts := strings.SplitN(rest, "/", 5)
	if len(parts) != 5 || parts[2] != "resolve" {
		hubError(w, http.StatusNotFound, "", "Not Found")
		return
	}
	rev, err1 := url.PathUnescape(parts[3])
	name, err2 := url.PathUnescape(parts[4])
	if err1 != nil || err2 != nil {
		hubError(w, http.StatusBadRequest, "", "bad path")
		return
	}
	files, commit, ok := s.lookup(w, parts[0]+"/"+parts[1], rev)
	if !ok {
		return
	}
	f, ok := files[name]
	if !ok {
		hubError(w, http.StatusNotFound, "EntryNotFound", name+" does not exist on \""+rev+"\"")
		return
	}
	h := w.Header()
	h.Set("X-Repo-Commit", commit)
	h.Set("Accept-Ranges", "bytes")
	if f.lfs {
		// The ETag of the redirect is the pointer's git blob; the file's
		// own is X-Linked-Etag, which clients must prefer.
		h.Set("ETag", `"`+f.gitSHA1+`"`)
		h.Set("X-Linked-Etag", `"`+f.sha256+`"`)
		h.Set("X-Linked-Size", strconv.Itoa(len(f.data)))
		host := r.Host
		s.mu.Lock()
		if s.cdnHost != "" {
			host = s.cdnHost
		}
		s.mu.Unlock()
		cdn := "http://" + host + "/cdn/" + f.sha256 + "?name=" + url.QueryEscape(name)
		h.Set("Location", cdn)
		w.WriteHeader(http.StatusFound)
		return
	}
	h.Set("ETag", `"`+f.gitSHA1+`"`)
	s.send(w, r, name, f.data)
}

// cdn answers an LFS file's bytes by sha256.
func (s *Server) cdn(w http.ResponseWriter, r *http.Request, sha string) {
	s.mu.Lock()
	data, ok := s.blobs[sha]
	s.mu.Unlock()
	if !ok {
		http.Error(w, "no such object", http.StatusNotFound)
		return
	}
	w.Header().Set("ETag", `"`+sha+`"`)
	s.send(w, r, r.URL.Query().Get("name"), data)
}

// send serves data with Range support, cut or corrupted as asked.
func (s *Server) send(w http.ResponseWriter, r *http.Request, name string, data []byte) {
	s.mu.Lock()
	cut, isCut := s.cut[name]
	if isCut && r.Method == http.MethodGet {
		delete(s.cut, name)
	}
	bad, pad := s.bad[name], s.pad[name]
	s.mu.Unlock()
	if pad > 0 && r.Method == http.MethodGet {
		data = append(bytes.Clone(data), make([]byte, pad)...)
		r.Header.Del("If-None-Match") // no 304 for the bytes a browser cached
		r.Header.Del("If-Range")
		w.Header().Set("Cache-Control", "no-store")
	}
	if bad {
		data = bytes.Clone(data)
		data[len(data)/2] ^= 0xff
		// Other bytes than a browser may have cached under the ETag:
		// a revalidation must not answer 304.
		r.Header.Del("If-None-Match")
		r.Header.Del("If-Range")
		w.Header().Set("Cache-Control", "no-store")
	}
	var out http.ResponseWriter = w
	if isCut && r.Method == http.MethodGet {
		out = &cutWriter{ResponseWriter: w, left: cut}
	}
	http.ServeContent(out, r, "", time.Time{}, bytes.NewReader(data))
}

// cutWriter writes left bytes of the body, then aborts the connection, as a
// network failure mid-file would.
type cutWriter struct {
	http.ResponseWriter
	left int64
}

func (c *cutWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		c.ResponseWriter.Write(p[:c.left])
		c.ResponseWriter.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
	c.left -= int64(len(p))
	return c.ResponseWriter.Write(p)
}
