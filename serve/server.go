package serve

import (
	"encoding/json"
	"errors"
	"log"
	"net/http"
	"path/filepath"
	"strings"
)

// Options configure a Server.
type Options struct {
	Models []*Model
	// Static, if not empty, is the page's directory: "/" serves its
	// index.html and "/static/..." its files.
	Static string
	// Logf receives 404 reasons and other diagnostics; nil means log.Printf.
	Logf func(format string, args ...any)
}

// Server routes requests by hand rather than through http.ServeMux: the
// mux cleans paths and redirects, which would turn a traversal attempt
// into a 301 to some other path instead of the plain 404 we want.
type Server struct {
	models map[string]*Model
	list   []*Model
	static string // symlinks resolved
	etags  *etagCache
	logf   func(format string, args ...any)
}

// New returns a Server for opt.
func New(opt Options) (*Server, error) {
	s := &Server{models: map[string]*Model{}, list: opt.Models, etags: newETagCache(), logf: opt.Logf}
	if s.logf == nil {
		s.logf = log.Printf
	}
	if s.list == nil {
		s.list = []*Model{}
	}
	for _, m := range opt.Models {
		if s.models[m.Name] != nil {
			return nil, errors.New("serve: two models named " + m.Name)
		}
		s.models[m.Name] = m
	}
	if opt.Static != "" {
		dir, err := filepath.EvalSymlinks(opt.Static)
		if err == nil {
			dir, err = filepath.Abs(dir)
		}
		if err != nil {
			return nil, err
		}
		s.static = dir
	}
	return s, nil
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	p := r.URL.Path
	switch {
	case p == "/healthz":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write([]byte("ok"))
	case p == "/models/" || p == "/models":
		s.serveList(w, r)
	case strings.HasPrefix(p, "/models/"):
		s.serveModelFile(w, r, strings.TrimPrefix(p, "/models/"))
	case p == "/" && s.static != "":
		s.serveFile(w, r, s.static, "index.html", staticKind("index.html"))
	case strings.HasPrefix(p, "/static/") && s.static != "":
		rel := strings.TrimPrefix(p, "/static/")
		s.serveFile(w, r, s.static, rel, staticKind(rel))
	default:
		s.notFound(w, r, errors.New("no route"))
	}
}

func (s *Server) serveList(w http.ResponseWriter, r *http.Request) {
	data, err := json.MarshalIndent(s.list, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(append(data, '\n'))
}

func (s *Server) serveModelFile(w http.ResponseWriter, r *http.Request, rest string) {
	name, rel, _ := strings.Cut(rest, "/")
	m := s.models[name]
	if m == nil {
		s.notFound(w, r, errors.New("no model "+name))
		return
	}
	k, ok := modelFileKind(rel)
	if !ok {
		s.notFound(w, r, errors.New("not a model file"))
		return
	}
	s.serveFile(w, r, m.dir, rel, k)
}

// modelFileKind allows only the files a page needs from a checkpoint
// directory, so that whatever else lies there (notes, caches, keys)
// stays private even though it is inside the model directory.
func modelFileKind(rel string) (kind, bool) {
	segs := strings.Split(rel, "/")
	ext := strings.ToLower(filepath.Ext(rel))
	switch {
	case len(segs) == 1 && ext == ".json":
		return jsonDoc, true
	case len(segs) == 1 && ext == ".safetensors":
		return immutableBlob, true
	case len(segs) == 1 && ext == ".txt": // merges.txt of older tokenizers
		return kind{contentType: "text/plain; charset=utf-8", compress: true}, true
	case len(segs) == 3 && segs[0] == "variants" && segs[2] == "manifest.json":
		return jsonDoc, true
	case len(segs) == 3 && segs[0] == "variants" && ext == ".bin":
		return immutableBlob, true
	}
	return kind{}, false
}
