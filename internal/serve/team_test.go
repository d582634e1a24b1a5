package serve

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// teamServer is a Server with only a run store, on a real listener.
func teamServer(t *testing.T, opt Options) (*httptest.Server, *[]string) {
	t.Helper()
	var mu sync.Mutex
	var lines []string
	opt.Data = t.TempDir()
	opt.Logf = t.Logf
	opt.AccessLog = func(l string) { mu.Lock(); lines = append(lines, l); mu.Unlock() }
	s, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts, &lines
}

// A write token guards POST /api/runs: accepted, refused when wrong,
// asked for when absent; reads stay open either way, and a read-only
// server refuses every write, token or not.
func TestWriteToken(t *testing.T) {
	const token = "s3cret-token"
	tests := []struct {
		name     string
		opt      Options
		auth     string
		want     int
		stored   bool
		wantAuth bool // WWW-Authenticate asked for
	}{
		{"no token configured, none sent", Options{}, "", http.StatusCreated, true, false},
		{"token accepted", Options{WriteToken: token}, "Bearer " + token, http.StatusCreated, true, false},
		{"token absent", Options{WriteToken: token}, "", http.StatusUnauthorized, false, true},
		{"not a bearer token", Options{WriteToken: token}, "Basic " + token, http.StatusUnauthorized, false, true},
		{"token wrong", Options{WriteToken: token}, "Bearer s3cret-tokeN", http.StatusForbidden, false, false},
		{"token's prefix", Options{WriteToken: token}, "Bearer s3cret", http.StatusForbidden, false, false},
		{"read-only", Options{ReadOnly: true}, "", http.StatusForbidden, false, false},
		{"read-only with the token", Options{ReadOnly: true, WriteToken: token}, "Bearer " + token, http.StatusForbidden, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts, lines := teamServer(t, tc.opt)
			body := runDoc(tc.name)
			resp := postHeaders(t, ts.URL, body, map[string]string{"Authorization": tc.auth})
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("POST: %d, want %d", resp.StatusCode, tc.want)
			}
			if got := resp.Header.Get("WWW-Authenticate") != ""; got != tc.wantAuth {
				t.Errorf("WWW-Authenticate sent: %v, want %v", got, tc.wantAuth)
			}
			get, err := http.Get(ts.URL + "/api/runs/" + wantID(body))
			if err != nil {
				t.Fatal(err)
			}
			get.Body.Close()
			if stored := get.StatusCode == http.StatusOK; stored != tc.stored {
				t.Errorf("stored: %v, want %v (GET %d)", stored, tc.stored, get.StatusCode)
			}
			if h, err := http.Get(ts.URL + "/healthz"); err != nil || h.StatusCode != http.StatusOK {
				t.Errorf("GET /healthz: %v %v", h, err)
			}
			for _, l := range *lines {
				if strings.Contains(l, "s3cret") {
					t.Errorf("the access log shows the token: %q", l)
				}
			}
		})
	}
}

// Links name the public URL when one is set, a trusted proxy's forwarded
// host and scheme when the request came through it, and the request's own
// host otherwise: forwarded headers from anyone else are ignored.
func TestLinks(t *testing.T) {
	local, err := ParseProxies("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	other, _ := ParseProxies("10.0.0.0/8, 192.0.2.7")
	fwd := map[string]string{"X-Forwarded-Host": "scope.example.org", "X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9, 198.51.100.4"}
	tests := []struct {
		name       string
		opt        Options
		header     map[string]string
		wantLink   string // "" : the test server's own URL
		wantClient string
	}{
		{"own host", Options{}, nil, "", "127.0.0.1"},
		{"public URL", Options{PublicURL: "https://logits.example.com/"}, fwd, "https://logits.example.com", "127.0.0.1"},
		{"trusted proxy", Options{TrustedProxies: local}, fwd, "https://scope.example.org", "198.51.100.4"},
		{"untrusted proxy", Options{TrustedProxies: other}, fwd, "", "127.0.0.1"},
		{"trusted proxy, bad host", Options{TrustedProxies: local}, map[string]string{"X-Forwarded-Host": "evil.example/x@y"}, "", "127.0.0.1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts, lines := teamServer(t, tc.opt)
			body := runDoc(tc.name)
			resp := postHeaders(t, ts.URL, body, tc.header)
			rep := struct{ URL, Link string }{}
			decodeBody(t, resp, &rep)
			want := tc.wantLink
			if want == "" {
				want = ts.URL
			}
			if id := wantID(body); rep.Link != want+"/r/"+id || rep.URL != "/r/"+id {
				t.Errorf("reply url %q link %q, want /r/%s and %s/r/%s", rep.URL, rep.Link, id, want, id)
			}
			if len(*lines) != 1 || !strings.HasPrefix((*lines)[0], tc.wantClient+` POST "/api/runs" 201 `) {
				t.Errorf("access log %q, want one line from %s", *lines, tc.wantClient)
			}
		})
	}
}

