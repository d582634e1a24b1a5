package serve

import (
	"bytes"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"
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
	textDoc       = kind{contentType: "text/plain; charset=utf-8", compress: true}
)

// staticTypes fixes the page's content types rather than leaving them to
// the mime package, which reads the host's tables (/etc/mime.types, the
// Windows registry) and has been seen to call .js text/plain there. A
// wrong type breaks the page: module scripts need a JavaScript type and
// WebAssembly.instantiateStreaming refuses anything but application/wasm.
var staticTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".mjs":  "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".json": "application/json",
	".map":  "application/json",
	".txt":  "text/plain; charset=utf-8",
	".wgsl": "text/plain; charset=utf-8",
	".svg":  "image/svg+xml",
	".wasm": "application/wasm",
}

// staticKind is for the page's own assets: revalidated, since their URLs
// are not content-addressed, and compressed when they are text or wasm
// (engine.wasm shrinks from 4.9 MB to 1.35 MB).
func staticKind(name string) kind {
	if t, ok := staticTypes[strings.ToLower(filepath.Ext(name))]; ok {
		return kind{contentType: t, compress: true}
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
	s.serveContent(w, r, st.Name(), st.ModTime(), f, st.Size(), etag, k)
}

// serveContent is serveFile's second half, shared with content that is
// not a file on disk (the embedded shaders).
func (s *Server) serveContent(w http.ResponseWriter, r *http.Request, name string, mod time.Time, content io.ReadSeeker, size int64, etag string, k kind) {
	if rh := r.Header.Get("Range"); rh != "" {
		if clean := cleanRange(rh, size); clean == "" {
			s.logf("serve: %s: ignoring Range %q (malformed, or over %d ranges)", r.URL.Path, clip([]byte(rh)), maxRanges)
			r.Header.Del("Range")
		} else {
			r.Header.Set("Range", clean)
		}
	}
	s.extendWrite(w, size)
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
	// Content types are always set for compressed kinds, so ServeContent
	// never sniffs the gzip bytes.
	if k.compress {
		h.Add("Vary", "Accept-Encoding")
		if size <= maxGzipFile && r.Header.Get("Range") == "" && acceptsGzip(r) {
			body, err := gzipped.get(etag, content, size)
			if err != nil {
				s.logf("serve: %s: gzip: %v", r.URL.Path, err)
				http.Error(w, "read error", http.StatusInternalServerError)
				return
			}
			// The gzip body is another representation, so it gets its own
			// strong tag; If-None-Match with it still yields 304.
			h.Set("ETag", strings.TrimSuffix(etag, `"`)+`-gzip"`)
			h.Set("Content-Encoding", "gzip")
			// ServeContent leaves the length out of an encoded body.
			h.Set("Content-Length", strconv.Itoa(len(body)))
			http.ServeContent(w, r, name, mod, bytes.NewReader(body))
			return
		}
	}
	h.Set("ETag", etag)
	http.ServeContent(w, r, name, mod, content)
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request, why error) {
	s.logf("serve: 404 %s %q: %v", r.Method, r.RequestURI, why)
	http.NotFound(w, r)
}

// notFoundSaying is a 404 whose message helps the user (the page is not
// built, shared runs are off); it must never name a path on disk.
func (s *Server) notFoundSaying(w http.ResponseWriter, r *http.Request, msg string) {
	s.logf("serve: 404 %s %q: %s", r.Method, r.RequestURI, msg)
	http.Error(w, msg, http.StatusNotFound)
}
