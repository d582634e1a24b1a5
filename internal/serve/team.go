package serve

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
)

// TokenHeader carries the write token: "Authorization: Bearer TOKEN", as
// the page and `logitscope report --share` send it. A header, never the
// URL: URLs end up in logs and browser histories.
const TokenHeader = "Authorization"

// TokenEnv is the environment variable that holds the write token, for the
// server (instead of -write-token FILE) and for the CLI that shares.
const TokenEnv = "LOGITSCOPE_WRITE_TOKEN"

// ReadToken reads a write token from a file: its first line, trimmed. An
// empty token would let anyone write while seeming to guard the server,
// so it is an error.
func ReadToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("write token: %v", err)
	}
	tok, _, _ := strings.Cut(string(b), "\n")
	if tok = strings.TrimSpace(tok); tok == "" {
		return "", fmt.Errorf("write token %s: the file's first line is empty", path)
	}
	return tok, nil
}

// PublicURL checks the address teammates reach the server by:
// http(s)://host[:port], with no path, since the page asks for /api/runs
// and /static/ at the root of its origin. It returns it without a
// trailing slash.
func PublicURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" ||
		strings.Trim(u.Path, "/") != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("public URL %q: want http(s)://host[:port] with no path (the page is served at the root of its origin)", raw)
	}
	return u.Scheme + "://" + u.Host, nil
}

// ParseProxies reads a comma-separated list of the reverse proxies whose
// X-Forwarded-* headers are trusted: addresses or CIDR prefixes.
func ParseProxies(list string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		p, err := netip.ParsePrefix(f)
		if err != nil {
			a, aerr := netip.ParseAddr(f)
			if aerr != nil {
				return nil, fmt.Errorf("trusted proxy %q: want an IP address or a CIDR prefix", f)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// fromProxy says whether r came straight from a trusted proxy: only then
// are its X-Forwarded-* headers the proxy's and not the client's.
func (s *Server) fromProxy(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range s.proxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr is who sent r: the address the proxy saw (the last hop of
// X-Forwarded-For, the one the proxy appended) when r came from a trusted
// proxy, else the peer's.
func (s *Server) clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if s.fromProxy(r) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		if last := strings.TrimSpace(hops[len(hops)-1]); last != "" {
			if a, err := netip.ParseAddr(last); err == nil {
				return a.String()
			}
		}
	}
	return host
}

// origin is the scheme and host a link to this server names: the public
// URL when set, else what a trusted proxy forwarded, else the request's
// own Host.
func (s *Server) origin(r *http.Request) string {
	if s.public != "" {
		return s.public
	}
	scheme, host := "http", r.Host
	if r.TLS != nil {
		scheme = "https"
	}
	if s.fromProxy(r) {
		if p := r.Header.Get("X-Forwarded-Proto"); p == "http" || p == "https" {
			scheme = p
		}
		if h := r.Header.Get("X-Forwarded-Host"); h != "" && validHost(h) {
			host = h
		}
	}
	return scheme + "://" + host
}

// validHost admits a host[:port] and nothing that could change the
// link's meaning (a path, a userinfo, a second host).
func validHost(h string) bool {
	u, err := url.Parse("http://" + h)
	return err == nil && u.Host == h && u.User == nil && u.Path == ""
}

// errReadOnly and errNoToken are refused writes; their messages say what
// would be accepted.
var (
	errReadOnly = errors.New("this server is read-only: it serves shared runs but stores none")
	errNoToken  = errors.New("this server takes runs only with its write token: send it as " + TokenHeader + ": Bearer TOKEN (the CLI reads $" + TokenEnv + ")")
	errBadToken = errors.New("the write token sent is not this server's")
)

// mayWrite says whether r may store a run, and replies the refusal if not:
// 403 on a read-only server or a wrong token, 401 when no token came.
func (s *Server) mayWrite(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case s.readOnly:
		http.Error(w, errReadOnly.Error(), http.StatusForbidden)
		return false
	case s.token == "":
		return true
	}
	sent, ok := strings.CutPrefix(r.Header.Get(TokenHeader), "Bearer ")
	if !ok || sent == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="logitscope"`)
		http.Error(w, errNoToken.Error(), http.StatusUnauthorized)
		return false
	}
	// Constant time: a token compared byte by byte leaks its prefix.
	if subtle.ConstantTimeCompare([]byte(sent), []byte(s.token)) != 1 {
		http.Error(w, errBadToken.Error(), http.StatusForbidden)
		return false
	}
	return true
}
