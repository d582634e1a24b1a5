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
	}
}
