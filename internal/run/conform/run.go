package conform

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/receipt"
	"logitscope/internal/model/synth"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/internal/run/capture"
	"logitscope/internal/run/session"
	"logitscope/internal/sys/progress"
	"logitscope/internal/text/chat"
	"logitscope/internal/text/tokenizer"
)

// Options say how to run a suite.
type Options struct {
	// Capture is where the cases run (runtime, engine.wasm, device); each
	// case's capture lines go to its own capture.log, and so does their
	// progress unless Capture.Progress shows it (a terminal's bar).
	Capture capture.Options
	// Out is the directory of each case's outputs (Out/<name>/: dumps,
	// receipts, capture.log, report.txt, report.json) and summary.json.
	Out   string
	Shard Shard
	// Log receives a line as each case starts and ends.
	Log io.Writer
	// AllSnapshots writes every case's snapshot, not only a failing
	// case's (Result.Snapshots).
	AllSnapshots bool
	// Share, if set, posts a snapshot document and returns its link
	// (Result.Links): the CLI's --share SERVER.
	Share func(doc []byte) (link string, err error)
}

// Result is one case's outcome, as summary.json records it.
type Result struct {
	Name     string   `json:"name"`
	Status   string   `json:"status"` // pass, fail or error
	Failures []string `json:"failures,omitempty"`
	Error    string   `json:"error,omitempty"`
	Metrics  *Metrics `json:"metrics,omitempty"`
	Compare  string   `json:"compare,omitempty"` // how the rows line up: panel or follow
	Seconds  float64  `json:"seconds"`
	Dir      string   `json:"dir"`
	// Snapshots are the case's documents for the page (a failing case's,
	// or every case's with Options.AllSnapshots), one per pair of
	// captures: Dir/snapshot.json, or snapshot-<i>.json for several.
	// Links are where Options.Share posted them, in the same order.
	Snapshots []string `json:"snapshots,omitempty"`
	Links     []string `json:"links,omitempty"`
}

// Metrics are what thresholds hold a case to, pooled over all its
// captures' positions.
type Metrics struct {
	Positions       int      `json:"positions"`
	MeanKLD         float64  `json:"mean_kld"`
	SameTop1        float64  `json:"same_top1"`
	Flips           int      `json:"flips"`
	ClearFlips      int      `json:"clear_flips"`
	MaxAbsLogitDiff *float64 `json:"max_abs_logit_diff,omitempty"`
	// TopUnit is the sweep's first unit; RecipeMeanKLD and RecipeBPW the
	// recipe's measure and size (Case.Sweep, Case.Recipe).
	TopUnit       string   `json:"top_unit,omitempty"`
	RecipeMeanKLD *float64 `json:"recipe_mean_kld,omitempty"`
	RecipeBPW     *float64 `json:"recipe_bpw,omitempty"`
	// Domains are the same measures over each domain's windows, for a
	// panel whose windows have domains.
	Domains map[string]*Metrics `json:"domains,omitempty"`
}

// Summary is summary.json: the run's settings and every case's result.
type Summary struct {
	Suite string `json:"suite"`
	// SuiteSHA256 is the suite file's, and SuiteCases its number of cases
	// (a shard runs some of them): what Merge checks shards against.
	SuiteSHA256 string `json:"suite_sha256,omitempty"`
	SuiteCases  int    `json:"suite_cases"`
	Runtime     string `json:"runtime"`
	// Shard is the shard run, i/n; a merged summary's is "1-n/n".
	Shard   string   `json:"shard"`
	Out     string   `json:"out"`
	Passed  int      `json:"passed"`
	Failed  int      `json:"failed"`
	Errors  int      `json:"errors"`
	Seconds float64  `json:"seconds"`
	Cases   []Result `json:"cases"`
}

// Err says how many cases failed or errored; nil when all passed.
func (s *Summary) Err() error {
	if s.Failed+s.Errors == 0 {
		return nil
	}
	return fmt.Errorf("%d of %d cases failed and %d errored (suite %s)", s.Failed, len(s.Cases), s.Errors, s.Suite)
}

