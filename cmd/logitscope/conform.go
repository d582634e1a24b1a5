package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"logitscope/checkpoint"
	"logitscope/dump"
	"logitscope/quant"
	"logitscope/synth"
	"logitscope/variant"
)

// conform runs a suite of capture-and-report cases against thresholds, so
// that CI can gate an engine change on what it does to the logits. Every
// case goes through the capture and report commands in-process, so a suite
// exercises exactly what a person running them by hand would.
func conform(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("conform", flag.ContinueOnError)
	fs.SetOutput(stderr)
	suitePath := fs.String("suite", "", "suite file (JSON; see conform/tiny.json) (required)")
	junitPath := fs.String("junit", "", "also write JUnit XML to FILE")
	outDir := fs.String("out", "", "directory for each case's dumps, receipts and reports (default: a new temporary directory)")
	shardFlag := fs.String("shard", "", "run only shard i of n (i/n, 1-based): the cases whose index mod n is i-1")
	enginePath := fs.String("engine", "", "engine.wasm for --runtime wasm (default $LOGITSCOPE_ENGINE, else "+defaultEngine+")")
	rt := fs.String("runtime", "wasm", "wasm (engine.wasm under wazero, on the GPU) or native (the Go engine)")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return fmt.Errorf("unexpected argument %q", pos[0])
	}
	if *suitePath == "" {
		return fmt.Errorf("--suite FILE is required")
	}
	if *rt != "wasm" && *rt != "native" {
		return fmt.Errorf("--runtime %q: want wasm or native", *rt)
	}
	shard, err := parseShard(*shardFlag)
	if err != nil {
		return err
	}
	s, err := loadSuite(*suitePath)
	if err != nil {
		return err
	}
	if *outDir == "" {
		if *outDir, err = os.MkdirTemp("", "logitscope-conform-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(*outDir, 0o755); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "conform: suite %s, runtime %s, output in %s\n", s.Name, *rt, *outDir)

	r := runner{runtime: *rt, engine: *enginePath, out: *outDir, log: stderr}
	picked := shard.pick(len(s.Cases))
	var results []caseResult
	start := time.Now()
	for k, i := range picked {
		c := s.Cases[i]
		fmt.Fprintf(stderr, "[%d/%d] %s ...\n", k+1, len(picked), c.Name)
		res := r.run(s, c)
		fmt.Fprintf(stderr, "[%d/%d] %s ... %s (%.1f s)\n", k+1, len(picked), c.Name, res.Status, res.Seconds)
		results = append(results, res)
	}
	sum := newSummary(s, *rt, shard, *outDir, results, time.Since(start))

	writeTable(stdout, results)
	if err := writeJSONFile(filepath.Join(*outDir, "summary.json"), sum); err != nil {
		return err
	}
	if *junitPath != "" {
		if err := writeJUnit(*junitPath, sum); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "%d passed, %d failed, %d errors; details in %s\n", sum.Passed, sum.Failed, sum.Errors, *outDir)
	if sum.Failed+sum.Errors > 0 {
		return fmt.Errorf("%d of %d cases failed and %d errored (suite %s)", sum.Failed, len(results), sum.Errors, s.Name)
	}
	return nil
}

// suite is a conformance suite file. Paths in it (model directories,
// panels, goldens) are relative to the suite file, so that a suite and
// its data can move together.
type suite struct {
	Name        string      `json:"name"`
	Description docLines    `json:"description,omitempty"`
	Cases       []suiteCase `json:"cases"`
	dir         string
}

// suiteCase compares a test variant with a reference variant of one model
// on either greedy prompts or a teacher-forced panel.
type suiteCase struct {
	Name       string     `json:"name"`
	Model      string     `json:"model"`               // a directory, or preset:NAME
	Reference  string     `json:"reference,omitempty"` // default f32
	Test       string     `json:"test"`
	Prompts    []string   `json:"prompts,omitempty"`
	MaxNew     int        `json:"max_new,omitempty"` // default 8
	Panel      string     `json:"panel,omitempty"`
	Window     int        `json:"window,omitempty"` // default 128, as capture's
	Golden     string     `json:"golden,omitempty"` // a dump the reference must match
	Thresholds thresholds `json:"thresholds"`
}

// thresholds are optional: a nil one is not checked. They are pointers so
// that a threshold of zero is a real bound rather than "unset".
type thresholds struct {
	MaxClearFlips   *int     `json:"max_clear_flips,omitempty"`
	MaxMeanKLD      *float64 `json:"max_mean_kld,omitempty"`
	MinSameTop1     *float64 `json:"min_same_top1,omitempty"`
	MaxAbsLogitDiff *float64 `json:"max_abs_logit_diff,omitempty"` // against golden; default 0 there
}

// loadSuite reads and checks a suite. A malformed suite stops the run
// before any case runs: a typo should not cost a CI run its captures.
func loadSuite(path string) (*suite, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a misspelt threshold must not silently pass
	s := &suite{dir: filepath.Dir(path)}
	if err := dec.Decode(s); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return s, nil
}

// docLines is a description as one string or, for a suite documented at
// length (JSON has no comments), a list of lines.
type docLines []string

func (d *docLines) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*d = docLines{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(d))
}

