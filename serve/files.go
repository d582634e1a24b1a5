package serve

import (
	"net/http"
	"path/filepath"
	"strings"
)

// kind says how a file is cached and encoded.
type kind struct {
	contentType string // "" lets http.ServeContent pick by extension
	immutable   bool   // content-addressed: manifests pin shards by sha256
	compress    bool
}

var (
	immutableBlob = kind{contentType: "application/octet-stream", immutable: true}
	jsonDoc       = kind{contentType: "application/json", compress: true}
)

// staticKind is for the page's own assets: revalidated, since their URLs
// are not content-addressed, and compressed when they are text or wasm.
func staticKind(name string) kind {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".html", ".js", ".mjs", ".css", ".json", ".txt", ".svg", ".wgsl", ".map", ".wasm":
		return kind{compress: true}
	}
	return kind{}
}

// serveFile serves root/rel (root already free of symlinks) with ranges,
// conditional requests, a strong ETag and, where it pays, gzip. Every
// failure is a bare 404; the reason goes to the log only.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, root, rel string, k kind) {
	f, st, err := openUnder(root, rel)
	if err != nil {
		s.notFound(w, r, err)
		return
	}
	defer f.Close()
	etag, err := s.etags.get(f.Name(), f, st)
	if err != nil {
		s.logf("serve: %s: %v", r.URL.Path, err)
		http.Error(w, "read error", http.StatusInternalServerError)
		return
	}
	if rh := r.Header.Get("Range"); rh != "" && !rangeSyntaxOK(rh) {
		s.logf("serve: %s: ignoring malformed Range %q", r.URL.Path, rh)
		r.Header.Del("Range")
	}
	h := w.Header()
	if k.contentType != "" {
		h.Set("Content-Type", k.contentType)
	}
	if k.immutable {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	// Never gzip a range: byte offsets must refer to the file itself.
	if k.compress {
		h.Add("Vary", "Accept-Encoding")
		if r.Header.Get("Range") == "" && acceptsGzip(r) {
			// The gzip body is another representation, so it gets its own
			// strong tag; If-None-Match with it still yields 304.
			h.Set("ETag", strings.TrimSuffix(etag, `"`)+`-gzip"`)
			gw := &gzipWriter{ResponseWriter: w}
			http.ServeContent(gw, r, st.Name(), st.ModTime(), f)
			if err := gw.close(); err != nil {
				s.logf("serve: %s: gzip: %v", r.URL.Path, err)
			}
			return
		}
	}
	h.Set("ETag", etag)
	http.ServeContent(w, r, st.Name(), st.ModTime(), f)
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request, why error) {
	s.logf("serve: 404 %s %q: %v", r.Method, r.RequestURI, why)
	http.NotFound(w, r)
}
