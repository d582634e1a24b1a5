package serve

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPostRunContentType(t *testing.T) {
	f := newFixture(t)
	f.withPage(t)
	for i, tc := range []struct {
		ctype  string
		status int
	}{
		{"", 415},
		{"text/plain", 415},
		{"application/x-www-form-urlencoded", 415},
		{"multipart/form-data; boundary=x", 415},
		{"application/jsonx", 415},
		{"application/json", 201},
		{"Application/JSON; charset=utf-8", 201},
	} {
		body := runDoc(fmt.Sprint("content type ", i))
		w := f.request(t, http.MethodPost, "/api/runs", body, map[string]string{"Content-Type": tc.ctype})
		if w.Code != tc.status {
			t.Errorf("Content-Type %q: %d %q, want %d", tc.ctype, w.Code, w.Body, tc.status)
		}
		_, err := os.Stat(filepath.Join(f.runs, wantID(body)+".json"))
		if stored := err == nil; stored != (tc.status == 201) {
			t.Errorf("Content-Type %q: stored %v", tc.ctype, stored)
		}
	}
}

// TestRunStoreLimits: past the count or byte limit a new run is refused
// with 507 and nothing is evicted; a run already stored still answers,
// and a restart counts what is on disk.
func TestRunStoreLimits(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lim   Limits
		fits  int // distinct runs stored before the 507
		extra string
	}{
		{"count", Limits{MaxRuns: 3}, 3, "3 runs"},
		{"bytes", Limits{MaxStoreBytes: 3*int64(len(runDoc("run 0"))) + 10}, 3, "limit of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			data := t.TempDir() // without withPage's traps, which would count
			var err error
			f.srv, err = New(Options{Models: f.srv.list, Data: data, Logf: f.logf, Limits: tc.lim})
			if err != nil {
				t.Fatal(err)
			}
			f.runs = filepath.Join(data, "runs")
			for i := range tc.fits {
				if w := f.post(t, "/api/runs", runDoc(fmt.Sprint("run ", i))); w.Code != 201 {
					t.Fatalf("run %d: %d %s", i, w.Code, w.Body)
				}
			}
			w := f.post(t, "/api/runs", runDoc("one too many"))
			if w.Code != http.StatusInsufficientStorage || !strings.Contains(w.Body.String(), tc.extra) {
				t.Errorf("past the limit: %d %q, want 507 naming %q", w.Code, w.Body, tc.extra)
			}
			if w := f.post(t, "/api/runs", runDoc("run 0")); w.Code != 200 {
				t.Errorf("a stored run again: %d", w.Code)
			}
			checkRunsDir(t, f.runs, tc.fits)
			again, err := New(Options{Data: data, Logf: f.logf, Limits: tc.lim})
			if err != nil {
				t.Fatal(err)
			}
			f.srv = again
			if w := f.post(t, "/api/runs", runDoc("after a restart")); w.Code != http.StatusInsufficientStorage {
				t.Errorf("after a restart: %d %q, want 507", w.Code, w.Body)
			}
		})
	}
}

// liveServer serves f's handler on loopback with lim's timeouts, as
// cmd/serve does with the defaults.
func liveServer(t *testing.T, f *fixture, lim Limits) *httptest.Server {
	t.Helper()
	var err error
	f.srv, err = New(Options{Models: f.srv.list, Static: f.static, Data: filepath.Join(f.root, "data"), Logf: f.logf, Limits: lim})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	ts.Config = f.srv.HTTPServer()
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

func dial(t *testing.T, ts *httptest.Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// closedWithin reads c until the server closes it, failing if that takes
// longer than d.
func closedWithin(t *testing.T, c net.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the connection is still open after %v", d)
	}
}

func TestSlowBodyIsCutOff(t *testing.T) {
	f := newFixture(t)
	f.withPage(t)
	ts := liveServer(t, f, Limits{Body: 300 * time.Millisecond})
	c := dial(t, ts)
	body := runDoc("slow")
	fmt.Fprintf(c, "POST /api/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	start := time.Now()
	go func() {
		for _, b := range body {
			if _, err := c.Write([]byte{b}); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	closedWithin(t, c, 3*time.Second)
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("cut off after %v", el)
	}
	if _, err := os.Stat(filepath.Join(f.runs, wantID(body)+".json")); err == nil {
		t.Error("the slow run was stored")
	}
}

func TestIdleKeepAliveCloses(t *testing.T) {
	f := newFixture(t)
	ts := liveServer(t, f, Limits{Idle: 300 * time.Millisecond})
	c := dial(t, ts)
	fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET: %v %v", resp, err)
	}
	resp.Body.Close()
	closedWithin(t, c, 3*time.Second)
}

// TestStalledReaderIsCutOff: a client that stops reading does not hold
// its response (and the file) open past the write deadline.
func TestStalledReaderIsCutOff(t *testing.T) {
	f := newFixture(t)
	f.withPage(t)
	big := make([]byte, 64<<20) // more than loopback's socket buffers hold
	if err := os.WriteFile(filepath.Join(f.static, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	ts := liveServer(t, f, Limits{Write: 300 * time.Millisecond, MinRate: 1 << 40})
	c := dial(t, ts)
	fmt.Fprintf(c, "GET /static/big.bin HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(1500 * time.Millisecond) // stalled
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _ := io.Copy(io.Discard, c)
	if n >= int64(len(big)) {
		t.Errorf("read %d bytes after stalling: the whole file was sent", n)
	}
}

// TestUploadsAreCapped: past Uploads concurrent POSTs the next is told to
// come back later instead of queueing.
func TestUploadsAreCapped(t *testing.T) {
	f := newFixture(t)
	f.withPage(t)
	ts := liveServer(t, f, Limits{Uploads: 1})
	c := dial(t, ts)
	fmt.Fprintf(c, "POST /api/runs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{")
	time.Sleep(200 * time.Millisecond) // the first upload is in its handler
	resp, err := http.Post(ts.URL+"/api/runs", "application/json", strings.NewReader(string(runDoc("second"))))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("second upload: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// TestSlowDownloadCompletes: a download that takes longer than the Body
// and Write floors, at a steady rate above MinRate, gets the whole file:
// the timeouts cut off stalled clients, not large files.
func TestSlowDownloadCompletes(t *testing.T) {
	f := newFixture(t)
	f.withPage(t)
	big := make([]byte, 32<<20)
	if err := os.WriteFile(filepath.Join(f.static, "big.bin"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	// The file's deadline: 300 ms + 32 MiB at 8 MiB/s = 4.3 s, three times
	// what the paced reads below need, so a loaded machine still passes.
	ts := liveServer(t, f, Limits{Body: 300 * time.Millisecond, Write: 300 * time.Millisecond, MinRate: 8 << 20})
	resp, err := http.Get(ts.URL + "/static/big.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	var n int64
	buf := make([]byte, 1<<20)
	for {
		// Whole MiBs, so that the pace does not depend on how the network
		// happens to split the stream: 25 MiB/s at most, 1.3 s or more.
		m, err := io.ReadFull(resp.Body, buf)
		n += int64(m)
		if err != nil {
			break
		}
		time.Sleep(40 * time.Millisecond)
	}
	if el := time.Since(start); n != int64(len(big)) || el < 600*time.Millisecond {
		t.Errorf("read %d of %d bytes in %v", n, len(big), time.Since(start))
	}
}
