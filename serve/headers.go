package serve

import (
	"net/http"
	"strings"
)

// contentSecurityPolicy is the page's policy, sent with every response:
// the page's own documents and the worker script (whose policy is the one
// its own response carries) both get it. Only the page's files may run;
// nothing may frame it, and it may fetch from its own origin only.
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
var contentSecurityPolicy = strings.Join([]string{
	"default-src 'none'",
	"script-src 'self' 'wasm-unsafe-eval' 'unsafe-eval'",
	"worker-src 'self'",
	"connect-src 'self'",
	"img-src 'self' data:",
	"style-src 'self'",
	"style-src-attr 'unsafe-inline'",
	"base-uri 'none'",
	"form-action 'self'",
	"frame-ancestors 'none'",
	"object-src 'none'",
}, "; ")

// setSecurityHeaders applies to every response, errors included: a 404
// page is a document too.
func setSecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY") // frame-ancestors for browsers that predate it
}
