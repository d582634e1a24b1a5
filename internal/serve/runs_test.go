package serve

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"logitscope/internal/analysis/attribution"
)

// minimal is the smallest document POST /api/runs accepts (an empty
// comparison), made distinct by note, which the page ignores.
const minimal = `{"kind":"logitscope.snapshot","version":1,"report":{"rows":0,"positions":[]},"tokens":[]`

// runDoc is a minimal document made distinct by note.
func runDoc(note string) []byte {
	return []byte(minimal + `, "note": ` + fmt.Sprintf("%q", note) + "}\n")
}

// wantID is the id computed here, independently of runID.
func wantID(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])[:32]
}

type runReply struct{ ID, URL string }

func decodeReply(t *testing.T, w *httptest.ResponseRecorder) runReply {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("reply Content-Type %q", ct)
	}
	var rep runReply
	if err := json.Unmarshal(w.Body.Bytes(), &rep); err != nil {
		t.Fatalf("reply %q: %v", w.Body, err)
	}
	return rep
}

func TestRunRoundTrip(t *testing.T) {
	f := newFixture(t)
	f.withPage(t)
	body := runDoc("round trip")
	id := wantID(body)
	for i, status := range []int{http.StatusCreated, http.StatusOK} {
		w := f.post(t, "/api/runs", body)
		if w.Code != status {
			t.Fatalf("POST %d: status %d, want %d: %s", i+1, w.Code, status, w.Body)
		}
		if rep := decodeReply(t, w); rep.ID != id || rep.URL != "/r/"+id {
			t.Errorf("POST %d: reply %+v, want id %s", i+1, rep, id)
		}
	}

	w := f.do(t, "/api/runs/"+id, nil)
	h := w.Header()
	if w.Code != 200 || !bytes.Equal(w.Body.Bytes(), body) {
		t.Fatalf("GET: status %d, body %q", w.Code, w.Body)
	}
	full := sha256.Sum256(body)
	if etag := h.Get("ETag"); etag != `"sha256-`+hex.EncodeToString(full[:])+`"` {
		t.Errorf("ETag %q", etag)
	}
	if h.Get("Content-Type") != "application/json" || h.Get("Cache-Control") != "public, max-age=31536000, immutable" {
		t.Errorf("GET headers %v", h)
	}
	if c := f.do(t, "/api/runs/"+id, map[string]string{"If-None-Match": h.Get("ETag")}).Code; c != 304 {
		t.Errorf("revalidation: %d", c)
	}
	if got := gunzip(t, f.do(t, "/api/runs/"+id, map[string]string{"Accept-Encoding": "gzip"})); !bytes.Equal(got, body) {
		t.Errorf("gzip body differs")
	}
	if w := f.do(t, "/r/"+id, nil); w.Code != 200 || w.Body.String() != indexHTML {
		t.Errorf("/r/<id>: %d %q", w.Code, w.Body)
	}
	// A person followed the link: a page that says so and leads on, the
	// id escaped, not Go's bare "404 page not found".
	for _, bad := range []string{wantID(runDoc("never posted")), "%3Cscript%3E"} {
		w := f.do(t, "/r/"+bad, nil)
		b := w.Body.String()
		if w.Code != 404 || !strings.Contains(b, "No shared run") || !strings.Contains(b, `<a href="/">`) ||
			strings.Contains(b, "<script>") || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
			t.Errorf("/r/%s: %d %q", bad, w.Code, b)
		}
	}
}

// gunzip checks that w is a gzip 200 and returns its decompressed body.
func gunzip(t *testing.T, w *httptest.ResponseRecorder) []byte {
	t.Helper()
	if w.Code != 200 || w.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("status %d, Content-Encoding %q", w.Code, w.Header().Get("Content-Encoding"))
	}
	zr, err := gzip.NewReader(w.Body)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// padded is a snapshot of exactly n bytes.
func padded(t *testing.T, n int) []byte {
	head := minimal + `,"pad":"`
	if n < len(head)+2 {
		t.Fatalf("padded(%d): too short", n)
	}
	return []byte(head + strings.Repeat("x", n-len(head)-2) + `"}`)
}

