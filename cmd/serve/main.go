// Command serve serves logitscope's page, models, shaders and shared runs
// over HTTP.
//
//	go run ./cmd/serve [-addr 127.0.0.1:8080] [-models DIR] [-data DIR] [-static DIR]
//	    [-public-url URL] [-write-token FILE] [-read-only] [-trusted-proxy ADDRS]
//
// Without -models it serves the built-in demo model (package demo's small
// Llama trained on the King James Bible, with q8, q6 and q4 variants
// quantized once) as "demo". Without -static it
// serves the page from ./.out/web when `make web` has built it there, and
// otherwise serves models only and says so. Shared runs (POST /api/runs,
// /r/<id>) are kept under -data, by default
// $LOGITSCOPE_CACHE/runs-data or the user cache directory's
// logitscope/runs-data ($XDG_CACHE_HOME/logitscope/runs-data on Linux);
// -data="" turns sharing off. The first line printed is the URL to open:
// -public-url's, when teammates reach the server by another address (a
// reverse proxy's). A write token (-write-token FILE or
// $LOGITSCOPE_WRITE_TOKEN) guards POST /api/runs, reads stay open;
// -read-only refuses every write. Each request is logged to stderr, and
// SIGTERM or Ctrl-C stops accepting, lets requests in flight finish (up to
// 10 s) and exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"logitscope/internal/serve"
	"logitscope/internal/sys/cachedir"
)

// builtPage is where `make web` puts the page, relative to the repository
// root that `make run` and `go run ./cmd/serve` start in.
var builtPage = filepath.Join(".out", "web")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "logitscope serve:", err)
		os.Exit(1)
	}
}

// run serves until ctx ends, printing what the user needs to out.
func run(ctx context.Context, args []string, out io.Writer) error {
	fl := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fl.String("addr", "127.0.0.1:8080", "listen address")
	modelsDir := fl.String("models", "", "directory whose subdirectories are checkpoints (default: the built-in demo)")
	dataDir := fl.String("data", defaultData(), "directory for shared runs, kept in DIR/runs and created if missing; -data=\"\" turns sharing off")
	static := fl.String("static", "", "directory of the page: / and /r/<id> serve its index.html, /static/ its files (default: "+builtPage+" when it holds index.html)")
	public := fl.String("public-url", "", "the address teammates reach this server by, http(s)://host[:port]: shared links and the URL printed name it (default: the listen address)")
	tokenFile := fl.String("write-token", "", "file whose first line is the token POST /api/runs requires (default: $"+serve.TokenEnv+"; neither: anyone who reaches the server may share)")
	readOnly := fl.Bool("read-only", false, "refuse every write: serve the runs already stored")
	proxies := fl.String("trusted-proxy", "", "comma-separated addresses or CIDR prefixes of reverse proxies whose X-Forwarded-For, -Proto and -Host are believed")
	ort := fl.String("ort", "", "onnxruntime-web's dist directory (npm's node_modules/onnxruntime-web/dist), served under /ort/: the page then runs a model's ONNX exports (MODEL/onnx/NAME.onnx) as sides")
	accessLog := fl.Bool("access-log", true, "log a line per request to stderr: client, method, path, status, bytes, duration")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %v", fl.Args())
	}
	page, pageNote, err := pageDir(*static)
	if err != nil {
		return err
	}
	models, err := loadModels(*modelsDir, out)
	if err != nil {
		return err
	}
	hubs, err := serve.HubOriginsFromEnv()
	if err != nil {
		return err
	}
	team, err := teamOptions(*public, *tokenFile, *readOnly, *proxies)
	if err != nil {
		return err
	}
	opt := serve.Options{Models: models, Static: page, Data: *dataDir, HubOrigins: hubs,
		PublicURL: team.PublicURL, WriteToken: team.WriteToken, ReadOnly: team.ReadOnly, TrustedProxies: team.TrustedProxies, ORT: *ort}
	if *accessLog {
		access := log.New(os.Stderr, "access ", log.LstdFlags|log.LUTC)
		opt.AccessLog = func(line string) { access.Print(line) }
	}
	h, err := serve.New(opt)
	if err != nil {
		return err
	}
	// Listen before printing the URL, so the URL printed is one that works
	// (and names the real port when -addr asks for port 0).
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	base := "http://" + browseAddr(ln.Addr().String())
	if opt.PublicURL != "" {
		base = strings.TrimSuffix(opt.PublicURL, "/")
	}
	fmt.Fprintln(out, banner(base, page != "", models))
	fmt.Fprintln(out, "logitscope serve:", pageNote)
	fmt.Fprintln(out, "logitscope serve:", dataNote(*dataDir, team))
	srv := h.HTTPServer() // with serve.Limits' timeouts
	return serveUntil(ctx, srv, ln, out)
}