func (s *suite) check() error {
	if s.Name == "" {
		s.Name = "conform"
	}
	if len(s.Cases) == 0 {
		return fmt.Errorf("no cases")
	}
	seen := map[string]bool{}
	for i := range s.Cases {
		c := &s.Cases[i]
		if c.Name == "" {
			return fmt.Errorf("case %d has no name", i+1)
		}
		if seen[caseDirName(c.Name)] {
			return fmt.Errorf("case %q: two cases share this name", c.Name)
		}
		seen[caseDirName(c.Name)] = true
		if err := c.check(); err != nil {
			return fmt.Errorf("case %q: %v", c.Name, err)
		}
	}
	return nil
}

func (c *suiteCase) check() error {
	if c.Reference == "" {
		c.Reference = "f32"
	}
	if c.MaxNew == 0 {
		c.MaxNew = 8
	}
	if c.Window == 0 {
		c.Window = 128
	}
	t := c.Thresholds
	switch {
	case c.Model == "":
		return fmt.Errorf("no model")
	case c.Test == "":
		return fmt.Errorf("no test variant")
	case (len(c.Prompts) > 0) == (c.Panel != ""):
		return fmt.Errorf("give either prompts or a panel")
	case c.MaxNew < 1:
		return fmt.Errorf("max_new %d: must be at least 1", c.MaxNew)
	case c.Window < 2:
		return fmt.Errorf("window %d: a window needs at least 2 tokens", c.Window)
	case c.Golden != "" && len(c.Prompts) > 1:
		return fmt.Errorf("a golden dump matches one capture: give one prompt or a panel")
	case t.MaxAbsLogitDiff != nil && c.Golden == "":
		return fmt.Errorf("max_abs_logit_diff needs a golden dump")
	case t.MinSameTop1 != nil && (*t.MinSameTop1 < 0 || *t.MinSameTop1 > 1):
		return fmt.Errorf("min_same_top1 %g: a fraction, 0 to 1", *t.MinSameTop1)
	}
	return nil
}

// caseDirName keeps a case's directory inside --out whatever its name.
func caseDirName(name string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, strings.Trim(name, "."))
}

// shardSpec is --shard i/n, 1-based; the zero value runs every case.
type shardSpec struct{ I, N int }

func parseShard(s string) (shardSpec, error) {
	if s == "" {
		return shardSpec{1, 1}, nil
	}
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return shardSpec{}, fmt.Errorf("--shard %q: want i/n with 1 ≤ i ≤ n, e.g. 1/2", s)
	}
	return shardSpec{i, n}, nil
}

// pick is the indices of this shard's cases: a round-robin deal, so that
// shards stay balanced when a suite groups its slow cases together.
func (s shardSpec) pick(cases int) []int {
	var idx []int
	for i := range cases {
		if i%s.N == s.I-1 {
			idx = append(idx, i)
		}
	}
	return idx
}

// caseResult is one case's outcome, as summary.json records it.
type caseResult struct {
	Name     string       `json:"name"`
	Status   string       `json:"status"` // pass, fail or error
	Failures []string     `json:"failures,omitempty"`
	Error    string       `json:"error,omitempty"`
	Metrics  *caseMetrics `json:"metrics,omitempty"`
	Compare  string       `json:"compare,omitempty"` // how the rows line up: panel or follow
	Seconds  float64      `json:"seconds"`
	Dir      string       `json:"dir"`
}

type caseMetrics struct {
	Positions       int      `json:"positions"`
	MeanKLD         float64  `json:"mean_kld"`
	SameTop1        float64  `json:"same_top1"`
	Flips           int      `json:"flips"`
	ClearFlips      int      `json:"clear_flips"`
	MaxAbsLogitDiff *float64 `json:"max_abs_logit_diff,omitempty"`
}

// runner runs cases with the command's settings.
type runner struct {
	runtime, engine, out string
	log                  io.Writer // progress: quantizing
}

