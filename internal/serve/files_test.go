package serve

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

const shardURL = "/models/tiny/variants/q4/shard-00001.bin"

// part is a byte range, inclusive as Content-Range counts.
type part struct{ from, to int }

func TestRanges(t *testing.T) {
	f := newFixture(t)
	data := read(t, f.shard)
	n := len(data)
	etag := f.do(t, shardURL, nil).Header().Get("ETag")
	if !strings.HasPrefix(etag, `"sha256-`) {
		t.Fatalf("ETag %q", etag)
	}
	tests := []struct {
		name   string
		header map[string]string
		status int
		parts  []part // nil: the whole file for 200, none for 416
		cr     string // Content-Range expected on a single-part answer
	}{
		{"first byte", map[string]string{"Range": "bytes=0-0"}, 206, []part{{0, 0}}, fmt.Sprintf("bytes 0-0/%d", n)},
		{"suffix", map[string]string{"Range": "bytes=-10"}, 206, []part{{n - 10, n - 1}}, fmt.Sprintf("bytes %d-%d/%d", n-10, n-1, n)},
		{"open", map[string]string{"Range": "bytes=5-"}, 206, []part{{5, n - 1}}, fmt.Sprintf("bytes 5-%d/%d", n-1, n)},
		{"end past EOF is clipped", map[string]string{"Range": fmt.Sprintf("bytes=%d-%d", n-3, n+100)}, 206, []part{{n - 3, n - 1}}, fmt.Sprintf("bytes %d-%d/%d", n-3, n-1, n)},
		{"past EOF", map[string]string{"Range": fmt.Sprintf("bytes=%d-", n)}, 416, nil, fmt.Sprintf("bytes */%d", n)},
		{"multiple", map[string]string{"Range": "bytes=0-9,100-199,-5"}, 206, []part{{0, 9}, {100, 199}, {n - 5, n - 1}}, ""},
		{"garbage", map[string]string{"Range": "bytes=abc"}, 200, nil, ""},
		{"other unit", map[string]string{"Range": "items=0-5"}, 200, nil, ""},
		{"reversed", map[string]string{"Range": "bytes=9-3"}, 200, nil, ""},
		{"If-Range matches", map[string]string{"Range": "bytes=0-3", "If-Range": etag}, 206, []part{{0, 3}}, fmt.Sprintf("bytes 0-3/%d", n)},
		{"If-Range differs", map[string]string{"Range": "bytes=0-3", "If-Range": `"sha256-00"`}, 200, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := f.do(t, shardURL, tc.header)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d", w.Code, tc.status)
			}
			if tc.cr != "" || tc.status == 416 {
				if got := w.Header().Get("Content-Range"); got != tc.cr {
					t.Errorf("Content-Range %q, want %q", got, tc.cr)
				}
			}
			if w.Header().Get("Content-Encoding") != "" {
				t.Errorf("a shard was encoded: %q", w.Header().Get("Content-Encoding"))
			}
			switch {
			case tc.status == 200:
				if !bytes.Equal(w.Body.Bytes(), data) {
					t.Errorf("body is not the whole file")
				}
			case len(tc.parts) == 1:
				p := tc.parts[0]
				if !bytes.Equal(w.Body.Bytes(), data[p.from:p.to+1]) {
					t.Errorf("body is not bytes %d-%d", p.from, p.to)
				}
			case len(tc.parts) > 1:
				checkMultipart(t, w.Header().Get("Content-Type"), w.Body.Bytes(), data, tc.parts)
			}
		})
	}
}

func checkMultipart(t *testing.T, ctype string, body, data []byte, want []part) {
	t.Helper()
	mt, params, err := mime.ParseMediaType(ctype)
	if err != nil || mt != "multipart/byteranges" {
		t.Fatalf("Content-Type %q", ctype)
	}
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for i, p := range want {
		part, err := mr.NextPart()
		if err != nil {
			t.Fatalf("part %d: %v", i, err)
		}
		if cr, wcr := part.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-%d/%d", p.from, p.to, len(data)); cr != wcr {
			t.Errorf("part %d: Content-Range %q, want %q", i, cr, wcr)
		}
		got, _ := io.ReadAll(part)
		if !bytes.Equal(got, data[p.from:p.to+1]) {
			t.Errorf("part %d: wrong bytes", i)
		}
	}
	if _, err := mr.NextPart(); err != io.EOF {
		t.Errorf("extra parts: %v", err)
	}
}

