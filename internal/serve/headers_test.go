package serve

import (
	"strings"
	"testing"
)

// TestSecurityHeaders: every response, the page's above all, says how it
// may be framed, sniffed and scripted.
func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t)
	f.withPage(t)
	run := runDoc("headers")
	if c := f.post(t, "/api/runs", run).Code; c != 201 {
		t.Fatalf("POST: %d", c)
	}
	for _, target := range []string{"/", "/r/" + wantID(run), "/static/engine.wasm", "/models/", "/api/runs/" + wantID(run), "/no/such"} {
		h := f.do(t, target, nil).Header()
		for name, want := range map[string]string{
			"X-Content-Type-Options": "nosniff",
			"Referrer-Policy":        "no-referrer",
			"X-Frame-Options":        "DENY",
		} {
			if got := h.Get(name); got != want {
				t.Errorf("%s: %s %q, want %q", target, name, got, want)
			}
		}
		csp := h.Get("Content-Security-Policy")
		directives := map[string]string{}
		for _, d := range strings.Split(csp, ";") {
			name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
			directives[name] = value
		}
		for name, want := range map[string]string{
			"default-src":     "'none'",
			"frame-ancestors": "'none'",
			"worker-src":      "'self'",
			"object-src":      "'none'",
			"base-uri":        "'none'",
		} {
			if directives[name] != want {
				t.Errorf("%s: CSP %s %q, want %q (CSP %q)", target, name, directives[name], want, csp)
			}
		}
		if s := directives["script-src"]; !strings.Contains(s, "'self'") || !strings.Contains(s, "'wasm-unsafe-eval'") || strings.Contains(s, "unsafe-inline") {
			t.Errorf("%s: script-src %q", target, s)
		}
		// The page's hub field downloads from huggingface.co and its CDNs.
		if s, want := directives["connect-src"], "'self' https://huggingface.co https://*.huggingface.co https://*.hf.co"; s != want {
			t.Errorf("%s: connect-src %q, want %q", target, s, want)
		}
	}
}

// TestHubOrigins: the hubs the page may download from are the server's
// to say, as origins and nothing more.
func TestHubOrigins(t *testing.T) {
	for _, c := range []struct{ endpoint, want, err string }{
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080", ""},
		{"https://hf-mirror.com/some/path?q=1", "https://hf-mirror.com", ""},
		{"hf-mirror.com", "", "want http(s)://host"},
		{"ftp://x", "", "want http(s)://host"},
		{"https://a;b", "", "want http(s)://host"},
	} {
		got, err := HubOrigin(c.endpoint)
		if got != c.want || (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("HubOrigin(%q) = %q, %v; want %q, %q", c.endpoint, got, err, c.want, c.err)
		}
	}
	for _, bad := range []string{"https://x.org/path", "https://x.org; script-src *", "*", "https://a b"} {
		if _, err := New(Options{HubOrigins: []string{bad}}); err == nil || !strings.Contains(err.Error(), "hub origin") {
			t.Errorf("New with hub origin %q: %v", bad, err)
		}
	}
	s, err := New(Options{HubOrigins: []string{"http://127.0.0.1:9", "https://*.example.org"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.csp, "connect-src 'self' http://127.0.0.1:9 https://*.example.org;") {
		t.Errorf("CSP %q", s.csp)
	}
}