// run runs one case. Any error is the case's, not the suite's: the next
// case still runs.
func (r runner) run(s *suite, c suiteCase) caseResult {
	start := time.Now()
	res := caseResult{Name: c.Name, Dir: filepath.Join(r.out, caseDirName(c.Name))}
	m, compare, failures, err := r.measure(s, c, res.Dir)
	res.Seconds = time.Since(start).Seconds()
	res.Metrics, res.Compare, res.Failures = m, compare, failures
	switch {
	case err != nil:
		res.Status, res.Error = "error", oneLine(err.Error())
	case len(failures) > 0:
		res.Status = "fail"
	default:
		res.Status = "pass"
	}
	return res
}

// measure captures both sides, reports, and checks the thresholds.
func (r runner) measure(s *suite, c suiteCase, dir string) (*caseMetrics, string, []string, error) {
	if err := os.RemoveAll(dir); err != nil { // no stale dump may pass for this run's
		return nil, "", nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", nil, err
	}
	modelDir, err := resolveModel(s.dir, c.Model)
	if err != nil {
		return nil, "", nil, err
	}
	ck, err := checkpoint.Open(modelDir)
	if err != nil {
		return nil, "", nil, err
	}
	defer ck.Close()
	for _, v := range []string{c.Reference, c.Test} {
		if err := ensureVariant(ck, v, r.log); err != nil {
			return nil, "", nil, err
		}
	}
	logf, err := os.Create(filepath.Join(dir, "capture.log"))
	if err != nil {
		return nil, "", nil, err
	}
	defer logf.Close()

	var pairs [][2]string // reference and test dump of each capture
	compare := "panel"
	if c.Panel != "" {
		p, err := r.capturePanel(ck, s.path(c.Panel), c, dir, logf)
		if err != nil {
			return nil, "", nil, err
		}
		pairs = append(pairs, p)
	} else {
		compare = "follow"
		for i, prompt := range c.Prompts {
			p, err := r.capturePrompt(ck, prompt, i+1, c, dir, logf)
			if err != nil {
				return nil, "", nil, err
			}
			pairs = append(pairs, p)
		}
	}
	m, err := reportPairs(pairs, ck.TokenizerPath(), dir)
	if err != nil {
		return nil, compare, nil, err
	}
	failures := checkThresholds(c.Thresholds, m)
	if c.Golden != "" {
		diff, err := maxAbsDiff(s.path(c.Golden), pairs[0][0])
		if err != nil {
			return m, compare, failures, err
		}
		m.MaxAbsLogitDiff = &diff
		if limit := deref(c.Thresholds.MaxAbsLogitDiff); diff > limit {
			failures = append(failures, fmt.Sprintf("max_abs_logit_diff %.4g > max %g (reference vs golden %s)", diff, limit, c.Golden))
		}
	}
	return m, compare, failures, nil
}

// path resolves a path in the suite relative to the suite file.
func (s *suite) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(s.dir, p)
}

// resolveModel maps a case's model to a directory: preset:NAME is the
// synthetic preset (seed 0) from the cache, generated on first use.
func resolveModel(suiteDir, model string) (string, error) {
	if name, ok := strings.CutPrefix(model, "preset:"); ok {
		return synth.Cached(name, 0)
	}
	if filepath.IsAbs(model) {
		return model, nil
	}
	return filepath.Join(suiteDir, model), nil
}

// ensureVariant quantizes a scheme variant that the model lacks, so that a
// suite runs on a fresh checkout of a model.
func ensureVariant(ck *checkpoint.Checkpoint, name string, log io.Writer) error {
	scheme, err := quant.ParseScheme(name)
	if name == "f32" || err != nil {
		return nil // f32 needs nothing; a directory is capture's to check
	}
	dir := variant.DefaultDir(ck.Dir, name)
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err == nil {
		return nil
	}
	fmt.Fprintf(log, "quantizing %s to %s for the suite ...\n", ck.Dir, scheme)
	progress := func(done, total int, tensor string) {
		fmt.Fprintf(log, "\rquantize %s: %3d/%d tensors %-48.48s", scheme, done, total, tensor)
		if done == total {
			fmt.Fprintln(log)
		}
	}
	return variant.Write(ck, scheme, dir, variant.Options{Progress: progress})
}

// common is the capture flags both sides of a case share.
func (r runner) common(ck *checkpoint.Checkpoint, v string) []string {
	args := []string{"--model", ck.Dir, "--variant", v, "--runtime", r.runtime}
	if r.engine != "" {
		args = append(args, "--engine", r.engine)
	}
	return args
}

