package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/format/chain"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/logitdir"
	"logitscope/internal/format/safetensors"
	"logitscope/internal/model"
	"logitscope/internal/run/capture"
	"logitscope/internal/run/conform"
	"logitscope/internal/run/session"
)

// shardOf is the shard a capture takes: --shard i/n, else a Slurm job
// array's task (SLURM_ARRAY_TASK_ID and SLURM_ARRAY_TASK_COUNT, counted
// from SLURM_ARRAY_TASK_MIN), else a Kubernetes Indexed Job's
// (JOB_COMPLETION_INDEX, 0-based, with LOGITSCOPE_SHARDS, which the Job's
// manifest sets to its completions), else every window.
func shardOf(flagValue string) (conform.Shard, string, error) {
	if flagValue != "" {
		s, err := conform.ParseShard(flagValue)
		return s, "--shard", err
	}
	env := func(k string) (int, bool) {
		v, ok := os.LookupEnv(k)
		n, err := strconv.Atoi(v)
		return n, ok && err == nil
	}
	if id, ok := env("SLURM_ARRAY_TASK_ID"); ok {
		n, okN := env("SLURM_ARRAY_TASK_COUNT")
		lo, _ := env("SLURM_ARRAY_TASK_MIN")
		if !okN || id-lo < 0 || id-lo >= n {
			return conform.Shard{}, "", fmt.Errorf("SLURM_ARRAY_TASK_ID %d with SLURM_ARRAY_TASK_MIN %d and SLURM_ARRAY_TASK_COUNT %q: not a task of a job array of consecutive ids", id, lo, os.Getenv("SLURM_ARRAY_TASK_COUNT"))
		}
		return conform.Shard{I: id - lo + 1, N: n}, "Slurm job array", nil
	}
	if id, ok := env("JOB_COMPLETION_INDEX"); ok {
		n, okN := env("LOGITSCOPE_SHARDS")
		if !okN || id < 0 || id >= n {
			return conform.Shard{}, "", fmt.Errorf("JOB_COMPLETION_INDEX %d needs LOGITSCOPE_SHARDS, the Job's completions, above it (it is %q)", id, os.Getenv("LOGITSCOPE_SHARDS"))
		}
		return conform.Shard{I: id + 1, N: n}, "Kubernetes Indexed Job", nil
	}
	return conform.Shard{I: 1, N: 1}, "", nil
}