// Share is the CLI's side of POST /api/runs: the server's link back, the
// token sent, and a refusal quoted.
func TestShare(t *testing.T) {
	ts, _ := teamServer(t, Options{WriteToken: "tok", PublicURL: "http://team.example:8080"})
	body := runDoc("share")
	link, err := Share(context.Background(), ts.URL+"/", "tok", body)
	if want := "http://team.example:8080/r/" + wantID(body); err != nil || link != want {
		t.Errorf("Share: %q, %v; want %q", link, err, want)
	}
	for _, c := range []struct{ name, base, token, want string }{
		{"no token", ts.URL, "", "401 Unauthorized: this server takes runs only with its write token"},
		{"wrong token", ts.URL, "nope", "403 Forbidden: the write token sent is not this server's"},
		{"not a server URL", "ftp://x", "tok", `server public URL "ftp://x"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Share(context.Background(), c.base, c.token, body); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Share: %v, want an error with %q", err, c.want)
			}
		})
	}
}

func TestOptionErrors(t *testing.T) {
	for _, u := range []string{"logits.example.com", "https://host/sub/", "https://host/?q=1", "https://u:p@host"} {
		if _, err := New(Options{PublicURL: u}); err == nil || !strings.Contains(err.Error(), "public URL") {
			t.Errorf("-public-url %q: %v", u, err)
		}
	}
	for _, p := range []string{"10.0.0.0/33", "proxy.local", "1.2.3"} {
		if _, err := ParseProxies(p); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("ParseProxies(%q): %v", p, err)
		}
	}
}

func decodeBody(t *testing.T, resp *http.Response, v any) {
	t.Helper()
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("reply (%s): %v", resp.Status, err)
	}
}

// postHeaders POSTs a run to base's /api/runs with the given headers
// (an empty value: not sent).
func postHeaders(t *testing.T, base string, body []byte, header map[string]string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/api/runs", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// FuzzTeamFlags: -public-url accepts only an origin (scheme and host, no
// path, query, fragment or user), which it gives back unchanged when
// given again; -trusted-proxy gives masked prefixes that contain the
// address they were written from, and neither panics.
func FuzzTeamFlags(f *testing.F) {
	for _, s := range []string{"https://logits.example.com", "http://h:8080/", "http://[::1]:80", "https://h/x", "h:80", "https://u@h",
		"127.0.0.1", "10.0.0.0/8, ::1", "10.0.0.1/8", "fe80::1%eth0", "1.2.3.4/33", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if u, err := PublicURL(s); err == nil {
			p, err := url.Parse(u)
			if err != nil || p.Path != "" || p.RawQuery != "" || p.User != nil || p.Scheme+"://"+p.Host != u {
				t.Fatalf("PublicURL(%q) = %q: not an origin", s, u)
			}
			if again, err := PublicURL(u); err != nil || again != u {
				t.Fatalf("PublicURL(%q) = %q, %v", u, again, err)
			}
		}
		ps, err := ParseProxies(s)
		if err != nil {
			return
		}
		for _, p := range ps {
			if p != p.Masked() {
				t.Fatalf("ParseProxies(%q): %v not masked", s, p)
			}
		}
	})
}