func (r runner) capturePanel(ck *checkpoint.Checkpoint, panel string, c suiteCase, dir string, log io.Writer) ([2]string, error) {
	p := [2]string{filepath.Join(dir, "ref.dump"), filepath.Join(dir, "test.dump")}
	for i, v := range []string{c.Reference, c.Test} {
		args := append(r.common(ck, v), "--panel", panel, "--window", strconv.Itoa(c.Window), "--dump-logits", p[i])
		if err := captureLogged(args, log); err != nil {
			return p, fmt.Errorf("%s capture: %w", v, err)
		}
	}
	return p, nil
}

// capturePrompt captures prompt n greedily on the reference, then on the
// test side following the reference's tokens (--follow), so that row i
// compares the same context on both sides instead of drifting after the
// first different token.
func (r runner) capturePrompt(ck *checkpoint.Checkpoint, prompt string, n int, c suiteCase, dir string, log io.Writer) ([2]string, error) {
	p := [2]string{filepath.Join(dir, fmt.Sprintf("ref-%d.dump", n)), filepath.Join(dir, fmt.Sprintf("test-%d.dump", n))}
	ref := append(r.common(ck, c.Reference), "--max-new", strconv.Itoa(c.MaxNew), "--dump-logits", p[0], prompt)
	if err := captureLogged(ref, log); err != nil {
		return p, fmt.Errorf("%s capture of prompt %d: %w", c.Reference, n, err)
	}
	test := append(r.common(ck, c.Test), "--follow", p[0], "--dump-logits", p[1])
	if err := captureLogged(test, log); err != nil {
		return p, fmt.Errorf("%s capture of prompt %d: %w", c.Test, n, err)
	}
	return p, nil
}

// captureLogged runs capture with its output in the case's log: the
// progress lines on stderr stay one per case.
func captureLogged(args []string, log io.Writer) error {
	fmt.Fprintf(log, "$ logitscope capture %s\n", strings.Join(args, " "))
	return capture(args, log, log)
}

// reportSummary is the part of report --json that thresholds read.
type reportSummary struct {
	Summary struct {
		Positions int `json:"positions"`
		KLD       struct {
			Value float64 `json:"value"`
		} `json:"kld_mean"`
		SameTop struct {
			Value float64 `json:"value"`
		} `json:"same_top"`
		Flips      int `json:"flips"`
		ClearFlips int `json:"clear_flips"`
	} `json:"summary"`
}

// reportPairs runs report on every pair (text and JSON, both kept in dir)
// and pools the metrics over all positions, weighting each capture by its
// number of rows.
func reportPairs(pairs [][2]string, tokenizerPath, dir string) (*caseMetrics, error) {
	m := &caseMetrics{}
	var kld, same float64
	for i, p := range pairs {
		suffix := ""
		if len(pairs) > 1 {
			suffix = fmt.Sprintf("-%d", i+1)
		}
		args := []string{"--ref", p[0], "--test", p[1], "--tokenizer", tokenizerPath}
		var text, js bytes.Buffer
		if err := report(args, &text, io.Discard); err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		if err := report(append(args, "--json"), &js, io.Discard); err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, "report"+suffix+".txt"), text.Bytes(), 0o644); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "report"+suffix+".json"), js.Bytes(), 0o644); err != nil {
			return nil, err
		}
		var r reportSummary
		if err := json.Unmarshal(js.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("report --json: %w", err)
		}
		s := r.Summary
		m.Positions += s.Positions
		kld += s.KLD.Value * float64(s.Positions)
		same += s.SameTop.Value * float64(s.Positions)
		m.Flips += s.Flips
		m.ClearFlips += s.ClearFlips
	}
	if m.Positions > 0 {
		m.MeanKLD, m.SameTop1 = kld/float64(m.Positions), same/float64(m.Positions)
	}
	return m, nil
}

// checkThresholds names every metric outside its bound, not just the
// first: one CI run should show everything a change broke.
func checkThresholds(t thresholds, m *caseMetrics) []string {
	var f []string
	if t.MaxMeanKLD != nil && !(m.MeanKLD <= *t.MaxMeanKLD) {
		f = append(f, fmt.Sprintf("mean_kld %.4g > max %g", m.MeanKLD, *t.MaxMeanKLD))
	}
	if t.MinSameTop1 != nil && !(m.SameTop1 >= *t.MinSameTop1) {
		f = append(f, fmt.Sprintf("same_top1 %.4f < min %g", m.SameTop1, *t.MinSameTop1))
	}
	if t.MaxClearFlips != nil && m.ClearFlips > *t.MaxClearFlips {
		f = append(f, fmt.Sprintf("clear_flips %d > max %d", m.ClearFlips, *t.MaxClearFlips))
	}
	return f
}