// browseAddr is where a browser on this machine reaches a listener on
// addr: an unspecified host (-addr :9000 listens on [::]) is localhost.
func browseAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort("localhost", port)
	}
	return addr
}

// banner is the line the user needs first: where to point the browser
// (base: http://host:port, or the public URL teammates use).
func banner(base string, page bool, models []*serve.Model) string {
	names := make([]string, len(models))
	for i, m := range models {
		names[i] = m.Name
	}
	verb := "open"
	if !page {
		verb = "serving models at" // "/" only says the page is not built
	}
	return fmt.Sprintf("logitscope serve: %s %s/ (models: %s)", verb, base, strings.Join(names, ", "))
}

// defaultData is where shared runs live unless -data says otherwise: next
// to the demo model's cache (demo.Dir honours LOGITSCOPE_CACHE too), so
// that `make run` can share links without flags. "" when there is no cache
// directory: sharing is then off and POST /api/runs says so.
func defaultData() string {
	root, err := cachedir.Root("shared runs")
	if err != nil {
		return ""
	}
	return filepath.Join(root, "runs-data")
}

func dataNote(data string, team serve.Options) string {
	switch {
	case data == "":
		return "shared runs are off (start with -data DIR to share links)"
	case team.ReadOnly:
		return "read-only: serving the shared runs in " + filepath.Join(data, "runs") + ", storing none"
	case team.WriteToken != "":
		return "shared runs are kept in " + filepath.Join(data, "runs") + "; sharing needs the write token"
	}
	return "shared runs are kept in " + filepath.Join(data, "runs") + "; anyone who reaches this server may share (-write-token FILE guards it)"
}

// teamOptions reads the flags of a server a team shares: the public URL,
// the write token (-write-token FILE, else $LOGITSCOPE_WRITE_TOKEN), read-only
// and the trusted proxies.
func teamOptions(public, tokenFile string, readOnly bool, proxies string) (serve.Options, error) {
	var opt serve.Options
	var err error
	if public != "" {
		if opt.PublicURL, err = serve.PublicURL(public); err != nil {
			return opt, fmt.Errorf("-public-url: %v", err)
		}
	}
	switch {
	case tokenFile != "":
		if opt.WriteToken, err = serve.ReadToken(tokenFile); err != nil {
			return opt, fmt.Errorf("-write-token: %v", err)
		}
	case os.Getenv(serve.TokenEnv) != "":
		opt.WriteToken = strings.TrimSpace(os.Getenv(serve.TokenEnv))
	}
	opt.ReadOnly = readOnly
	if opt.TrustedProxies, err = serve.ParseProxies(proxies); err != nil {
		return opt, fmt.Errorf("-trusted-proxy: %v", err)
	}
	return opt, nil
}

// pageDir picks the page's directory: -static as given (it must hold
// index.html), else builtPage when `make web` has built it, else none.
// The note says which, for the user.
func pageDir(static string) (dir, note string, err error) {
	if static != "" {
		if _, err := os.Stat(filepath.Join(static, "index.html")); err != nil {
			return "", "", fmt.Errorf("-static %s: no index.html there", static)
		}
		return static, "page from " + static, nil
	}
	if _, err := os.Stat(filepath.Join(builtPage, "index.html")); err == nil {
		return builtPage, "page from " + builtPage, nil
	}
	return "", "the page is not built (`make web` builds it into " + builtPage + "); serving models only", nil
}

// serveUntil serves on ln until ctx ends, then shuts down gracefully.
func serveUntil(ctx context.Context, srv *http.Server, ln net.Listener, out io.Writer) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	fmt.Fprintln(out, "logitscope serve: shutting down")
	// A shard download in flight gets a few seconds to finish.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func loadModels(dir string, out io.Writer) ([]*serve.Model, error) {
	if dir == "" {
		demo, err := serve.PrepareDemo(out)
		if err != nil {
			return nil, err
		}
		m, err := serve.LoadModel("demo", demo, log.Printf)
		if err != nil {
			return nil, err
		}
		return []*serve.Model{m}, nil
	}
	models, err := serve.ScanModels(dir, log.Printf)
	if err != nil {
		return nil, err
	}
	if len(models) == 0 {
		return nil, fmt.Errorf("-models %s: no subdirectory holds a config.json", dir)
	}
	return models, nil
}
