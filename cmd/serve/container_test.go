package main

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// recipe is what the Dockerfile says: the build's command, where the
// final image's files come from, its environment and its entrypoint.
type recipe struct {
	build      string
	copies     map[string]string // image path → build stage path
	env        map[string]string
	entrypoint []string
}

var (
	runRE   = regexp.MustCompile(`(?m)^RUN (deploy/build\.sh .+)$`)
	copyRE  = regexp.MustCompile(`(?m)^COPY --from=build (\S+) (\S+)$`)
	envRE   = regexp.MustCompile(`(?m)^ENV (\w+)=(\S+)$`)
	entryRE = regexp.MustCompile(`(?m)^ENTRYPOINT (\[.*\])$`)
	fromRE  = regexp.MustCompile(`(?m)^FROM (\S+)`)
)

func readRecipe(t *testing.T, path string) recipe {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	r := recipe{copies: map[string]string{}, env: map[string]string{}}
	m := runRE.FindStringSubmatch(df)
	if m == nil {
		t.Fatal("the Dockerfile does not build with deploy/build.sh: the test would not test its commands")
	}
	r.build = m[1]
	for _, c := range copyRE.FindAllStringSubmatch(df, -1) {
		r.copies[c[2]] = c[1]
	}
	for _, e := range envRE.FindAllStringSubmatch(df, -1) {
		r.env[e[1]] = e[2]
	}
	e := entryRE.FindStringSubmatch(df)
	if e == nil || json.Unmarshal([]byte(e[1]), &r.entrypoint) != nil || len(r.entrypoint) == 0 {
		t.Fatalf("no ENTRYPOINT [...] in the Dockerfile")
	}
	froms := fromRE.FindAllStringSubmatch(df, -1)
	if len(froms) != 2 || !strings.Contains(froms[1][1], "distroless/static") {
		t.Errorf("stages %v: want a build stage and a distroless static base", froms)
	}
	return r
}

// TestContainerRecipe builds the image's files with the Dockerfile's own
// command (deploy/build.sh), lays them out as its COPY lines do, and runs
// its ENTRYPOINT with its ENV: the server must be a static binary (the
// base has no libc), serve the page, /healthz and a share, and exit
// cleanly on SIGTERM with a request's worth of shutdown. This is the
// recipe's test where no Docker engine runs (see the Dockerfile).
func TestContainerRecipe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the server, engine.wasm and ui.wasm: minutes on a cold build cache")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	r := readRecipe(t, filepath.Join(root, "Dockerfile"))
	stage := t.TempDir()
	script := strings.Fields(r.build)
	build := exec.Command("sh", script[0], filepath.Join(stage, "out"))
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", r.build, err, out)
	}
	// The image: each COPY's build path (/out/... in the build stage) at its
	// image path, under img.
	img := t.TempDir()
	for dst, src := range r.copies {
		if err := os.Rename(filepath.Join(stage, strings.TrimPrefix(src, "/")), filepath.Join(img, strings.TrimPrefix(dst, "/"))); err != nil {
			t.Fatalf("COPY %s %s: %v", src, dst, err)
		}
	}
	bin := filepath.Join(img, strings.TrimPrefix(r.entrypoint[0], "/"))
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s needs a dynamic loader: the distroless static base has none", r.entrypoint[0])
		}
	}
	f.Close()
	for _, file := range []string{"index.html", "ui.wasm", "engine.wasm", "simd.wasm", "wasm_exec.js"} {
		if _, err := os.Stat(filepath.Join(img, "web", file)); err != nil {
			t.Errorf("the image's page lacks %s", file)
		}
	}

	// The entrypoint, its absolute paths under img; a free port for
	// 8080, and the tiny model instead of the demo (which would be
	// quantized on first start).
	var args []string
	addr := "127.0.0.1:" + freePort(t) // the banner names the public URL, not this
	for i, a := range r.entrypoint[1:] {
		switch {
		case r.entrypoint[i] == "-addr":
			a = addr
		case strings.HasPrefix(a, "/"):
			a = filepath.Join(img, a)
		}
		args = append(args, a)
	}
	models := tinyModels(t)
	mkfile(t, filepath.Join(img, "token"), "team-token\n")
	args = append(args, "-models", models, "-write-token", filepath.Join(img, "token"), "-public-url", "https://logits.example.com")
	srv := exec.Command(bin, args...)
	srv.Env = os.Environ()
	for k, v := range r.env {
		if strings.HasPrefix(v, "/") {
			v = filepath.Join(img, v)
		}
		srv.Env = append(srv.Env, k+"="+v)
	}
	stdout, _ := srv.StdoutPipe()
	var stderr syncBuffer
	srv.Stderr = &stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Process.Kill()
	lines := bufio.NewScanner(stdout)
	var out []string
	for len(out) < 3 && lines.Scan() {
		out = append(out, lines.Text())
	}
	go io.Copy(io.Discard, stdout)
	if len(out) < 3 || !strings.HasPrefix(out[0], "logitscope serve: open https://logits.example.com/") {
		t.Fatalf("the server printed %q; stderr:\n%s", out, stderr.String())
	}
	base := "http://" + addr
	for path, want := range map[string]string{"/healthz": "ok", "/": "<", "/static/ui.wasm": "\x00asm"} {
		code, body := get(t, base+path)
		if code != 200 || !strings.HasPrefix(body, want) {
			t.Errorf("GET %s: %d %.20q", path, code, body)
		}
	}
	resp, rep := post(t, base+"/", "Bearer team-token", strings.NewReader(emptyRun))
	if resp.StatusCode != 201 || !strings.HasPrefix(rep["link"], "https://logits.example.com/r/") {
		t.Errorf("POST with the token: %d %v", resp.StatusCode, rep)
	}
	if resp, _ := post(t, base+"/", "", strings.NewReader(emptyRun)); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("anonymous POST: %d", resp.StatusCode)
	}
	if err := srv.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("still running 15 s after SIGTERM")
	}
	if log := stderr.String(); !strings.Contains(log, `"/healthz" 200`) || strings.Contains(log, "team-token") {
		t.Errorf("the access log lacks /healthz or shows the token:\n%s", log)
	}
}
