// Package e2e drives the web build in Debian's Chromium (headless, with
// SwiftShader's WebGPU) through chromedp. This file is the harness that the
// package's tests share:
//
//	dir := WebDir(t)           // the web build dir, built once per test binary
//	site := StartSite(t)       // serve.Server on httptest with the demo model
//	site = StartSite(t, SiteModel{"m", dir}) // and dir's model as "m"
//	b := NewBrowser(t)         // a fresh headless Chromium; console -> t.Log
//	state := b.Open(site.URL+"/static/abitest.html", 5*time.Minute)
//	v := Eval[T](b, `js expression or promise`)
//	b.Screenshot("name")       // full-page PNG as a test artifact
//
// Tests skip when /usr/bin/chromium is missing (apt-get install chromium).
// TestMain is here (it removes the build dir): other files of the package
// must not define one.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"logitscope/host"
	"logitscope/internal/serve"
	"logitscope/internal/sys/prereq"
)

// Chromium is the browser the tests drive.
const Chromium = "/usr/bin/chromium"

// build is the web build dir, made once per test binary and removed by
// TestMain: engine.wasm, ui.wasm (when web/ui has Go files), web/static/*,
// simd.wasm and wasm_exec.js, flat, as `make web` lays it out.
var build struct {
	once  sync.Once
	tmp   string
	dir   string
	err   error
	uiErr error // ui.wasm failed to build (only RequireUI fails for it)
	hasUI bool

	demoOnce sync.Once
	demo     string
	demoErr  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if build.tmp != "" {
		os.RemoveAll(build.tmp)
	}
	os.Exit(code)
}

// RepoRoot is the module root (the directory of go.mod).
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// WebDir returns the web build dir, building it on first use.
func WebDir(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		start := time.Now()
		build.tmp, build.err = os.MkdirTemp("", "logitscope-e2e-")
		if build.err != nil {
			return
		}
		build.dir = filepath.Join(build.tmp, "web")
		build.err = buildWeb(build.dir)
		t.Logf("e2e: web build dir %s (%.1f s)", build.dir, time.Since(start).Seconds())
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.dir
}

// RequireUI fails the test when ui.wasm is missing from the web build dir:
// web/ui has no Go files, or they did not build.
func RequireUI(t testing.TB) {
	t.Helper()
	WebDir(t)
	switch {
	case build.uiErr != nil:
		t.Fatal(build.uiErr)
	case !build.hasUI:
		t.Fatal("web/ui has no Go files: no ui.wasm in the web build dir")
	}
}

