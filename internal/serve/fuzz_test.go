package serve

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

// FuzzRange: whatever the Range header, the answer is the whole file
// (200), parts that each lie inside the file and hold its bytes (206), or
// a 416 that names the size, and nothing panics.
func FuzzRange(f *testing.F) {
	for _, h := range []string{"bytes=0-0", "bytes=-0", "bytes=-00,0-1", "bytes=5-", "bytes=-10", "bytes=0-9,100-199,-5",
		"bytes=9-3", "bytes=abc", "items=0-5", "bytes=99999999999999999999-", "bytes=,", "bytes= 1 - 2 ,\t3-4",
		"bytes=" + strings.Repeat("0-0,", 17)} {
		f.Add(h, uint16(300))
	}
	f.Add("bytes=0-", uint16(0))
	s, err := New(Options{Logf: func(string, ...any) {}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, h string, size uint16) {
		content := make([]byte, size)
		for i := range content {
			content[i] = byte(i*31 + 7)
		}
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		r.Header.Set("Range", h)
		w := httptest.NewRecorder()
		s.serveContent(w, r, "x.bin", time.Time{}, bytes.NewReader(content), int64(size), `"e"`, immutableBlob)
		body, n := w.Body.Bytes(), int(size)
		switch w.Code {
		case http.StatusOK:
			if !bytes.Equal(body, content) {
				t.Fatalf("%q: 200 with %d bytes of %d", h, len(body), n)
			}
		case http.StatusRequestedRangeNotSatisfiable:
			if cr := w.Header().Get("Content-Range"); cr != fmt.Sprintf("bytes */%d", n) {
				t.Fatalf("%q: 416 with Content-Range %q", h, cr)
			}
		case http.StatusPartialContent:
			mt, params, _ := mime.ParseMediaType(w.Header().Get("Content-Type"))
			if mt != "multipart/byteranges" {
				checkPart(t, h, w.Header().Get("Content-Range"), body, content)
				return
			}
			mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
			parts := 0
			for {
				p, err := mr.NextPart()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatalf("%q: part %d: %v", h, parts, err)
				}
				got, _ := io.ReadAll(p)
				checkPart(t, h, p.Header.Get("Content-Range"), got, content)
				parts++
			}
			if parts == 0 || parts > maxRanges {
				t.Fatalf("%q: %d parts", h, parts)
			}
		default:
			t.Fatalf("%q: status %d", h, w.Code)
		}
	})
}

// checkPart: a part's Content-Range lies inside content and body is
// those bytes.
func checkPart(t *testing.T, h, cr string, body, content []byte) {
	t.Helper()
	var from, to, total int
	if _, err := fmt.Sscanf(cr, "bytes %d-%d/%d", &from, &to, &total); err != nil {
		t.Fatalf("%q: Content-Range %q: %v", h, cr, err)
	}
	if total != len(content) || from < 0 || from > to || to >= len(content) {
		t.Fatalf("%q: Content-Range %q outside a file of %d bytes", h, cr, len(content))
	}
	if !bytes.Equal(body, content[from:to+1]) {
		t.Fatalf("%q: part %q holds other bytes", h, cr)
	}
}

// FuzzPathSafety: no request target reaches a file outside the served
// directories, or one inside that is not served (hidden files, notes,
// links out): the fixture puts the secret in all of those places.
func FuzzPathSafety(f *testing.F) {
	for _, p := range []string{"/models/tiny/config.json", "/models/tiny/../../secret.txt", "/models/tiny/%2e%2e/secret.json",
		"/models/tiny/..%2f..%2fsecret.txt", "/models/tiny/leak.json", "/models/tiny/.hidden.json", "/models/tiny/notes.md",
		"/models/tiny/variants/q4/shard-99999.bin", "/static/../secret.txt", "/static/index.html", "/r/../secret.txt",
		"/api/runs/" + linkID, "/r/" + upperID, "/models//secret.json", "/shaders/../secret.txt", "/models/tiny/C:/secret.json"} {
		f.Add(p)
	}
	fx := newFixture(f)
	fx.withPage(f)
	f.Fuzz(func(t *testing.T, target string) {
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return
		}
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			r := &http.Request{Method: method, URL: u, RequestURI: target, Header: http.Header{}, Host: "x", Body: http.NoBody}
			w := httptest.NewRecorder()
			fx.srv.ServeHTTP(w, r)
			if bytes.Contains(w.Body.Bytes(), []byte(secret)) {
				t.Fatalf("%s %q served the secret", method, target)
			}
		}
	})
}
