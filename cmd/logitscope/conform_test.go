package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"logitscope/dump"
)

func conformCmd(args []string, out, errb *bytes.Buffer) error { return conform(args, out, errb) }

var (
	engineOnce sync.Once
	enginePath string
	engineErr  error
)

// engineWasm builds engine.wasm once per test binary. It lives at a fixed
// place in the temporary directory, replaced by rename, because no test
// outlives the others to clean up after it.
func engineWasm(t *testing.T) string {
	t.Helper()
	engineOnce.Do(func() {
		final := filepath.Join(os.TempDir(), "logitscope-conform-test-engine.wasm")
		tmp := fmt.Sprintf("%s.%d", final, os.Getpid())
		build := exec.Command("go", "build", "-buildmode=c-shared", "-o", tmp, "../../wasm")
		build.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if out, err := build.CombinedOutput(); err != nil {
			engineErr = fmt.Errorf("building engine.wasm: %v\n%s", err, out)
			return
		}
		engineErr = os.Rename(tmp, final)
		enginePath = final
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
	err := conform(args, &out, &errb)
	t.Logf("conform %s\n%s%s", strings.Join(args, " "), errb.String(), out.String())
	return out.String(), errb.String(), err
}

// writeSuite writes a suite with the given cases into dir, with a short
// panel (the corpus's first lines) beside it as panel.txt.
func writeSuite(t *testing.T, dir string, cases ...map[string]any) string {
	t.Helper()
	corpus, err := os.ReadFile("../../synth/corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "panel.txt"), corpus[:600], 0o644); err != nil {
		t.Fatal(err)
	}
	b, _ := json.MarshalIndent(map[string]any{"name": "t", "cases": cases}, "", " ")
	path := filepath.Join(dir, "suite.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// panelCase is a quick case on the short panel.
func panelCase(name, model, test string, th map[string]any) map[string]any {
	return map[string]any{"name": name, "model": model, "test": test, "panel": "panel.txt", "window": 32, "thresholds": th}
}

func readJUnit(t *testing.T, path string) junitSuites {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var j junitSuites
	if err := xml.Unmarshal(b, &j); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	if len(j.Suites) != 1 {
		t.Fatalf("%d testsuites, want 1", len(j.Suites))
	}
	return j
}

func readSummary(t *testing.T, out string) summary {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// The example suite passes end to end through engine.wasm, on a fresh
// cache, so that its on-the-fly quantization runs too.
func TestConformTinySuite(t *testing.T) {
	needGPU(t)
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

// Thresholds that cannot be met fail the run, and the table and the JUnit
// XML name the case and every metric past its bound.
func TestConformFailingThresholds(t *testing.T) {
	needGPU(t)
	dir := t.TempDir()
	suite := writeSuite(t, dir,
		panelCase("q8-ok", copyModel(t), "q8", map[string]any{"max_mean_kld": 1}),
		panelCase("q4-strict", copyModel(t), "q4", map[string]any{"max_mean_kld": 0, "min_same_top1": 1, "max_clear_flips": 100}))
	out, junit := filepath.Join(dir, "out"), filepath.Join(dir, "j.xml")
	table, _, err := runConform(t, "--suite", suite, "--engine", engineWasm(t), "--out", out, "--junit", junit)
	if err == nil || !strings.Contains(err.Error(), "1 of 2 cases failed") {
		t.Fatalf("err = %v", err)
	}
	line := lineWith(table, "q4-strict")
	for _, want := range []string{"fail", "mean_kld", "> max 0", "same_top1", "< min 1"} {
		if !strings.Contains(line, want) {
			t.Errorf("table line %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "clear_flips") {
		t.Errorf("a met threshold is named: %q", line)
	}
	j := readJUnit(t, junit)
	s := j.Suites[0]
	if s.Tests != 2 || s.Failures != 1 || s.Errors != 0 {
		t.Fatalf("junit: %d tests, %d failures, %d errors", s.Tests, s.Failures, s.Errors)
	}
	if s.Cases[0].Failure != nil || s.Cases[1].Failure == nil {
		t.Fatalf("junit cases: %+v", s.Cases)
	}
	if msg := s.Cases[1].Failure.Message; !strings.Contains(msg, "mean_kld") || !strings.Contains(msg, "same_top1") {
		t.Errorf("failure message %q does not name the metrics", msg)
	}
}

func lineWith(text, s string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// A case that cannot run is an error, and the cases after it still run.
func TestConformErrors(t *testing.T) {
	model := copyModel(t)
	for _, c := range []struct {
		name      string
		badModel  string
		engine    string
		wantError string // in the first case's JUnit error
		nextOK    bool
	}{
		{"bad model path", "no/such/model", "", "no/such/model", true},
		{"missing engine", model, filepath.Join(t.TempDir(), "none.wasm"), "make wasm", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			engine := c.engine
			if engine == "" {
				needGPU(t)
				engine = engineWasm(t)
			}
			dir := t.TempDir()
			suite := writeSuite(t, dir, panelCase("first", c.badModel, "q8", nil), panelCase("second", model, "q8", nil))
			out, junit := filepath.Join(dir, "out"), filepath.Join(dir, "j.xml")
			table, _, err := runConform(t, "--suite", suite, "--engine", engine, "--out", out, "--junit", junit)
			if err == nil || !strings.Contains(err.Error(), "errored") {
				t.Fatalf("err = %v", err)
			}
			cases := readJUnit(t, junit).Suites[0].Cases
			if len(cases) != 2 || cases[0].Error == nil || !strings.Contains(cases[0].Error.Message, c.wantError) {
				t.Fatalf("junit cases: %+v", cases)
			}
			if got := cases[1].Error == nil && cases[1].Failure == nil; got != c.nextOK {
				t.Errorf("second case passed: %v, want %v\n%s", got, c.nextOK, table)
			}
			if !strings.Contains(lineWith(table, "first"), "error") {
				t.Errorf("table:\n%s", table)
			}
		})
	}
}

// --shard i/n deals the cases out: the shards are disjoint and cover the
// suite. The native runtime runs them (on the CPU when there is no GPU),
// which also covers greedy prompts followed with --follow.
func TestConformShard(t *testing.T) {
	dir := t.TempDir()
	model := copyModel(t)
	var cases []map[string]any
	names := []string{"a", "b", "c", "d", "e"}
	for _, n := range names {
		cases = append(cases, map[string]any{"name": n, "model": model, "test": "q4", "prompts": []string{"Hi"}, "max_new": 2,
			"thresholds": map[string]any{}})
	}
	suite := writeSuite(t, dir, cases...)
	var all []string
	for i, want := range [][]string{{"a", "c", "e"}, {"b", "d"}} {
		out := filepath.Join(dir, fmt.Sprint(i))
		if _, _, err := runConform(t, "--suite", suite, "--runtime", "native", "--shard", fmt.Sprintf("%d/2", i+1), "--out", out); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range readSummary(t, out).Cases {
			got = append(got, c.Name)
			if c.Compare != "follow" {
				t.Errorf("%s: compare %q, want follow", c.Name, c.Compare)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("shard %d/2 ran %v, want %v", i+1, got, want)
		}
		all = append(all, got...)
	}
	slices.Sort(all)
	if !slices.Equal(all, names) {
		t.Errorf("the shards ran %v together", all)
	}
}

func TestParseShard(t *testing.T) {
	for _, c := range []struct {
		in   string
		want shardSpec
		err  bool
	}{
		{"", shardSpec{1, 1}, false}, {"1/2", shardSpec{1, 2}, false}, {"2/2", shardSpec{2, 2}, false},
		{"0/2", shardSpec{}, true}, {"3/2", shardSpec{}, true}, {"1/0", shardSpec{}, true},
		{"x/2", shardSpec{}, true}, {"1", shardSpec{}, true}, {"1/2/3", shardSpec{}, true}, {"-1/2", shardSpec{}, true},
	} {
		got, err := parseShard(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("parseShard(%q) = %v, %v", c.in, got, err)
		}
	}
	if got := (shardSpec{2, 3}).pick(7); !slices.Equal(got, []int{1, 4}) {
		t.Errorf("pick = %v", got)
	}
}

// A malformed suite is refused before any case runs, naming the problem.
func TestConformSuiteErrors(t *testing.T) {
	ok := `"name": "x", "model": "m", "test": "q8", "panel": "p.txt"`
	for _, c := range []struct{ name, cases, want string }{
		{"no cases", ``, "no cases"},
		{"unknown field", `{` + ok + `, "thresholds": {"max_kld": 1}}`, "max_kld"},
		{"prompts and panel", `{` + ok + `, "prompts": ["Hi"]}`, "either prompts or a panel"},
		{"neither", `{"name": "x", "model": "m", "test": "q8"}`, "either prompts or a panel"},
		{"no test", `{"name": "x", "model": "m", "panel": "p"}`, "no test variant"},
		{"duplicate", `{` + ok + `}, {` + ok + `}`, "share this name"},
		{"golden and prompts", `{"name": "x", "model": "m", "test": "q8", "prompts": ["a", "b"], "golden": "g"}`, "one prompt"},
		{"diff without golden", `{` + ok + `, "thresholds": {"max_abs_logit_diff": 1}}`, "needs a golden"},
		{"percent", `{` + ok + `, "thresholds": {"min_same_top1": 95}}`, "fraction"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.json")
			os.WriteFile(path, []byte(`{"name": "s", "cases": [`+c.cases+`]}`), 0o644)
			_, _, err := runConform(t, "--suite", path, "--out", t.TempDir())
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %v, want %q and the path", err, c.want)
			}
		})
	}
	for _, args := range [][]string{{}, {"--suite", "x.json", "--runtime", "js"}, {"--suite", "x.json", "--shard", "2/1"}} {
		if _, _, err := runConform(t, args...); err == nil {
			t.Errorf("conform %v succeeded", args)
		}
	}
}

func TestCheckThresholds(t *testing.T) {
	f, i := func(v float64) *float64 { return &v }, func(v int) *int { return &v }
	m := &caseMetrics{MeanKLD: 0.5, SameTop1: 0.9, ClearFlips: 3}
	for _, c := range []struct {
		name string
		th   thresholds
		want []string
	}{
		{"none", thresholds{}, nil},
		{"all met", thresholds{MaxMeanKLD: f(0.5), MinSameTop1: f(0.9), MaxClearFlips: i(3)}, nil},
		{"kld", thresholds{MaxMeanKLD: f(0.1)}, []string{"mean_kld 0.5 > max 0.1"}},
		{"all", thresholds{MaxMeanKLD: f(0), MinSameTop1: f(1), MaxClearFlips: i(0)},
			[]string{"mean_kld 0.5 > max 0", "same_top1 0.9000 < min 1", "clear_flips 3 > max 0"}},
	} {
		if got := checkThresholds(c.th, m); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// A golden dump passes when the reference reproduces it and fails, naming
// max_abs_logit_diff, when a logit moved by more than allowed.
func TestConformGolden(t *testing.T) {
	needGPU(t)
	dir := t.TempDir()
	model := copyModel(t)
	engine := engineWasm(t)
	suite := writeSuite(t, dir, panelCase("g", model, "q8", nil))
	first := filepath.Join(dir, "first")
	if _, _, err := runConform(t, "--suite", suite, "--engine", engine, "--out", first); err != nil {
		t.Fatal(err)
	}
	ref, err := dump.ReadFile(filepath.Join(first, "g", "ref.dump"))
	if err != nil {
		t.Fatal(err)
	}
	if err := dump.WriteFile(filepath.Join(dir, "same.dump"), ref); err != nil {
		t.Fatal(err)
	}
	ref.Data[len(ref.Data)/2] += 0.01
	if err := dump.WriteFile(filepath.Join(dir, "moved.dump"), ref); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		golden string
		limit  float64
		fail   string // "" for a pass
	}{
		{"same.dump", 0, ""},
		{"moved.dump", 0.02, ""},
		{"moved.dump", 0.001, "max_abs_logit_diff 0.01 > max 0.001"},
	} {
		g := panelCase("g", model, "q8", map[string]any{"max_abs_logit_diff": c.limit})
		g["golden"] = c.golden
		suite := writeSuite(t, dir, g)
		out := filepath.Join(dir, "out")
		table, _, err := runConform(t, "--suite", suite, "--engine", engine, "--out", out)
		got := readSummary(t, out).Cases[0]
		switch {
		case c.fail == "" && (err != nil || got.Status != "pass"):
			t.Errorf("%s within %g: %v\n%s", c.golden, c.limit, err, table)
		case c.fail != "" && (err == nil || len(got.Failures) != 1 || !strings.HasPrefix(got.Failures[0], c.fail)):
			t.Errorf("%s within %g: %v %q, want failure %q", c.golden, c.limit, err, got.Failures, c.fail)
		}
	}
}
