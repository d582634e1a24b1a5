package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"logitscope/internal/gpu/native/nativetest"
	"logitscope/internal/run/conform"
)

var (
	engineOnce sync.Once
	enginePath string
	engineErr  error
)

// engineWasm builds engine.wasm once per test binary, into a file of its
// own (TestMain removes it): test binaries of several checkouts may run at
// once.
func engineWasm(t *testing.T) string {
	t.Helper()
	engineOnce.Do(func() {
		path := filepath.Join(os.TempDir(), fmt.Sprintf("logitscope-conform-test-engine.%d.wasm", os.Getpid()))
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
	table, _, err := runConform(t, "--suite", "../../internal/run/conform/tiny.json", "--engine", engineWasm(t), "--out", out, "--junit", junit)
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

// conform merge turns the shards' directories into one table, summary,
// JUnit file and exit status, and fails, naming what is missing, on an
// incomplete set.
func TestConformMerge(t *testing.T) {
	dir := t.TempDir()
	corpus, err := os.ReadFile("../../internal/model/synth/corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "panel.txt"), corpus[:400], 0o644); err != nil {
		t.Fatal(err)
	}
	var cases []map[string]any
	model := copyModel(t) // the suite quantizes it: not the shared tiny model
	for _, name := range []string{"a", "b", "c"} {
		cases = append(cases, map[string]any{"name": name, "model": model, "test": "q8", "panel": "panel.txt", "window": 32,
			"thresholds": map[string]any{"max_mean_kld": 1}})
	}
	b, _ := json.Marshal(map[string]any{"name": "m", "cases": cases})
	suite := filepath.Join(dir, "suite.json")
	if err := os.WriteFile(suite, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var shards []string
	for _, sh := range []string{"1/2", "2/2"} {
		out := filepath.Join(t.TempDir(), "out")
		if _, _, err := runConform(t, "--suite", suite, "--runtime", "native", "--out", out, "--shard", sh); err != nil {
			t.Fatal(err)
		}
		shards = append(shards, out)
	}
	junit, merged := filepath.Join(t.TempDir(), "all.xml"), t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := cli([]string{"conform", "merge", "--junit", junit, "--out", merged, shards[1], shards[0]}, &stdout, &stderr); code != 0 {
		t.Fatalf("merge: exit %d\n%s%s", code, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "3 passed, 0 failed, 0 errors in 2 shards of suite m") {
		t.Errorf("merge printed:\n%s", stdout.String())
	}
	if j := readJUnit(t, junit); j.Tests != 3 || j.Suites[0].Cases[1].Name != "b" {
		t.Errorf("junit: %+v", j)
	}
	if s := readSummary(t, merged); len(s.Cases) != 3 || s.Shard != "1-2/2" || s.Out != merged {
		t.Errorf("merged summary: %+v", s)
	}
	stderr.Reset()
	if code := cli([]string{"conform", "merge", shards[0]}, io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "missing shards 2/2 of 2") {
		t.Errorf("one shard of two: exit %d, %q", code, stderr.String())
	}
}

// merge --out never replaces a shard's own summary.json.
func TestConformMergeOutIsNotAShard(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "summary.json"), []byte(`{"suite": "s", "suite_cases": 1, "shard": "1/1", "cases": [{"name": "a", "status": "pass"}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(filepath.Join(dir, "summary.json"))
	var out bytes.Buffer
	err := conformMerge([]string{"--out", dir, dir}, &out)
	if err == nil || !strings.Contains(err.Error(), "its summary.json would be replaced") {
		t.Fatalf("got %v", err)
	}
	if after, _ := os.ReadFile(filepath.Join(dir, "summary.json")); !bytes.Equal(before, after) {
		t.Fatal("the shard's summary.json was replaced")
	}
	if err := conformMerge([]string{"--out", t.TempDir(), dir}, &out); err != nil {
		t.Fatalf("another --out: %v", err)
	}
}
