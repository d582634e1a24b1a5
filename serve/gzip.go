package serve

import (
	"compress/gzip"
	"net/http"
	"strings"
)

// gzipWriter compresses only a 200 response: http.ServeContent may instead
// answer 304 or 412, which carry no body worth compressing. The length
// ServeContent sets is the file's, not the compressed body's, so it goes.
type gzipWriter struct {
	http.ResponseWriter
	gz      *gzip.Writer
	started bool
}

func (w *gzipWriter) WriteHeader(code int) {
	if !w.started {
		w.started = true
		if code == http.StatusOK {
			h := w.Header()
			h.Del("Content-Length")
			h.Set("Content-Encoding", "gzip")
			w.gz = gzip.NewWriter(w.ResponseWriter)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *gzipWriter) Write(b []byte) (int, error) {
	if !w.started {
		w.WriteHeader(http.StatusOK)
	}
	if w.gz != nil {
		return w.gz.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

func (w *gzipWriter) close() error {
	if w.gz != nil {
		return w.gz.Close()
	}
	return nil
}

// acceptsGzip reads Accept-Encoding loosely: "gzip" listed without q=0.
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for _, part := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if strings.EqualFold(strings.TrimSpace(name), "gzip") {
				q := strings.ReplaceAll(params, " ", "")
				return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
			}
		}
	}
	return false
}
