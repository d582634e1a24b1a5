package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"logitscope/internal/format/gguf"
	"logitscope/internal/format/sidecar"
	"logitscope/internal/model/hubquant"
)

// Options configure a Server.
type Options struct {
	Models []*Model
	// Static, if not empty, is the page's directory: "/" and "/r/<id>"
	// serve its index.html and "/static/..." its files.
	Static string
	// Data, if not empty, is where shared runs are kept (Data/runs/<id>.json,
	// created if missing); "" disables POST /api/runs.
	Data string
	// Logf receives 404 reasons and other diagnostics; nil means log.Printf.
	Logf func(format string, args ...any)
	// Limits bound time, uploads and the run store; zero fields take
	// their defaults.
	Limits Limits
	// HubOrigins are the origins the page may download models from (its
	// hub field; the Content-Security-Policy's connect-src): nil means
	// DefaultHubOrigins. HubOrigin words an endpoint as one.
	HubOrigins []string
	// PublicURL is the address teammates reach the server by
	// (http(s)://host[:port], checked by PublicURL): the links POST
	// /api/runs replies name it. "" names the request's own host (or a
	// trusted proxy's X-Forwarded-Host).
	PublicURL string
	// WriteToken, if not empty, is the token POST /api/runs requires
	// (TokenHeader: "Bearer TOKEN"); reads stay open to all.
	WriteToken string
	// ReadOnly refuses every write: the runs already stored are served.
	ReadOnly bool
	// TrustedProxies are the reverse proxies (ParseProxies) whose
	// X-Forwarded-For, -Proto and -Host are believed; from anyone else
	// those headers are ignored, since any client can send them.
	TrustedProxies []netip.Prefix
	// AccessLog, if set, receives a line per request (accessLine).
	AccessLog func(line string)
	// ORT, if not empty, is onnxruntime-web's dist directory, served
	// under /ort/: the page runs a model's ONNX exports (KindONNX) with
	// it. Without it the page says that an onnx side needs it.
	ORT string
}

// Server routes requests by hand rather than through http.ServeMux: the
// mux cleans paths and redirects, which would turn a traversal attempt
// into a 301 to some other path instead of the plain 404 we want.
type Server struct {
	models  map[string]*Model
	list    []*Model
	static  string // symlinks resolved
	runs    string // Data/runs, symlinks resolved; "" when sharing is off
	runMu   sync.Mutex
	stored  runStore // what runs/ holds, under runMu
	lim     Limits
	uploads chan struct{} // a slot per upload in flight
	kernels *shaderSet
	etags   *etagCache
	logf    func(format string, args ...any)
	csp     string // the Content-Security-Policy of every response
	public  string // Options.PublicURL, checked
	token   string
	// readOnly refuses writes; proxies are the trusted reverse proxies.
	readOnly bool
	proxies  []netip.Prefix
	access   func(line string)
	ort      string // Options.ORT, symlinks resolved; "" serves no /ort/
}