// captureWindows runs a panel into a windowed capture in dir
// (package logitdir): each window's file is written as the window
// finishes, and the sealed receipt when the shard's windows are all
// there. With resume, the window files already in dir that are this
// checkpoint's, variant's and window's are kept and not recomputed.
func captureWindows(ck *checkpoint.Checkpoint, variantName string, req session.Request, opt capture.Options, dir string, resume bool, shard conform.Shard, stdout io.Writer) error {
	fp, err := ck.Fingerprint()
	if err != nil {
		return err
	}
	g, err := model.GeometryOf(ck.Config)
	if err != nil {
		return err
	}
	label := capture.VariantLabel(variantName)
	meta := map[string]string{"model_sha256": fp, "variant": label}
	mine := shard.Pick(len(req.Windows))
	files := map[int]logitdir.File{}
	entry := func(i int) chain.PanelWindow { return opt.Panel.Windows[i] }
	for _, i := range mine {
		f, ok, err := finished(dir, i, entry(i), meta)
		switch {
		case err != nil:
			return err
		case ok && !resume:
			return fmt.Errorf("%s already holds window %d of a capture: --resume keeps the finished windows, or choose another --out", dir, i)
		case ok:
			files[i] = f
		}
	}
	kept := len(files)
	todo := map[int]bool{}
	for _, i := range mine {
		_, done := files[i]
		todo[i] = !done
	}
	opt.Omit = func(i int) bool { return !todo[i] }
	opt.Window = func(i int, r session.Result) error {
		l := (&capture.Capture{Result: r, Routing: g.RouteLayout()}).Logits(ck.Config.VocabSize)
		wm := maps.Clone(meta)
		if t, err := json.Marshal(r.Targets); err == nil {
			wm["targets"] = string(t)
		}
		f, err := logitdir.WriteWindow(dir, i, l, entry(i), wm)
		files[i] = f
		// A window's rows, their copy and its file's bytes are garbage
		// now: collected here, the next window reuses their memory, and
		// the peak stays one window's whatever the panel's length.
		runtime.GC()
		return err
	}
	c, err := capture.Run(ck, variantName, req, opt)
	if err != nil {
		return err
	}
	rc := &logitdir.Receipt{Model: fp, Variant: label, Device: c.Device, Vocab: ck.Config.VocabSize, Chain: c.Chain}
	if shard.N > 1 {
		rc.Shard = shard.String()
	}
	positions := 0
	for _, i := range mine {
		rc.LogitFiles = append(rc.LogitFiles, files[i])
		positions += files[i].PredictionPositions
	}
	// Made only now (or by the first window written): a capture refused
	// before it ran leaves no directory behind.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := logitdir.WriteReceipt(dir, rc); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "panel_windows: %d\n", len(req.Windows))
	fmt.Fprintf(stdout, "shard: %s (%d windows)\n", shard, len(mine))
	fmt.Fprintf(stdout, "windows_kept: %d\n", kept)
	fmt.Fprintf(stdout, "windows_written: %d\n", len(mine)-kept)
	fmt.Fprintf(stdout, "wall_time_seconds: %.3f\n", c.Took.Seconds())
	fmt.Fprintf(stdout, "logit_rows_dumped: %d rows x %d vocab -> %s\n", positions, ck.Config.VocabSize, filepath.Join(dir, logitdir.ReceiptName))
	return nil
}

// finished says whether window i's file in dir is a finished window of
// this capture: it opens, holds logits, and its metadata names the same
// window, tokens, mask, checkpoint and variant. A file of another capture
// is an error: resuming must not mix two.
func finished(dir string, i int, w chain.PanelWindow, meta map[string]string) (logitdir.File, bool, error) {
	path := filepath.Join(dir, logitdir.WindowPath(i))
	f, err := safetensors.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return logitdir.File{}, false, nil
	}
	if err != nil {
		// A window cut short by a kill is never renamed into place, so a
		// file that does not open is not ours to overwrite.
		return logitdir.File{}, false, err
	}
	defer f.Close()
	r, err := dump.SafetensorsReader(f, path)
	if err != nil {
		return logitdir.File{}, false, err
	}
	want := maps.Clone(meta)
	want["window_id"], want["token_ids_sha256"], want["attention_mask_sha256"] = w.WindowID, w.TokenIDsSHA256, w.AttentionMaskSHA256
	for k, v := range want {
		if f.Metadata[k] != v {
			return logitdir.File{}, false, fmt.Errorf("%s: %s %q, this capture's is %q: the directory holds another capture", path, k, f.Metadata[k], v)
		}
	}
	m, err := logitdir.Measure(dir, logitdir.File{WindowID: logitdir.ID(w.WindowID), TokenIDsSHA256: w.TokenIDsSHA256, AttentionMaskSHA256: w.AttentionMaskSHA256,
		DocumentID: w.DocumentID, Domain: w.Domain, Role: w.Role, PredictionPositions: r.Rows, Path: logitdir.WindowPath(i)})
	return m, err == nil, err
}

// windowsJSON is what report --json prints for windowed captures: both
// sides' directories and receipts, the margins report over every window in
// window-id order, and its summaries by the windows' domain and role.
type windowsJSON struct {
	Ref       windowSide        `json:"ref"`
	Test      windowSide        `json:"test"`
	SameModel bool              `json:"same_model"`
	Breakdown margins.Breakdown `json:"breakdown,omitempty"`
	*margins.Report
}