// Run runs this shard's cases of s in order and writes summary.json. A
// case that cannot run is an error of that case: the next one still runs.
func Run(s *Suite, opt Options) (*Summary, error) {
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	if err := os.MkdirAll(opt.Out, 0o755); err != nil {
		return nil, err
	}
	sum := &Summary{Suite: s.Name, SuiteSHA256: s.sha256, SuiteCases: len(s.Cases), Runtime: opt.Capture.Runtime,
		Shard: opt.Shard.String(), Out: opt.Out, Cases: []Result{}}
	picked := opt.Shard.Pick(len(s.Cases))
	start := time.Now()
	for k, i := range picked {
		c := s.Cases[i]
		fmt.Fprintf(opt.Log, "[%d/%d] %s ...\n", k+1, len(picked), c.Name)
		r := runCase(s, c, opt)
		fmt.Fprintf(opt.Log, "[%d/%d] %s ... %s (%.1f s)\n", k+1, len(picked), c.Name, r.Status, r.Seconds)
		for _, f := range r.Failures {
			fmt.Fprintf(opt.Log, "    %s%s\n", f, r.viewHint())
		}
		sum.Cases = append(sum.Cases, r)
		switch r.Status {
		case "pass":
			sum.Passed++
		case "fail":
			sum.Failed++
		default:
			sum.Errors++
		}
	}
	sum.Seconds = time.Since(start).Seconds()
	return sum, sum.Write(opt.Out)
}

// Write writes the summary as DIR/summary.json.
func (s *Summary) Write(dir string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "summary.json"), append(b, '\n'), 0o644)
}

// runCase runs one case into Out/<name>/.
func runCase(s *Suite, c Case, opt Options) Result {
	start := time.Now()
	r := Result{Name: c.Name, Dir: filepath.Join(opt.Out, c.Name)}
	m, compare, failures, docs, err := measure(s, c, r.Dir, opt.Capture)
	r.Seconds = time.Since(start).Seconds()
	r.Metrics, r.Compare, r.Failures = m, compare, failures
	switch {
	case err != nil:
		r.Status, r.Error = "error", strings.Join(strings.Fields(err.Error()), " ")
	case len(failures) > 0:
		r.Status = "fail"
	default:
		r.Status = "pass"
	}
	if r.Status == "fail" || r.Status == "pass" && opt.AllSnapshots {
		if err := r.writeSnapshots(s.Name, docs, opt); err != nil {
			r.Status, r.Error = "error", "snapshot: "+err.Error()
		}
	}
	return r
}

// writeSnapshots writes the case's documents beside its dumps, each
// naming the case and what it failed, and posts them when opt.Share is
// set. A refused post is logged, not a failure of the case: the snapshot
// file is there either way.
func (r *Result) writeSnapshots(suite string, docs []*snapshot.Doc, opt Options) error {
	for i, d := range docs {
		d.Conform = &snapshot.Conform{Suite: suite, Case: r.Name, Pair: i + 1, Pairs: len(docs), Failures: r.Failures}
		b, err := d.Marshal()
		if err != nil {
			return err
		}
		name := "snapshot.json"
		if len(docs) > 1 {
			name = fmt.Sprintf("snapshot-%d.json", i+1)
		}
		path := filepath.Join(r.Dir, name)
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
		r.Snapshots = append(r.Snapshots, path)
		if opt.Share == nil {
			continue
		}
		link, err := opt.Share(b)
		if err != nil {
			fmt.Fprintf(opt.Log, "%s: %s not shared: %v\n", r.Name, path, err)
			link = ""
		}
		r.Links = append(r.Links, link)
	}
	return nil
}

// viewHint is what a failure line ends with: where to see the positions
// behind it, the shared link when there is one, else the snapshot file.
func (r *Result) viewHint() string {
	var where []string
	for i, p := range r.Snapshots {
		if i < len(r.Links) && r.Links[i] != "" {
			where = append(where, r.Links[i])
		} else {
			where = append(where, p)
		}
	}
	if len(where) == 0 {
		return ""
	}
	return "  view: " + strings.Join(where, " ")
}

