package conform

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"logitscope/internal/format/dump"
	"logitscope/internal/format/receipt"
	"logitscope/internal/gpu/native/nativetest"
	"logitscope/internal/model/hubquant"
	"logitscope/internal/model/synth"
	"logitscope/internal/run/capture"
)

var built struct {
	once sync.Once
	path string
	err  error
}

// engineWasm builds engine.wasm once per test binary.
func engineWasm(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "logitscope-conform-")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(dir, "engine.wasm")
		cmd := exec.Command("go", "build", "-buildmode=c-shared", "-o", built.path, "../../../wasm")
		cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm")
		if out, err := cmd.CombinedOutput(); err != nil {
			built.err = fmt.Errorf("building engine.wasm: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.path != "" {
		os.RemoveAll(filepath.Dir(built.path))
	}
	os.Exit(code)
}

// tinyModel writes the tiny preset into a fresh directory: each test
// quantizes its own variants.
func tinyModel(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	if err := synth.Write(synth.Presets["tiny"], dir, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeSuite writes a suite with the given cases into dir, with a short
// panel (the corpus's first lines) beside it as panel.txt, and loads it.
func writeSuite(t *testing.T, dir string, cases ...map[string]any) *Suite {
	t.Helper()
	corpus, err := os.ReadFile("../../model/synth/corpus.txt")
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
	s, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// panelCase is a quick case on the short panel.
func panelCase(name, model, test string, th map[string]any) map[string]any {
	return map[string]any{"name": name, "model": model, "test": test, "panel": "panel.txt", "window": 32, "thresholds": th}
}

// run runs a suite through engine.wasm (the wasm runtime) or natively.
func run(t *testing.T, s *Suite, runtime, engine, out string, shard Shard) *Summary {
	t.Helper()
	var log strings.Builder
	sum, err := Run(s, Options{Capture: capture.Options{Device: "auto", Runtime: runtime, Engine: engine}, Out: out, Shard: shard, Log: &log})
	t.Logf("%s", log.String())
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	sum.WriteTable(&table)
	t.Logf("\n%s", table.String())
	return sum
}

// Thresholds that cannot be met fail the case, and the JUnit XML names the
// case and every metric past its bound, and none that was met.
func TestRunFailingThresholds(t *testing.T) {
	nativetest.Device(t)
	model := tinyModel(t)
	s := writeSuite(t, t.TempDir(),
		panelCase("q8-ok", model, "q8", map[string]any{"max_mean_kld": 1}),
		panelCase("q4-strict", model, "q4", map[string]any{"max_mean_kld": 0, "min_same_top1": 1, "max_clear_flips": 100}))
	sum := run(t, s, "wasm", engineWasm(t), t.TempDir(), Shard{})
	if err := sum.Err(); err == nil || !strings.Contains(err.Error(), "1 of 2 cases failed") {
		t.Fatalf("Err() = %v", err)
	}
	f := sum.Cases[1].Failures
	if sum.Cases[0].Status != "pass" || sum.Cases[1].Status != "fail" || len(f) != 2 ||
		!strings.HasPrefix(f[0], "mean_kld") || !strings.Contains(f[0], "> max 0") ||
		!strings.HasPrefix(f[1], "same_top1") || !strings.Contains(f[1], "< min 1") {
		t.Fatalf("cases: %+v", sum.Cases)
	}
	js := sum.JUnit().Suites[0]
	if js.Tests != 2 || js.Failures != 1 || js.Errors != 0 || js.Cases[0].Failure != nil || js.Cases[1].Failure == nil {
		t.Fatalf("junit: %+v", js)
	}
	if msg := js.Cases[1].Failure.Message; !strings.Contains(msg, "mean_kld") || !strings.Contains(msg, "same_top1") || strings.Contains(msg, "clear_flips") {
		t.Errorf("failure message %q", msg)
	}
	for _, f := range []string{"report.txt", "report.json", "ref.dump", "ref.dump.receipt.json", "test.dump", "capture.log"} {
		if _, err := os.Stat(filepath.Join(sum.Cases[1].Dir, f)); err != nil {
			t.Error(err)
		}
	}
}

// A case that cannot run is an error, named in the result, and the cases
// after it still run.
func TestRunErrors(t *testing.T) {
	model := tinyModel(t)
	// A valid module without the engine's exports, which once panicked the
	// host at the first call and ended the whole run.
	noExports := filepath.Join(t.TempDir(), "no-exports.wasm")
	if err := os.WriteFile(noExports, []byte("\x00asm\x01\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		badModel  string
		engine    string
		wantError string
		nextOK    bool
	}{
		{"bad model path", "no/such/model", "", "no/such/model", true},
		{"missing engine", model, filepath.Join(t.TempDir(), "none.wasm"), "make wasm", false},
		{"engine without exports", model, noExports, noExports + ": host: not an engine.wasm (wasm/ABI.md): exports no _initialize; no ls_error", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			engine := c.engine
			if engine == "" {
				nativetest.Device(t)
				engine = engineWasm(t)
			}
			s := writeSuite(t, t.TempDir(), panelCase("first", c.badModel, "q8", nil), panelCase("second", model, "q8", nil))
			sum := run(t, s, "wasm", engine, t.TempDir(), Shard{})
			if err := sum.Err(); err == nil || !strings.Contains(err.Error(), "errored") {
				t.Fatalf("Err() = %v", err)
			}
			if r := sum.Cases[0]; r.Status != "error" || !strings.Contains(r.Error, c.wantError) {
				t.Fatalf("first case: %+v", r)
			}
			if got := sum.Cases[1].Status == "pass"; got != c.nextOK {
				t.Errorf("second case passed: %v, want %v (%+v)", got, c.nextOK, sum.Cases[1])
			}
		})
	}
}

// Shards deal the cases out: disjoint, covering the suite. The native
// runtime runs them (on the CPU when there is no GPU), on greedy prompts
// that the test side follows.
func TestRunShard(t *testing.T) {
	model := tinyModel(t)
	names := []string{"a", "b", "c", "d", "e"}
	var cases []map[string]any
	for _, n := range names {
		cases = append(cases, map[string]any{"name": n, "model": model, "test": "q4", "prompts": []string{"Hi"}, "max_new": 2,
			"thresholds": map[string]any{}})
	}
	s := writeSuite(t, t.TempDir(), cases...)
	var all []string
	for i, want := range [][]string{{"a", "c", "e"}, {"b", "d"}} {
		sum := run(t, s, "native", "", t.TempDir(), Shard{i + 1, 2})
		var got []string
		for _, c := range sum.Cases {
			got = append(got, c.Name)
			if c.Compare != "follow" || c.Status != "pass" || c.Metrics.Positions != 2 {
				t.Errorf("%s: %+v", c.Name, c)
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
		want Shard
		err  bool
	}{
		{"", Shard{1, 1}, false}, {"1/2", Shard{1, 2}, false}, {"2/2", Shard{2, 2}, false},
		{"0/2", Shard{}, true}, {"3/2", Shard{}, true}, {"1/0", Shard{}, true},
		{"x/2", Shard{}, true}, {"1", Shard{}, true}, {"1/2/3", Shard{}, true}, {"-1/2", Shard{}, true},
	} {
		got, err := ParseShard(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("ParseShard(%q) = %v, %v", c.in, got, err)
		}
	}
	if got := (Shard{2, 3}).Pick(7); !slices.Equal(got, []int{1, 4}) {
		t.Errorf("Pick = %v", got)
	}
}

// A malformed suite is refused before any case runs, naming the problem
// and the file.
func TestLoadErrors(t *testing.T) {
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
		{"negative kld", `{` + ok + `, "thresholds": {"max_mean_kld": -0.1}}`, "max_mean_kld -0.1"},
		{"negative flips", `{` + ok + `, "thresholds": {"max_clear_flips": -1}}`, "max_clear_flips -1"},
		{"negative diff", `{` + ok + `, "golden": "p.txt", "thresholds": {"max_abs_logit_diff": -1}}`, "max_abs_logit_diff -1"},
		{"name ..", `{"name": "..", "model": "m", "test": "q8", "panel": "p"}`, `name ".."`},
		{"name with a slash", `{"name": "../up", "model": "m", "test": "q8", "panel": "p"}`, `name "../up"`},
		{"no name", `{"model": "m", "test": "q8", "panel": "p"}`, "case 1: no name"},
		{"missing golden", `{` + ok + `, "golden": "none.dump"}`, "none.dump"},
		{"trailing data", `{` + ok + `}]} {`, "after the suite"},
		{"domains without a panel", `{"name": "x", "model": "m", "test": "q8", "prompts": ["a"], "domains": {"code": {"max_mean_kld": 1}}}`, "domains: a panel's windows have domains"},
		{"a domain's golden", `{` + ok + `, "domains": {"code": {"max_abs_logit_diff": 1}}}`, `domains "code": max_abs_logit_diff is a golden dump's`},
		{"a domain's negative kld", `{` + ok + `, "domains": {"code": {"max_mean_kld": -1}}}`, `domains "code": max_mean_kld -1`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			os.WriteFile(filepath.Join(dir, "p.txt"), []byte("panel"), 0o644)
			path := filepath.Join(dir, "s.json")
			os.WriteFile(path, []byte(`{"name": "s", "cases": [`+c.cases+`]}`), 0o644)
			_, err := Load(path)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("err = %v, want %q and the path", err, c.want)
			}
		})
	}
}

func TestCheckThresholds(t *testing.T) {
	f, i := func(v float64) *float64 { return &v }, func(v int) *int { return &v }
	m := &Metrics{MeanKLD: 0.5, SameTop1: 0.9, ClearFlips: 3}
	for _, c := range []struct {
		name string
		th   Thresholds
		want []string
	}{
		{"none", Thresholds{}, nil},
		{"all met", Thresholds{MaxMeanKLD: f(0.5), MinSameTop1: f(0.9), MaxClearFlips: i(3)}, nil},
		{"kld", Thresholds{MaxMeanKLD: f(0.1)}, []string{"mean_kld 0.5 > max 0.1"}},
		{"all", Thresholds{MaxMeanKLD: f(0), MinSameTop1: f(1), MaxClearFlips: i(0)},
			[]string{"mean_kld 0.5 > max 0", "same_top1 0.9000 < min 1", "clear_flips 3 > max 0"}},
	} {
		if got := checkThresholds(c.th, m); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// A golden dump passes when the reference reproduces it and fails, naming
// max_abs_logit_diff, when a logit moved by more than allowed.
func TestRunGolden(t *testing.T) {
	nativetest.Device(t)
	dir := t.TempDir()
	model := tinyModel(t)
	engine := engineWasm(t)
	first := filepath.Join(dir, "first")
	if sum := run(t, writeSuite(t, dir, panelCase("g", model, "q8", nil)), "wasm", engine, first, Shard{}); sum.Err() != nil {
		t.Fatal(sum.Err())
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
		got := run(t, writeSuite(t, dir, g), "wasm", engine, filepath.Join(dir, "out"), Shard{}).Cases[0]
		switch {
		case c.fail == "" && got.Status != "pass":
			t.Errorf("%s within %g: %+v", c.golden, c.limit, got)
		case c.fail != "" && (got.Status != "fail" || len(got.Failures) != 1 || !strings.HasPrefix(got.Failures[0], c.fail)):
			t.Errorf("%s within %g: %+v, want failure %q", c.golden, c.limit, got, c.fail)
		}
	}
}

// The families suite passes through engine.wasm, generating its presets
// in a fresh cache (tiny.json runs in the command's own test).
func TestFamiliesSuite(t *testing.T) {
	nativetest.Device(t)
	t.Setenv("LOGITSCOPE_CACHE", t.TempDir())
	s, err := Load("families.json")
	if err != nil {
		t.Fatal(err)
	}
	sum := run(t, s, "wasm", engineWasm(t), t.TempDir(), Shard{})
	if err := sum.Err(); err != nil || sum.Passed != len(s.Cases) {
		t.Fatalf("%d of %d passed: %v", sum.Passed, len(s.Cases), err)
	}
}

// The formats suite passes through engine.wasm (natively where a case
// rounds activations): every hub format's writer, reader and the lookup
// kernels on the trained demo model, each case's checkpoint written into
// its directory with the format's config, and its receipt naming the
// format.
func TestFormatsSuite(t *testing.T) {
	nativetest.Device(t)
	s, err := Load("formats.json")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	sum := run(t, s, "wasm", engineWasm(t), out, Shard{})
	if err := sum.Err(); err != nil || sum.Passed != len(s.Cases) {
		t.Fatalf("%d of %d passed: %v", sum.Passed, len(s.Cases), err)
	}
	for _, c := range s.Cases {
		rc, err := receipt.Read(receipt.Path(filepath.Join(out, c.Name, "test.dump")))
		if err != nil {
			t.Fatal(err)
		}
		if rc.Hub == nil || !hubquant.Is(filepath.Join(out, c.Name, "hub")) {
			t.Errorf("%s: the test side's receipt records hub %+v", c.Name, rc.Hub)
		}
	}
}

// A case may bound each domain of a panel in the seed's layout on its
// own: a domain past its bound fails the case naming it, a domain no
// window has fails too, and summary.json has every domain's measures.
func TestRunDomains(t *testing.T) {
	model := tinyModel(t)
	dir := t.TempDir()
	for _, f := range []string{"seed-panel.jsonl", "seed-panel.jsonl.receipt.json"} {
		b, err := os.ReadFile(filepath.Join("../session/testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	c := map[string]any{"name": "domains", "model": model, "test": "q4", "panel": "seed-panel.jsonl", "thresholds": map[string]any{},
		"domains": map[string]any{"code": map[string]any{"max_mean_kld": 0}, "prose": map[string]any{"max_mean_kld": 1000}, "poetry": map[string]any{"max_clear_flips": 0}}}
	s := writeSuite(t, dir, c)
	sum := run(t, s, "native", "", t.TempDir(), Shard{})
	got := sum.Cases[0]
	want := []string{"domain code: mean_kld", "domain poetry: no window of the panel is in it"}
	if got.Status != "fail" || len(got.Failures) != 2 || !strings.HasPrefix(got.Failures[0], want[0]) || got.Failures[1] != want[1] {
		t.Fatalf("%s: %q; want failures starting %q", got.Status, got.Failures, want)
	}
	d := got.Metrics.Domains
	if d["code"].Positions != 83 || d["math"].Positions != 60 || d["prose"].Positions != 84 || got.Metrics.Positions != 227 {
		t.Fatalf("domains %+v of %d positions", d, got.Metrics.Positions)
	}
}
