package serve

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
)

// contentSecurityPolicy is the page's policy, sent with every response:
// the page's own documents and the worker script (whose policy is the one
// its own response carries) both get it. Only the page's files may run;
// nothing may frame it, and it may fetch from its own origin and from the
// hubs it downloads models from (hubs: Options.HubOrigins) only.
//
//   - 'wasm-unsafe-eval': ui.wasm and engine.wasm are compiled in the page
//     and in the worker.
//   - 'unsafe-eval': vugu's DOM renderer installs its JS half with
//     window.eval (domrender.New evaluates jsHelperScript, a constant of
//     vugu's); no page data reaches eval. Serving that script as a file
//     instead would let this go.
//   - style-src-attr 'unsafe-inline': the token strip sets each token's
//     KLD shade as a style attribute (--k) and vugu sets the progress
//     bar's width as one; <style> elements and style sheets from
//     elsewhere stay refused.
//   - img-src data:: the page's empty favicon (href="data:,") that stops
//     the browser asking for /favicon.ico.
func contentSecurityPolicy(hubs []string) string {
	return strings.Join([]string{
		"default-src 'none'",
		"script-src 'self' 'wasm-unsafe-eval' 'unsafe-eval'",
		"worker-src 'self'",
		strings.Join(append([]string{"connect-src 'self'"}, hubs...), " "),
		"img-src 'self' data:",
		"style-src 'self'",
		"style-src-attr 'unsafe-inline'",
		"base-uri 'none'",
		"form-action 'self'",
		"frame-ancestors 'none'",
		"object-src 'none'",
	}, "; ")
}

// DefaultHubOrigins are the origins the page's hub field downloads from
// (web/ui/hub.go): huggingface.co, and the hosts its resolve URLs redirect
// a file's bytes to (cdn-lfs.hf.co, cas-bridge.xethub.hf.co, …).
var DefaultHubOrigins = []string{"https://huggingface.co", "https://*.huggingface.co", "https://*.hf.co"}

// HubOrigin is the origin of a hub endpoint (HF_ENDPOINT), as a
// Content-Security-Policy source: http(s)://host[:port].
func HubOrigin(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.ContainsAny(u.Host, " ;,'") {
		return "", fmt.Errorf("serve: hub endpoint %q: want http(s)://host[:port]", endpoint)
	}
	return u.Scheme + "://" + u.Host, nil
}

// setSecurityHeaders applies to every response, errors included: a 404
// page is a document too.
func setSecurityHeaders(h http.Header, csp string) {
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY") // frame-ancestors for browsers that predate it
}

// HubOriginsFromEnv is DefaultHubOrigins and, when HF_ENDPOINT names
// another hub (a mirror, a test's), its origin: the page may download
// from the hub the CLI downloads from.
func HubOriginsFromEnv() ([]string, error) {
	hubs := slices.Clone(DefaultHubOrigins)
	if e := os.Getenv("HF_ENDPOINT"); e != "" {
		o, err := HubOrigin(e)
		if err != nil {
			return nil, fmt.Errorf("HF_ENDPOINT: %v", err)
		}
		if !slices.Contains(hubs, o) {
			hubs = append(hubs, o)
		}
	}
	return hubs, nil
}