func TestRunRejected(t *testing.T) {
	f := newFixture(t)
	f.withPage(t)
	tests := []struct {
		name   string
		body   []byte
		status int
		msg    string // part of the reply
	}{
		{"at the limit", padded(t, 16<<20), 201, ""},
		{"over the limit", padded(t, 16<<20+1), 413, "16 MiB"},
		{"empty", nil, 400, "not JSON"},
		{"not JSON", []byte("hello"), 400, "not JSON"},
		{"truncated", []byte(`{"kind":"logitscope.snapshot","version":1`), 400, "not JSON"},
		{"two documents", []byte(`{"kind":"logitscope.snapshot","version":1}{}`), 400, "not JSON"},
		{"array", []byte(`[{"kind":"logitscope.snapshot","version":1}]`), 400, "array"},
		{"string", []byte(`"logitscope.snapshot"`), 400, "string"},
		{"null", []byte(`null`), 400, "null"},
		{"no kind", []byte(`{"version":1}`), 400, `"kind" is missing`},
		{"wrong kind", []byte(`{"kind":"logitscope.receipt","version":1}`), 400, `"kind" is "logitscope.receipt"`},
		{"kind not a string", []byte(`{"kind":7,"version":1}`), 400, `"kind" is 7`},
		{"no version", []byte(`{"kind":"logitscope.snapshot"}`), 400, `"version" is missing`},
		{"version 2", []byte(`{"kind":"logitscope.snapshot","version":2}`), 400, `"version" is 2`},
		{"version as a string", []byte(`{"kind":"logitscope.snapshot","version":"1"}`), 400, `"version" is "1"`},
		{"version 1.0", []byte(`{"kind":"logitscope.snapshot","version":1.0}`), 400, `"version" is 1.0`},
		{"no report", []byte(`{"kind":"logitscope.snapshot","version":1}`), 400, "snapshot: no report"},
		{"report and tokens disagree", []byte(minimal[:len(minimal)-len(`"tokens":[]`)] + `"tokens":[1]}`), 400, "0 rows, 0 positions and 1 tokens"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := f.post(t, "/api/runs", tc.body)
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.msg) {
				t.Fatalf("status %d %q, want %d with %q", w.Code, clip(w.Body.Bytes()), tc.status, tc.msg)
			}
			_, err := os.Stat(filepath.Join(f.runs, wantID(tc.body)+".json"))
			if stored := err == nil; stored != (tc.status == 201) {
				t.Errorf("stored: %v", stored)
			}
		})
	}
}

func TestRunBadIDs(t *testing.T) {
	f := newFixture(t)
	f.withPage(t)
	id := wantID(runDoc("bad ids"))
	if c := f.post(t, "/api/runs", runDoc("bad ids")).Code; c != 201 {
		t.Fatalf("POST: %d", c)
	}
	if c := f.do(t, "/api/runs/"+id, nil).Code; c != 200 { // so a 404 below means "refused"
		t.Fatalf("GET: %d", c)
	}
	ids := []string{
		strings.ToUpper(id), id[:31], id + "0", id + ".json", id + "/", "../" + id,
		"../x", "%2e%2e", "%2e%2e%2f" + id, "", id[:31] + "g", id[:31] + "%00",
		upperID, shortID, // these files exist, with the secret in them
	}
	for _, bad := range ids {
		for _, prefix := range []string{"/api/runs/", "/r/"} {
			t.Run(prefix+bad, func(t *testing.T) {
				if c := f.do(t, prefix+bad, nil).Code; c != 404 {
					t.Errorf("status %d, want 404", c)
				}
			})
		}
	}
}

func TestRunsDisabled(t *testing.T) {
	f := newFixture(t) // no -data, no -static
	w := f.post(t, "/api/runs", runDoc("off"))
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), "-data DIR") {
		t.Errorf("POST: %d %q", w.Code, w.Body)
	}
	for _, url := range []string{"/api/runs/" + wantID(runDoc("off")), "/r/" + wantID(runDoc("off"))} {
		if c := f.do(t, url, nil).Code; c != 404 {
			t.Errorf("%s: %d", url, c)
		}
	}
}

// Without -static a stored run's link says the page is not built.
func TestRunPageNotBuilt(t *testing.T) {
	f := newFixture(t)
	srv, err := New(Options{Models: f.srv.list, Data: t.TempDir(), Logf: f.logf})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	body := runDoc("no page")
	if c := f.post(t, "/api/runs", body).Code; c != 201 {
		t.Fatalf("POST: %d", c)
	}
	for _, url := range []string{"/r/" + wantID(body), "/"} {
		if w := f.do(t, url, nil); w.Code != 404 || !strings.Contains(w.Body.String(), "not built") {
			t.Errorf("%s: %d %q", url, w.Code, w.Body)
		}
	}
}

