package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"logitscope/conform"
	"logitscope/gpu/native/nativetest"
)

var (
	engineOnce sync.Once
	engineDir  string
	enginePath string
	engineErr  error
)

// engineWasm builds engine.wasm once per test binary, into a directory of
// its own that TestMain removes: at a fixed name in the temporary
// directory, another checkout's tests (or another branch's) replaced it
// mid-run, and the wasm runs compared an older engine with this one.
func engineWasm(t *testing.T) string {
	t.Helper()
	engineOnce.Do(func() {
		if engineDir, engineErr = os.MkdirTemp("", "logitscope-engine-"); engineErr != nil {
			return
		}
		path := filepath.Join(engineDir, "engine.wasm")
		build := exec.Command("go", "build", "-buildmode=c-shared", "-o", path, "../../wasm")
		build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if out, err := build.CombinedOutput(); err != nil {
			engineErr = fmt.Errorf("building engine.wasm: %v\n%s", err, out)
			return
		}
		enginePath = path
	})
	if engineErr != nil {
		t.Fatal(engineErr)
	}
	return enginePath
}

// runConform runs conform and returns its stdout and stderr.
func runConform(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	err := conformCommand(args, &out, &errb)
	t.Logf("conform %s\n%s%s", strings.Join(args, " "), errb.String(), out.String())
	return out.String(), errb.String(), err
}

func readJUnit(t *testing.T, path string) conform.JUnitSuites {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var j conform.JUnitSuites
	if err := xml.Unmarshal(b, &j); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	if len(j.Suites) != 1 {
		t.Fatalf("%d testsuites, want 1", len(j.Suites))
	}
	return j
}

func readSummary(t *testing.T, out string) conform.Summary {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s conform.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// The example suite passes end to end through engine.wasm, on a fresh
// cache, so that its on-the-fly quantization runs too.
func TestConformTinySuite(t *testing.T) {
	nativetest.Device(t)
	t.Setenv("LOGITSCOPE_CACHE", t.TempDir())
	out := t.TempDir()
	junit := filepath.Join(out, "junit.xml")
	start := time.Now()
	table, _, err := runConform(t, "--suite", "../../conform/tiny.json", "--engine", engineWasm(t), "--out", out, "--junit", junit)
	t.Logf("tiny suite took %.1f s", time.Since(start).Seconds())
	if err != nil {
		t.Fatal(err)
	}
	j := readJUnit(t, junit)
	if s := j.Suites[0]; s.Tests != 4 || s.Failures != 0 || s.Errors != 0 {
		t.Fatalf("junit: %d tests, %d failures, %d errors", s.Tests, s.Failures, s.Errors)
	}
	if !strings.Contains(table, "4 passed, 0 failed, 0 errors") {
		t.Fatalf("table:\n%s", table)
	}
	for _, c := range readSummary(t, out).Cases {
		for _, f := range []string{"report.txt", "report.json", "ref.dump", "ref.dump.receipt.json", "capture.log"} {
			if c.Compare != "panel" {
				f = strings.Replace(strings.Replace(f, "report.", "report-1.", 1), "ref.", "ref-1.", 1)
			}
			if _, err := os.Stat(filepath.Join(c.Dir, f)); err != nil {
				t.Errorf("%s: %v", c.Name, err)
			}
		}
	}
}

// The command refuses a malformed suite, naming the file, and bad flags,
// before anything runs (package conform tests every suite error).
func TestConformCommandErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	os.WriteFile(path, []byte(`{"name": "s", "cases": []}`), 0o644)
	if _, _, err := runConform(t, "--suite", path, "--out", t.TempDir()); err == nil || !strings.Contains(err.Error(), "no cases") || !strings.Contains(err.Error(), path) {
		t.Fatalf("err = %v, want no cases and the path", err)
	}
	for _, args := range [][]string{{}, {"--suite", "x.json", "--runtime", "js"}, {"--suite", "x.json", "--shard", "2/1"}} {
		if _, _, err := runConform(t, args...); err == nil {
			t.Errorf("conform %v succeeded", args)
		}
	}
}