func buildWeb(dir string) error {
	root := RepoRoot()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	goBuild := func(env []string, args ...string) error {
		cmd := exec.Command("go", append([]string{"build"}, args...)...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), env...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("go build %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	if err := goBuild([]string{"GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0"},
		"-buildmode=c-shared", "-o", filepath.Join(dir, "engine.wasm"), "./wasm"); err != nil {
		return fmt.Errorf("building engine.wasm: %w", err)
	}
	if hasGoFiles(filepath.Join(root, "web", "ui")) {
		build.hasUI = true
		build.uiErr = goBuild([]string{"GOOS=js", "GOARCH=wasm"}, "-o", filepath.Join(dir, "ui.wasm"), "./web/ui")
	}
	static := filepath.Join(root, "web", "static")
	entries, err := os.ReadDir(static)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Type().IsRegular() {
			if err := copyFile(filepath.Join(static, e.Name()), filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := copyFile(filepath.Join(root, "internal", "engine", "wasmsimd", "simd.wasm"), filepath.Join(dir, "simd.wasm")); err != nil {
		return err
	}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return fmt.Errorf("go env GOROOT: %w", err)
	}
	return copyFile(filepath.Join(strings.TrimSpace(string(goroot)), "lib", "wasm", "wasm_exec.js"),
		filepath.Join(dir, "wasm_exec.js"))
}

// hasGoFiles reports whether dir holds non-test Go files.
func hasGoFiles(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, f := range m {
		if !strings.HasSuffix(f, "_test.go") {
			return true
		}
	}
	return false
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// DemoDir is the demo model's directory (serve.PrepareDemo: the trained
// model of package demo with its q8, q6 and q4 variants, written on first
// use into the user's cache or $LOGITSCOPE_CACHE).
func DemoDir(t testing.TB) string {
	t.Helper()
	build.demoOnce.Do(func() { build.demo, build.demoErr = serve.PrepareDemo(io.Discard) })
	if build.demoErr != nil {
		t.Fatal(build.demoErr)
	}
	return build.demo
}

// Site is a running server for one test.
type Site struct {
	URL     string // http://127.0.0.1:port, no trailing slash
	Static  string // the web build dir it serves
	DemoDir string // the "demo" model's directory
	Data    string // the server's data dir (shared runs)
	Server  *serve.Server

	mu       sync.Mutex
	requests []Request
}

// Request is one request the site received, as it arrived: what a test
// checks to say what the page asked of the server and sent to it.
type Request struct {
	Method, Path, Range string
	Body                []byte
}

// Requests lists the requests the site has received so far, in order.
func (s *Site) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// record keeps every request (its body too) before h serves it.
func (s *Site) record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		s.mu.Lock()
		s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Range: r.Header.Get("Range"), Body: body})
		s.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// SiteModel is a model directory a site serves under Name beside the demo.
type SiteModel struct{ Name, Dir string }

// StartSite serves the web build dir, the demo model (named "demo") and
// the extra models on an httptest server that stops when the test ends.
func StartSite(t testing.TB, extra ...SiteModel) *Site {
	t.Helper()
	return startSite(t, "", extra...)
}

// StartORTSite is StartSite with onnxruntime-web's dist directory ort
// served under /ort/ (serve -ort): the page can run ONNX exports.
func StartORTSite(t testing.TB, ort string, extra ...SiteModel) *Site {
	t.Helper()
	return startSite(t, ort, extra...)
}

func startSite(t testing.TB, ort string, extra ...SiteModel) *Site {
	t.Helper()
	s := &Site{Static: WebDir(t), DemoDir: DemoDir(t), Data: t.TempDir()}
	demo, err := serve.LoadModel("demo", s.DemoDir, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	models := []*serve.Model{demo}
	for _, x := range extra {
		m, err := serve.LoadModel(x.Name, x.Dir, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		models = append(models, m)
	}
	// The hub the page may download from: huggingface.co's, and a test's
	// (hubtest) named by HF_ENDPOINT, as cmd/serve takes it.
	hubs, err := serve.HubOriginsFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	s.Server, err = serve.New(serve.Options{Models: models, Static: s.Static, Data: s.Data, Logf: t.Logf, HubOrigins: hubs, ORT: ort})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.record(s.Server))
	t.Cleanup(ts.Close)
	s.URL = ts.URL
	return s
}

// Wazero loads the site's engine.wasm under wazero (the reference the
// browser's runs are compared with); it is closed when the test ends.
func Wazero(t testing.TB, site *Site) *host.Module {
	t.Helper()
	wasm, err := os.ReadFile(filepath.Join(site.Static, "engine.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := host.Load(context.Background(), wasm, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close(context.Background()) })
	return mod
}

// Browser is one headless Chromium with a fresh profile and one tab.
type Browser struct {
	t   testing.TB
	Ctx context.Context // the tab's chromedp context
}

// NewBrowser starts Chromium as DESIGN.md says: Debian's binary, no
// sandbox, a fresh user data dir, headless, WebGPU on (SwiftShader),
// no QUIC, no component updates or background networking; enable-features
// is left alone. The page's console goes to t.Log. It skips the test when
// Chromium is not installed. extra options come last, so they can change
// these: chromedp.Flag("enable-unsafe-webgpu", false) starts a Chromium
// without WebGPU (navigator.gpu undefined), to test the CPU fallback.
func NewBrowser(t testing.TB, extra ...chromedp.ExecAllocatorOption) *Browser {
	t.Helper()
	if _, err := os.Stat(Chromium); err != nil {
		prereq.Missing(t, prereq.Chromium, fmt.Sprintf("no %s (apt-get install chromium): %v", Chromium, err))
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(Chromium),
		chromedp.NoSandbox,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("enable-unsafe-webgpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	}
	opts = append(opts, extra...)
	// Chromium wants a runtime dir; an unset XDG_RUNTIME_DIR costs warnings
	// and, in some setups, a failed start.
	if os.Getenv("XDG_RUNTIME_DIR") == "" {
		xdg := filepath.Join(t.TempDir(), "xdg")
		if err := os.MkdirAll(xdg, 0o700); err != nil {
			t.Fatal(err)
		}
		opts = append(opts, chromedp.Env("XDG_RUNTIME_DIR="+xdg))
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	messages := chromedp.Console(ctx)
	done := make(chan struct{})
	var violations []string // read after done
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			where := ""
			if m.URL != "" {
				where = fmt.Sprintf(" (%s:%d)", filepath.Base(m.URL), m.Line+1)
			}
			t.Logf("console.%s: %s%s", m.Type, m.Text, where)
			if strings.Contains(m.Text, "Content Security Policy") {
				violations = append(violations, m.Text+where)
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		<-done // no t.Log after the test ends
		// The server's CSP must let the page work as it is: anything it
		// refused is a page that relies on what the policy forbids.
		if len(violations) > 0 {
			t.Errorf("the page broke its Content-Security-Policy %d time(s):\n%s", len(violations), strings.Join(violations, "\n"))
		}
	})
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("starting %s: %v", Chromium, err)
	}
	return &Browser{t: t, Ctx: ctx}
}

// Open navigates to url and waits until document.body.dataset.state is
// "done" or "error" (which it returns), failing the test after timeout.
func (b *Browser) Open(url string, timeout time.Duration) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, timeout+10*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(url)); err != nil {
		b.t.Fatalf("navigating to %s: %v", url, err)
	}
	state, err := b.WaitState(timeout, "done", "error")
	if err != nil {
		b.Screenshot("timeout")
		b.t.Fatalf("%s: %v", url, err)
	}
	return state
}

// WaitState waits until document.body.dataset.state is one of states and
// returns it.
func (b *Browser) WaitState(timeout time.Duration, states ...string) (string, error) {
	ctx, cancel := context.WithTimeout(b.Ctx, timeout+10*time.Second)
	defer cancel()
	expr := fmt.Sprintf(`((s) => %q.split(",").includes(s) ? s : null)(document.body && document.body.dataset.state)`,
		strings.Join(states, ","))
	state, err := chromedp.Run(ctx, chromedp.Poll[string](expr,
		chromedp.WithPollingInterval(200*time.Millisecond), chromedp.WithPollingTimeout(timeout)))
	if errors.Is(err, chromedp.ErrPollingTimeout) {
		cur, _ := EvalErr[string](b, `String(document.body && document.body.dataset.state)`)
		return "", fmt.Errorf("document.body.dataset.state is %q after %v, want one of %v", cur, timeout, states)
	}
	return state, err
}

// EvalErr evaluates a JS expression in the page (awaiting it when it is a
// promise) and decodes its JSON value into T.
func EvalErr[T any](b *Browser, expr string) (T, error) {
	ctx, cancel := context.WithTimeout(b.Ctx, 2*time.Minute)
	defer cancel()
	return chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
}

// Eval is EvalErr that fails the test on an error.
func Eval[T any](b *Browser, expr string) T {
	b.t.Helper()
	v, err := EvalErr[T](b, expr)
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// Screenshot saves a full-page PNG named after the test and name into
// $LOGITSCOPE_ARTIFACTS (else a temporary dir of the test), logs its path
// and returns it ("" when it failed, which is only logged).
func (b *Browser) Screenshot(name string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, time.Minute)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	dir := os.Getenv("LOGITSCOPE_ARTIFACTS")
	if dir == "" {
		dir = b.t.TempDir()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	clean := strings.NewReplacer("/", "_", " ", "_", ":", "_").Replace(b.t.Name() + "-" + name)
	path := filepath.Join(dir, clean+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	b.t.Logf("screenshot: %s", path)
	return path
}
