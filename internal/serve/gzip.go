package serve

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Bodies are compressed once per content (keyed by the strong ETag, which
// names the bytes) and kept: compressing ui.wasm on every request took
// 234 ms of a page load on loopback, serving the kept body 2.4 ms.
const (
	maxGzipFile  = 64 << 20  // larger compressible files go out as they are
	maxGzipCache = 256 << 20 // kept compressed bytes in all; past it the cache starts over
)

// gzipCache holds compressed bodies by ETag. Concurrent first requests
// for one body wait for a single compression.
type gzipCache struct {
	mu      sync.Mutex
	entries map[string]*gzipEntry
	bytes   int64
}

type gzipEntry struct {
	done chan struct{}
	body []byte
	err  error
}

var gzipped = &gzipCache{entries: map[string]*gzipEntry{}}

// get returns content compressed, compressing it only the first time etag
// is asked for; size is content's length.
func (c *gzipCache) get(etag string, content io.ReadSeeker, size int64) ([]byte, error) {
	c.mu.Lock()
	e, ok := c.entries[etag]
	if !ok {
		if c.bytes+size > maxGzipCache {
			c.entries, c.bytes = map[string]*gzipEntry{}, 0
		}
		e = &gzipEntry{done: make(chan struct{})}
		c.entries[etag] = e
	}
	c.mu.Unlock()
	if ok {
		<-e.done
		return e.body, e.err
	}
	e.body, e.err = compress(content)
	c.mu.Lock()
	if e.err != nil {
		delete(c.entries, etag) // a read error is not the content's fault: try again next time
	} else {
		c.bytes += int64(len(e.body))
	}
	c.mu.Unlock()
	close(e.done)
	return e.body, e.err
}

func compress(content io.ReadSeeker) ([]byte, error) {
	if _, err := content.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&b, gzip.DefaultCompression)
	if _, err := io.Copy(gz, content); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
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