func TestETagRevalidation(t *testing.T) {
	f := newFixture(t)
	for _, url := range []string{shardURL, "/models/tiny/config.json", "/models/tiny/model.safetensors"} {
		w := f.do(t, url, nil)
		etag := w.Header().Get("ETag")
		if w.Code != 200 || !strings.HasPrefix(etag, `"sha256-`) {
			t.Fatalf("%s: status %d ETag %q", url, w.Code, etag)
		}
		w = f.do(t, url, map[string]string{"If-None-Match": etag})
		if w.Code != http.StatusNotModified || w.Body.Len() != 0 {
			t.Errorf("%s: If-None-Match: status %d, %d body bytes", url, w.Code, w.Body.Len())
		}
	}

	// A rewritten file gets a new tag, and the old tag no longer matches.
	path := filepath.Join(f.model, "generation_config.json")
	url := "/models/tiny/generation_config.json"
	old := f.do(t, url, nil).Header().Get("ETag")
	write(t, path, `{"eos_token_id": 1}`)
	later := time.Now().Add(time.Minute) // the rewrite may fall in the same mtime tick
	if err := os.Chtimes(path, later, later); err != nil {
		t.Fatal(err)
	}
	w := f.do(t, url, map[string]string{"If-None-Match": old})
	if w.Code != 200 || w.Header().Get("ETag") == old || w.Body.String() != `{"eos_token_id": 1}` {
		t.Errorf("after a rewrite: status %d ETag %q (old %q) body %q", w.Code, w.Header().Get("ETag"), old, w.Body.String())
	}
}

func TestCacheHeaders(t *testing.T) {
	f := newFixture(t)
	tests := []struct{ url, cache string }{
		{shardURL, "public, max-age=31536000, immutable"},
		{"/models/tiny/model.safetensors", "public, max-age=31536000, immutable"},
		{"/models/tiny/config.json", "no-cache"},
		{"/models/tiny/tokenizer.json", "no-cache"},
		{"/models/tiny/variants/q4/manifest.json", "no-cache"},
	}
	for _, tc := range tests {
		if got := f.do(t, tc.url, nil).Header().Get("Cache-Control"); got != tc.cache {
			t.Errorf("%s: Cache-Control %q, want %q", tc.url, got, tc.cache)
		}
	}
}

func TestGzip(t *testing.T) {
	f := newFixture(t)
	gz := map[string]string{"Accept-Encoding": "gzip, deflate"}
	tests := []struct {
		name, url, file string
		header          map[string]string
		gzipped         bool
	}{
		{"json", "/models/tiny/tokenizer.json", "tokenizer.json", gz, true},
		{"manifest", "/models/tiny/variants/q4/manifest.json", "variants/q4/manifest.json", gz, true},
		{"json without gzip", "/models/tiny/config.json", "config.json", nil, false},
		{"json with q=0", "/models/tiny/config.json", "config.json", map[string]string{"Accept-Encoding": "gzip;q=0"}, false},
		{"json range", "/models/tiny/config.json", "config.json", map[string]string{"Accept-Encoding": "gzip", "Range": "bytes=0-"}, false},
		{"shard", shardURL, "variants/q4/shard-00001.bin", gz, false},
		{"safetensors", "/models/tiny/model.safetensors", "model.safetensors", gz, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := read(t, filepath.Join(f.model, tc.file))
			w := f.do(t, tc.url, tc.header)
			if w.Code != 200 && w.Code != 206 {
				t.Fatalf("status %d", w.Code)
			}
			body := w.Body.Bytes()
			if enc := w.Header().Get("Content-Encoding"); (enc == "gzip") != tc.gzipped {
				t.Fatalf("Content-Encoding %q", enc)
			}
			if tc.gzipped {
				// The compressed body's length, never the file's.
				if cl := w.Header().Get("Content-Length"); cl != strconv.Itoa(len(body)) {
					t.Errorf("Content-Length %s on a gzip body of %d bytes", cl, len(body))
				}
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if body, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
				// Its own tag revalidates too.
				h := map[string]string{"Accept-Encoding": "gzip", "If-None-Match": w.Header().Get("ETag")}
				if c := f.do(t, tc.url, h).Code; c != 304 {
					t.Errorf("revalidating the gzip body: %d", c)
				}
			}
			if !bytes.Equal(body, want) {
				t.Errorf("body differs from the file")
			}
		})
	}
}