// side is one capture of a case and where it was saved.
type side struct {
	path string
	cap  *capture.Capture
	rc   *receipt.Receipt
}

// measure captures both sides, compares them, and checks the thresholds;
// docs are each pair's comparison as the page shows it.
func measure(s *Suite, c Case, dir string, co capture.Options) (*Metrics, string, []string, []*snapshot.Doc, error) {
	if err := os.RemoveAll(dir); err != nil { // no stale dump may pass for this run's
		return nil, "", nil, nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", nil, nil, err
	}
	modelDir, err := resolveModel(s.dir, c.Model)
	if err != nil {
		return nil, "", nil, nil, err
	}
	ck, err := checkpoint.Open(modelDir)
	if err != nil {
		return nil, "", nil, nil, err
	}
	defer ck.Close()
	logf, err := os.Create(filepath.Join(dir, "capture.log"))
	if err != nil {
		return nil, "", nil, nil, err
	}
	defer logf.Close()
	co.Log = logf
	if co.Progress == nil {
		co.Progress = progress.NewLines(logf)
	}
	for _, v := range []string{c.Reference, c.Test} {
		// A scheme the model lacks is quantized first; f32 needs nothing,
		// and a directory is the capture's to check.
		if scheme, err := quant.ParseScheme(v); err == nil {
			if _, err := variant.Ensure(ck, scheme, logf); err != nil {
				return nil, "", nil, nil, err
			}
		}
	}
	tok, err := tokenizer.Load(ck.TokenizerPath())
	if err != nil {
		return nil, "", nil, nil, err
	}
	tmpl, err := chat.ConfigBeside(ck.TokenizerPath())
	if err != nil {
		return nil, "", nil, nil, err
	}
	test, tco, err := testSide(s, c, ck, co, dir, logf)
	if err != nil {
		return nil, "", nil, nil, err
	}
	run := func(variant string, req session.Request, follow, path string) (side, error) {
		fmt.Fprintf(logf, "capture %s %s -> %s\n", variant, req.Mode, path)
		o := co
		if variant == test {
			o = tco
		}
		cp, err := capture.Run(ck, variant, req, o)
		if err != nil {
			return side{}, fmt.Errorf("%s capture: %w", variant, err)
		}
		rc, err := capture.Save(path, ck, capture.ReceiptRequest(req, follow), cp)
		// The rows are in the dump now, which report reads a block at a
		// time: holding them too would keep every side's rows to the end.
		cp.Rows, cp.Routes = nil, nil
		return side{path, cp, rc}, err
	}

	var pairs [][2]side
	var windows [][]int
	compare := "panel"
	if c.Panel != "" {
		prefix := chat.RawPrefix(tok, tmpl)
		panel, err := session.ReadPanelFile(s.path(c.Panel), tok, c.Window, prefix)
		if err != nil {
			return nil, compare, nil, nil, err
		}
		windows, co.Panel = panel.Tokens(), panel.Receipt // the receipts bind the panel's windows, domains included
		req := session.Request{Mode: session.Panel, Windows: windows, Prefix: prefix}
		var p [2]side
		for i, v := range []string{c.Reference, test} {
			if p[i], err = run(v, req, "", filepath.Join(dir, []string{"ref", "test"}[i]+".dump")); err != nil {
				return nil, compare, nil, nil, err
			}
		}
		pairs = append(pairs, p)
	} else {
		// Each prompt greedily on the reference, then the test side fed the
		// reference's tokens, so that row i compares the same context on
		// both sides instead of drifting after the first different token.
		compare = "follow"
		stops := session.Stops(ck.Generation)
		// Prompts are rendered with the checkpoint's own chat_template.
		for i, prompt := range c.Prompts {
			text, err := chat.Render(tmpl, tokenizer.Turns("", prompt), true)
			if err != nil {
				return nil, compare, nil, nil, fmt.Errorf("prompt %d: %w", i+1, err)
			}
			greedy := session.Request{Mode: session.Greedy, MaxNew: c.MaxNew, Stops: stops, PromptIDs: tok.Encode(text)}
			ref, err := run(c.Reference, greedy, "", filepath.Join(dir, fmt.Sprintf("ref-%d.dump", i+1)))
			if err != nil {
				return nil, compare, nil, nil, fmt.Errorf("prompt %d: %w", i+1, err)
			}
			forced := session.Request{Mode: session.Forced, PromptIDs: greedy.PromptIDs, Stops: stops, Outputs: ref.cap.Output}
			got, err := run(test, forced, ref.rc.Dump.SHA256, filepath.Join(dir, fmt.Sprintf("test-%d.dump", i+1)))
			if err != nil {
				return nil, compare, nil, nil, fmt.Errorf("prompt %d: %w", i+1, err)
			}
			pairs = append(pairs, [2]side{ref, got})
		}
	}
	m, docs, err := report(pairs, tok, dir)
	if err != nil {
		return nil, compare, nil, nil, err
	}
	failures := checkThresholds(c.Thresholds, m)
	for _, d := range slices.Sorted(maps.Keys(c.Domains)) {
		dm, ok := m.Domains[d]
		if !ok {
			failures = append(failures, fmt.Sprintf("domain %s: no window of the panel is in it", d))
			continue
		}
		for _, f := range checkThresholds(c.Domains[d], dm) {
			failures = append(failures, "domain "+d+": "+f)
		}
	}
	if c.Golden != "" {
		diff, err := maxAbsDiff(s.path(c.Golden), pairs[0][0].path)
		if err != nil {
			return m, compare, failures, docs, err
		}
		m.MaxAbsLogitDiff = &diff
		limit := 0.0
		if c.Thresholds.MaxAbsLogitDiff != nil {
			limit = *c.Thresholds.MaxAbsLogitDiff
		}
		if diff > limit {
			failures = append(failures, fmt.Sprintf("max_abs_logit_diff %.4g > max %g (reference vs golden %s)", diff, limit, c.Golden))
		}
	}
	more, err := attribute(c, ck, c.Test, windows, dir, m, logf)
	return m, compare, append(failures, more...), docs, err
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

// reportJSON is report.json: both sides' receipts and the margins report.
type reportJSON struct {
	Ref  *receipt.Receipt `json:"ref"`
	Test *receipt.Receipt `json:"test"`
	*margins.Report
}

// report compares every pair (report.txt and report.json in dir, numbered
// when there are several) and pools the metrics over all positions,
// weighting each capture by its number of rows.
func report(pairs [][2]side, tok *tokenizer.Tokenizer, dir string) (*Metrics, []*snapshot.Doc, error) {
	m := &Metrics{}
	var docs []*snapshot.Doc
	var kld, same float64
	opt := margins.Options{TokenText: tok.Piece}
	for i, p := range pairs {
		ref, test := p[0], p[1]
		// A panel's targets are the text's next tokens: Δp and PPL are
		// then about the real text.
		rep, err := compareDumps(ref.path, test.path, ref.cap.Targets, opt)
		if err != nil {
			return nil, nil, fmt.Errorf("comparing %s with %s: %w", ref.path, test.path, err)
		}
		suffix := ""
		if len(pairs) > 1 {
			suffix = fmt.Sprintf("-%d", i+1)
		}
		var text strings.Builder
		fmt.Fprintf(&text, "ref:  %s (%s, %s)\ntest: %s (%s, %s)\n", ref.path, ref.rc.Variant, ref.rc.Device, test.path, test.rc.Variant, test.rc.Device)
		if err := rep.WriteText(&text); err != nil {
			return nil, nil, err
		}
		js, err := json.MarshalIndent(reportJSON{ref.rc, test.rc, rep}, "", "  ")
		if err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "report"+suffix+".txt"), []byte(text.String()), 0o644); err != nil {
			return nil, nil, err
		}
		if err := os.WriteFile(filepath.Join(dir, "report"+suffix+".json"), append(js, '\n'), 0o644); err != nil {
			return nil, nil, err
		}
		doc := pairSnapshot(ref, test, rep, tok)
		docs = append(docs, doc)
		sm := rep.Summary
		m.Positions += sm.Positions
		kld += sm.KLD.Value * float64(sm.Positions)
		same += sm.SameTop.Value * float64(sm.Positions)
		m.Flips += sm.Flips
		m.ClearFlips += sm.ClearFlips
		// A panel is one pair: its domains are its windows'.
		if ref.rc.Chain != nil && ref.rc.Chain.Panel != nil {
			b, err := rep.BreakdownOf(margins.PanelGroups(ref.rc.Chain.Panel))
			if err != nil {
				return nil, nil, err
			}
			doc.Breakdown = b
			for d, s := range b["domain"] {
				if m.Domains == nil {
					m.Domains = map[string]*Metrics{}
				}
				m.Domains[d] = &Metrics{Positions: s.Positions, MeanKLD: s.KLD.Value, SameTop1: s.SameTop.Value, Flips: s.Flips, ClearFlips: s.ClearFlips}
			}
		}
	}
	if m.Positions > 0 {
		m.MeanKLD, m.SameTop1 = kld/float64(m.Positions), same/float64(m.Positions)
	}
	return m, docs, nil
}