func TestMethods(t *testing.T) {
	f := newFixture(t)
	f.withPage(t)
	id := wantID(runDoc("methods"))
	f.post(t, "/api/runs", runDoc("methods")) // so the POST below finds it: 200
	tests := []struct {
		method, url string
		status      int
		allow       string
	}{
		{"GET", "/api/runs", 405, "POST"},
		{"HEAD", "/api/runs", 405, "POST"},
		{"PUT", "/api/runs", 405, "POST"},
		{"POST", "/api/runs/" + id, 405, "GET, HEAD"},
		{"DELETE", "/api/runs/" + id, 405, "GET, HEAD"},
		{"POST", "/r/" + id, 405, "GET, HEAD"},
		{"POST", "/models/", 405, "GET, HEAD"},
		{"POST", "/shaders/rope.wgsl", 405, "GET, HEAD"},
		{"OPTIONS", "/", 405, "GET, HEAD"},
		{"GE", "/models/", 405, "GET, HEAD"}, // a substring of an allowed method is no method
		{"POS", "/api/runs", 405, "POST"},
		{"POST", "/api/runs", 200, ""},
		{"HEAD", "/api/runs/" + id, 200, ""},
		{"HEAD", "/r/" + id, 200, ""},
		{"GET", "/models/", 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.url, func(t *testing.T) {
			w := f.request(t, tc.method, tc.url, runDoc("methods"), map[string]string{"Content-Type": "application/json"})
			if w.Code != tc.status || w.Header().Get("Allow") != tc.allow { // Allow only on a 405
				t.Errorf("status %d Allow %q, want %d %q", w.Code, w.Header().Get("Allow"), tc.status, tc.allow)
			}
		})
	}
}

// TestRunConcurrentPosts races 16 POSTs of one body against 16 of distinct
// bodies: one of the first is new, the rest find it; every stored file
// parses and is named by its hash; no temp file is left.
func TestRunConcurrentPosts(t *testing.T) {
	data := t.TempDir()
	const n = 16
	srv, err := New(Options{Data: data, Logf: t.Logf, Limits: Limits{Uploads: 2 * n}})
	if err != nil {
		t.Fatal(err)
	}
	bodies := make([][]byte, 0, 2*n)
	for i := range n {
		bodies = append(bodies, padded(t, 1<<20), runDoc(fmt.Sprint("distinct ", i)))
	}
	codes := make([]int, len(bodies))
	var wg sync.WaitGroup
	for i, body := range bodies {
		wg.Go(func() {
			w := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodPost, "/api/runs", bytes.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			srv.ServeHTTP(w, r)
			codes[i] = w.Code
		})
	}
	wg.Wait()
	created := map[int]int{}
	for i, c := range codes {
		created[i%2] += map[bool]int{true: 1}[c == 201]
		if c != 201 && c != 200 {
			t.Errorf("POST %d: status %d", i, c)
		}
	}
	if created[0] != 1 || created[1] != n {
		t.Errorf("201s: %d for the shared body (want 1), %d for the distinct ones (want %d)", created[0], created[1], n)
	}
	checkRunsDir(t, filepath.Join(data, "runs"), n+1)
}

// checkRunsDir asserts that dir holds exactly want runs, each a JSON
// object named by the hash of its bytes, and nothing else.
func checkRunsDir(t *testing.T, dir string, want int) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != want {
		t.Errorf("%d entries in runs/, want %d", len(entries), want)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() != wantID(b)+".json" || checkSnapshot(b) != nil {
			t.Errorf("runs/%s: %d bytes, hash %s, check %v", e.Name(), len(b), wantID(b), checkSnapshot(b))
		}
	}
}

// A sweep or a recipe is stored as the CLI sealed it, and refused when
// its content no longer matches its seal.
func TestRunSweeps(t *testing.T) {
	f := newFixture(t)
	f.withPage(t)
	res := &attribution.Result{Kind: attribution.Kind, Version: attribution.Version, Unit: attribution.ByTensor, NumLayers: 1,
		Units:  []attribution.UnitResult{{Unit: attribution.Unit{Name: "model.layers.0.mlp.down_proj.weight", Kind: "mlp.down_proj"}}},
		Layers: []attribution.Divergence{{}}}
	body, err := res.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	w := f.post(t, "/api/runs", body)
	if w.Code != http.StatusCreated {
		t.Fatalf("a sealed sweep: status %d %s", w.Code, w.Body)
	}
	rep := decodeReply(t, w)
	if got := f.do(t, "/api/runs/"+rep.ID, nil); got.Code != 200 || !bytes.Equal(got.Body.Bytes(), body) {
		t.Errorf("GET the sweep: %d, %d bytes of %d", got.Code, got.Body.Len(), len(body))
	}
	tampered := bytes.Replace(body, []byte(`"windows": 0`), []byte(`"windows": 9`), 1)
	if bytes.Equal(tampered, body) {
		t.Fatal("nothing to tamper with")
	}
	for _, c := range []struct {
		name string
		body []byte
		want string
	}{
		{"tampered", tampered, "modified after it was sealed"},
		{"unsealed recipe", []byte(`{"kind":"logitscope-recipe","version":1}`), "not sealed"},
		{"a sweep of another version", []byte(`{"kind":"logitscope-sensitivity","version":2}`), "version 2"},
	} {
		if w := f.post(t, "/api/runs", c.body); w.Code != 400 || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("%s: status %d %q, want 400 with %q", c.name, w.Code, w.Body, c.want)
		}
	}
}