// New returns a Server for opt.
func New(opt Options) (*Server, error) {
	s := &Server{models: map[string]*Model{}, list: opt.Models, etags: fileHashes, kernels: engineShaders(), logf: opt.Logf,
		lim: opt.Limits.withDefaults()}
	s.uploads = make(chan struct{}, s.lim.Uploads)
	s.token, s.readOnly, s.proxies, s.access = opt.WriteToken, opt.ReadOnly, opt.TrustedProxies, opt.AccessLog
	if opt.PublicURL != "" {
		var err error
		if s.public, err = PublicURL(opt.PublicURL); err != nil {
			return nil, fmt.Errorf("serve: %v", err)
		}
	}
	hubs := opt.HubOrigins
	if hubs == nil {
		hubs = DefaultHubOrigins
	}
	for _, h := range hubs {
		if o, err := HubOrigin(strings.Replace(h, "://*.", "://wildcard.", 1)); err != nil || o != strings.Replace(h, "://*.", "://wildcard.", 1) {
			return nil, fmt.Errorf("serve: hub origin %q: want http(s)://host[:port], the host may start with *.", h)
		}
	}
	s.csp = contentSecurityPolicy(hubs)
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
	var err error
	if opt.Static != "" {
		if s.static, err = realDir(opt.Static); err != nil {
			return nil, err
		}
	}
	if opt.ORT != "" {
		if s.ort, err = realDir(opt.ORT); err != nil {
			return nil, fmt.Errorf("serve: onnxruntime-web: %v", err)
		}
	}
	if opt.Data != "" {
		if s.runs, err = runsDir(opt.Data); err != nil {
			return nil, err
		}
		if s.stored, err = measureRuns(s.runs); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// realDir resolves dir's symlinks once, so that openUnder's prefix check
// compares like with like.
func realDir(dir string) (string, error) {
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	return filepath.Abs(real)
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.access != nil {
		lw := &loggedWriter{ResponseWriter: w}
		start := time.Now()
		defer func() {
			s.access(accessLine(s.clientAddr(r), r.Method, r.URL.Path, lw.status, lw.bytes, time.Since(start)))
		}()
		w = lw
	}
	setSecurityHeaders(w.Header(), s.csp)
	p := r.URL.Path
	if allow := allowedMethods(p); !slices.Contains(strings.Split(allow, ", "), r.Method) {
		w.Header().Set("Allow", allow)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	switch {
	case p == "/healthz":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Write([]byte("ok"))
	case p == "/models/" || p == "/models":
		s.serveList(w, r)
	case strings.HasPrefix(p, "/models/"):
		s.serveModelFile(w, r, strings.TrimPrefix(p, "/models/"))
	case p == "/api/runs":
		s.postRun(w, r)
	case strings.HasPrefix(p, "/api/runs/"):
		s.serveRun(w, r, strings.TrimPrefix(p, "/api/runs/"))
	case p == "/shaders/" || p == "/shaders":
		s.serveShaderList(w, r)
	case strings.HasPrefix(p, "/shaders/"):
		s.serveShader(w, r, strings.TrimPrefix(p, "/shaders/"))
	case p == "/":
		s.servePage(w, r)
	case strings.HasPrefix(p, "/r/"):
		s.serveRunPage(w, r, strings.TrimPrefix(p, "/r/"))
	case strings.HasPrefix(p, "/ort/") && s.ort != "":
		s.serveORT(w, r, strings.TrimPrefix(p, "/ort/"))
	case strings.HasPrefix(p, "/static/") && s.static != "":
		rel := strings.TrimPrefix(p, "/static/")
		s.serveFile(w, r, s.static, rel, staticKind(rel))
	default:
		s.notFound(w, r, errors.New("no route"))
	}
}

// allowedMethods admits POST on /api/runs alone and GET/HEAD everywhere
// else; it is also the 405's Allow header.
func allowedMethods(path string) string {
	if path == "/api/runs" {
		return http.MethodPost
	}
	return "GET, HEAD"
}

// servePage serves the page's index.html at "/", or says how to build it.
func (s *Server) servePage(w http.ResponseWriter, r *http.Request) {
	if s.static == "" {
		s.notFoundSaying(w, r, pageNotBuilt)
		return
	}
	s.serveFile(w, r, s.static, "index.html", staticKind("index.html"))
}

const pageNotBuilt = "the page is not built: run `make web` and restart the server (or start it with -static DIR); models are at /models/"

func (s *Server) serveList(w http.ResponseWriter, r *http.Request) {
	s.writeJSON(w, http.StatusOK, "no-cache", s.list)
}

// writeJSON replies v as indented JSON with the given status and caching.
func (s *Server) writeJSON(w http.ResponseWriter, status int, cache string, v any) {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", cache)
	w.WriteHeader(status)
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
	case rel == sidecar.File:
		// Its content is in the model's /models/ entry, and no side opens
		// it: served, it would be one more file for the page to fetch.
		return kind{}, false
	case len(segs) == 1 && ext == ".json":
		return jsonDoc, true
	case len(segs) == 1 && (ext == ".safetensors" || ext == ".gguf"):
		return immutableBlob, true
	case len(segs) == 1 && ext == ".txt": // merges.txt of older tokenizers
		return textDoc, true
	case len(segs) == 3 && segs[0] == "variants" && segs[2] == "manifest.json":
		return jsonDoc, true
	case len(segs) == 3 && segs[0] == "variants" && ext == ".bin":
		return immutableBlob, true
	case len(segs) == 3 && segs[0] == hubquant.Subdir && !gguf.IsFileName(segs[2]):
		// A hub checkpoint's files are a checkpoint's top-level ones.
		return modelFileKind(segs[2])
	case isONNXFile(rel):
		return immutableBlob, true
	}
	return kind{}, false
}