// pairSnapshot is one pair's comparison as the page shows it: the very
// report conform judged, both receipts, and the token texts.
func pairSnapshot(ref, test side, rep *margins.Report, tok *tokenizer.Tokenizer) *snapshot.Doc {
	var caps [2]snapshot.Capture
	for i, sd := range []side{ref, test} {
		caps[i].Side.Label = sd.rc.Variant
		caps[i].SetReceipt(sd.rc)
	}
	d := snapshot.FromReport(nil, caps[0], caps[1], rep, tok.Piece)
	d.Created = time.Now().UTC().Format(time.RFC3339)
	return d
}

// checkThresholds names every metric outside its bound, not just the
// first: one CI run should show everything a change broke.
func checkThresholds(t Thresholds, m *Metrics) []string {
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

// maxAbsDiff is the largest |golden − got| over every logit, both dumps
// read a block of rows at a time; a NaN on either side counts as
// infinitely far.
func maxAbsDiff(goldenPath, refPath string) (float64, error) {
	g, err := dump.Open(goldenPath)
	if err != nil {
		return 0, fmt.Errorf("golden: %w", err)
	}
	defer g.Close()
	r, err := dump.Open(refPath)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	if g.Rows != r.Rows || g.Vocab != r.Vocab {
		return 0, fmt.Errorf("golden %s is %d rows × %d vocab, the reference capture %d × %d: not the same request",
			goldenPath, g.Rows, g.Vocab, r.Rows, r.Vocab)
	}
	var worst float64
	var gb, rb []float32
	block := max(1, (4<<20)/(4*g.Vocab))
	for {
		want, err := g.Next(block, gb)
		if err == io.EOF {
			return worst, nil
		}
		if err != nil {
			return 0, fmt.Errorf("golden: %w", err)
		}
		got, err := r.Next(block, rb)
		if err != nil {
			return 0, err
		}
		for i, v := range want {
			diff := math.Abs(float64(v) - float64(got[i]))
			if math.IsNaN(diff) {
				return math.Inf(1), nil
			}
			worst = max(worst, diff)
		}
		gb, rb = want, got
	}
}

// compareDumps compares two saved dumps, read a block of rows at a time.
func compareDumps(refPath, testPath string, targets []int, opt margins.Options) (*margins.Report, error) {
	ref, err := dump.Open(refPath)
	if err != nil {
		return nil, err
	}
	defer ref.Close()
	test, err := dump.Open(testPath)
	if err != nil {
		return nil, err
	}
	defer test.Close()
	return margins.CompareReaders(ref, test, targets, opt)
}