// maxAbsDiff is the largest |golden − got| over every logit; a NaN on
// either side counts as infinitely far.
func maxAbsDiff(goldenPath, gotPath string) (float64, error) {
	g, _, err := dump.ReadAny(goldenPath)
	if err != nil {
		return 0, fmt.Errorf("golden: %w", err)
	}
	d, _, err := dump.ReadAny(gotPath)
	if err != nil {
		return 0, err
	}
	if g.Rows != d.Rows || g.Vocab != d.Vocab {
		return 0, fmt.Errorf("golden %s is %d rows × %d vocab, the reference capture %d × %d: not the same request",
			goldenPath, g.Rows, g.Vocab, d.Rows, d.Vocab)
	}
	var worst float64
	for i := range g.Data {
		diff := math.Abs(float64(g.Data[i]) - float64(d.Data[i]))
		if math.IsNaN(diff) {
			return math.Inf(1), nil
		}
		worst = max(worst, diff)
	}
	return worst, nil
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// summary is summary.json: the run's settings and every case's result.
type summary struct {
	Suite   string       `json:"suite"`
	Runtime string       `json:"runtime"`
	Shard   string       `json:"shard"`
	Out     string       `json:"out"`
	Passed  int          `json:"passed"`
	Failed  int          `json:"failed"`
	Errors  int          `json:"errors"`
	Seconds float64      `json:"seconds"`
	Cases   []caseResult `json:"cases"`
}

func newSummary(s *suite, rt string, sh shardSpec, out string, results []caseResult, took time.Duration) summary {
	sum := summary{Suite: s.Name, Runtime: rt, Shard: fmt.Sprintf("%d/%d", sh.I, sh.N), Out: out,
		Seconds: took.Seconds(), Cases: results}
	if sum.Cases == nil {
		sum.Cases = []caseResult{}
	}
	for _, r := range results {
		switch r.Status {
		case "pass":
			sum.Passed++
		case "fail":
			sum.Failed++
		default:
			sum.Errors++
		}
	}
	return sum
}

func writeTable(w io.Writer, results []caseResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CASE\tRESULT\tMEAN KLD\tSAME TOP-1\tCLEAR FLIPS\tTIME\tDETAIL")
	for _, r := range results {
		kld, same, clear := "-", "-", "-"
		if m := r.Metrics; m != nil {
			kld, same, clear = fmt.Sprintf("%.4g", m.MeanKLD), fmt.Sprintf("%.2f%%", 100*m.SameTop1), strconv.Itoa(m.ClearFlips)
		}
		detail := strings.Join(r.Failures, "; ")
		if r.Error != "" {
			detail = r.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%.1f s\t%s\n", r.Name, r.Status, kld, same, clear, r.Seconds, detail)
	}
	tw.Flush()
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// JUnit XML as Jenkins, GitLab and GitHub test reporters read it.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure,omitempty"`
	Error     *junitProblem `xml:"error,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

func writeJUnit(path string, sum summary) error {
	secs := func(s float64) string { return strconv.FormatFloat(s, 'f', 3, 64) }
	js := junitSuite{Name: sum.Suite, Tests: len(sum.Cases), Failures: sum.Failed, Errors: sum.Errors, Time: secs(sum.Seconds),
		Properties: []junitProperty{{"runtime", sum.Runtime}, {"shard", sum.Shard}, {"out", sum.Out}}}
	for _, r := range sum.Cases {
		jc := junitCase{Name: r.Name, Classname: "logitscope.conform." + sum.Suite, Time: secs(r.Seconds),
			SystemOut: "outputs: " + r.Dir}
		switch r.Status {
		case "fail":
			msg := strings.Join(r.Failures, "; ")
			jc.Failure = &junitProblem{Message: msg, Type: "threshold", Text: strings.Join(r.Failures, "\n")}
		case "error":
			jc.Error = &junitProblem{Message: r.Error, Type: "error", Text: r.Error}
		}
		js.Cases = append(js.Cases, jc)
	}
	doc := junitSuites{Name: sum.Suite, Tests: js.Tests, Failures: js.Failures, Errors: js.Errors, Time: js.Time,
		Suites: []junitSuite{js}}
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	b = append([]byte(xml.Header), append(b, '\n')...)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("--junit: %w", err)
	}
	return nil
}