type windowSide struct {
	Dirs     []string            `json:"dirs"`
	Receipts []*logitdir.Receipt `json:"receipts"`
}

// reportWindows compares two windowed captures, each one directory or the
// directories of its shards: windows are matched by id and must have seen
// the same tokens; they are read window by window, in id order.
func reportWindows(refDirs, testDirs []string, opt margins.Options, asJSON bool, stdout io.Writer) error {
	rc, err := logitdir.Open(refDirs...)
	if err != nil {
		return err
	}
	tc, err := logitdir.Open(testDirs...)
	if err != nil {
		return err
	}
	test, err := matchWindows(rc.Windows, tc.Windows)
	if err != nil {
		return err
	}
	rr, targets, err := logitdir.Rows(strings.Join(refDirs, ","), rc.Windows)
	if err != nil {
		return err
	}
	defer rr.Close()
	tr, _, err := logitdir.Rows(strings.Join(testDirs, ","), test)
	if err != nil {
		return err
	}
	defer tr.Close()
	rep, err := margins.CompareReaders(rr, tr, targets, opt)
	if err != nil {
		return err
	}
	out := windowsJSON{Ref: windowSide{refDirs, rc.Receipts}, Test: windowSide{testDirs, tc.Receipts}, Report: rep, SameModel: true}
	for _, r := range append(slices.Clone(rc.Receipts), tc.Receipts...) {
		out.SameModel = out.SameModel && r.Model != "" && r.Model == rc.Receipts[0].Model
	}
	groups := make([]margins.Group, len(rc.Windows))
	for i, w := range rc.Windows {
		groups[i] = margins.Group{Positions: w.PredictionPositions, Labels: map[string]string{"domain": w.Domain, "role": w.Role}}
	}
	if out.Breakdown, err = rep.BreakdownOf(groups); err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "ref:  %s (%d windows)\ntest: %s (%d windows)\n", strings.Join(refDirs, ", "), len(rc.Windows), strings.Join(testDirs, ", "), len(test))
	fmt.Fprintf(stdout, "same checkpoint: %s; same token sequence: yes (every window's token_ids_sha256)\n", yesNo(out.SameModel))
	// Shards of a capture carry the same checkpoint identity (their
	// backends may differ): the first's chain speaks for the side.
	chainLine(stdout, "ref", rc.Receipts[0].Chain)
	chainLine(stdout, "test", tc.Receipts[0].Chain)
	if err := rep.WriteText(stdout); err != nil {
		return err
	}
	return out.Breakdown.WriteText(stdout)
}

// matchWindows is the test's windows in the reference's order, each the
// same window (by id) over the same tokens.
func matchWindows(ref, test []logitdir.Window) ([]logitdir.Window, error) {
	byID := map[logitdir.ID]logitdir.Window{}
	for _, w := range test {
		byID[w.WindowID] = w
	}
	out := make([]logitdir.Window, len(ref))
	for i, r := range ref {
		t, ok := byID[r.WindowID]
		switch {
		case !ok:
			return nil, fmt.Errorf("window %s of the reference (%s) is not in the test capture", r.WindowID, r.Dir)
		case t.TokenIDsSHA256 != r.TokenIDsSHA256:
			return nil, fmt.Errorf("window %s: token_ids_sha256 %.12s… in %s, %.12s… in %s: the sides saw different tokens", r.WindowID, r.TokenIDsSHA256, r.Dir, t.TokenIDsSHA256, t.Dir)
		case t.PredictionPositions != r.PredictionPositions:
			return nil, fmt.Errorf("window %s: %d prediction positions in %s, %d in %s", r.WindowID, r.PredictionPositions, r.Dir, t.PredictionPositions, t.Dir)
		}
		out[i] = t
		delete(byID, r.WindowID)
	}
	for id, t := range byID {
		return nil, fmt.Errorf("window %s of the test capture (%s) is not in the reference", id, t.Dir)
	}
	return out, nil
}
