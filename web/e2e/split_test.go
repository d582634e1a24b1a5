package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"logitscope/internal/analysis/split"
	"logitscope/internal/model/synth"
	"logitscope/internal/peer/llamacpp"
)

// TestUISplit is report --engine-dump in the page: three captures of the
// tiny synthetic model on a panel by the CLI (the f32 reference, its
// Q4_K_M GGUF decoded exactly, and llama.cpp on that GGUF), chosen in the
// page with their receipts. The page's split (window.logitscope.split)
// is the CLI's JSON `split`, and its panel shows the CLI's three mean
// KLDs and flip counts, lists as many engine-only flips as the CLI and
// marks them in the token strip.
func TestUISplit(t *testing.T) {
	RequireUI(t)
	llamacpp.Harness(t)
	site := StartSite(t)
	dir := t.TempDir()
	bin := cli(t, dir)
	cache := t.TempDir()
	logitscope := func(args ...string) string {
		t.Helper()
		var stdout, stderr strings.Builder
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "LOGITSCOPE_CACHE="+cache)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("logitscope %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String()
	}
	model := filepath.Join(dir, "tiny")
	if err := synth.Write(synth.Presets["tiny"], model, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	gguf := filepath.Join(dir, "tiny-q4_k_m.gguf")
	logitscope("export", "--model", model, "--gguf", gguf, "--type", "Q4_K_M")
	panel := filepath.Join(RepoRoot(), "internal", "model", "synth", "corpus.txt")
	names := []string{"ref.dump", "file.dump", "engine.dump"}
	var files []string
	for i, c := range [][]string{
		{"--variant", "f32", "--runtime", "native", "--device", "cpu"},
		{"--variant", gguf, "--runtime", "native", "--device", "cpu"},
		{"--variant", gguf, "--runtime", "llama.cpp"},
	} {
		out := filepath.Join(dir, names[i])
		logitscope(append(append([]string{"capture", "--model", model}, c...), "--panel", panel, "--window", "64", "--dump-logits", out)...)
		files = append(files, out, out+".receipt.json")
	}
	var cli struct{ Split json.RawMessage }
	if err := json.Unmarshal([]byte(logitscope("report", "--ref", files[0], "--test", files[2], "--engine-dump", files[4], "--json")), &cli); err != nil {
		t.Fatal(err)
	}
	var want split.Report
	if err := json.Unmarshal(cli.Split, &want); err != nil {
		t.Fatal(err)
	}
	t.Logf("report --engine-dump: %d positions, KLD file %s, engine %s, total %s; flips file %d, engine %d, total %d; by cause %v",
		want.Positions, split.Mean(want.File.KLD), split.Mean(want.Engine.KLD), split.Mean(want.Total.KLD),
		want.File.Flips, want.Engine.Flips, want.Total.Flips, want.ByCause)
	if want.Positions == 0 || want.Engine.KLD.Value <= 0 {
		t.Fatalf("the CLI's split has %d positions and engine KLD %v: nothing to compare", want.Positions, want.Engine.KLD)
	}

	b := NewBrowser(t)
	ctx, cancel := context.WithTimeout(b.Ctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/?autorun=0")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WaitState(time.Minute, "idle"); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.CSS("#file-input"), files)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the page leaves idle
	if state, err := b.WaitState(2*time.Minute, "done", "error"); err != nil || state != "done" {
		b.Screenshot("split-error")
		t.Fatalf("the split: state %q, %v: %s", state, err, Eval[string](b, `String(window.logitscope.error)`))
	}
	b.Screenshot("split")
	if roles := Eval[string](b, `[...document.querySelectorAll('#dropzone .role')].map(e => e.textContent).join(',')`); roles != "reference,test,engine" {
		t.Errorf("the dropped dumps' roles are %q", roles)
	}

	if h := Eval[string](b, `document.querySelector('#doc-header').innerText`); !strings.Contains(h, "split with the engine's") {
		t.Errorf("the header does not say the comparison is split:\n%s", h)
	}
	var page, cliJSON any
	json.Unmarshal([]byte(Eval[string](b, `JSON.stringify(window.logitscope.split)`)), &page)
	json.Unmarshal(cli.Split, &cliJSON)
	if err := approxEqual(page, cliJSON, "split"); err != nil {
		t.Errorf("the page's split is not the CLI's: %v", err)
	}

	text := Eval[string](b, `document.querySelector('#split').innerText`)
	for _, w := range []string{"what your file does", "what your engine adds",
		split.Mean(want.File.KLD), split.Mean(want.Engine.KLD), split.Mean(want.Total.KLD),
		"the engine's alone " + strconv.Itoa(want.ByCause[split.Engine]),
		"the file's " + strconv.Itoa(want.ByCause[split.File])} {
		if !strings.Contains(text, w) {
			t.Errorf("the split panel lacks the CLI's %q:\n%s", w, text)
		}
	}
	flips := Eval[[]string](b, `[...document.querySelectorAll('#split tr.flips td')].map(e => e.textContent)`)
	if w := []string{strconv.Itoa(want.File.Flips), strconv.Itoa(want.Engine.Flips), strconv.Itoa(want.Total.Flips)}; strings.Join(flips, ",") != strings.Join(w, ",") {
		t.Errorf("the panel's flips (file, engine, together) are %v, the CLI's %v", flips, w)
	}
	listed := Eval[[]string](b, `[...document.querySelectorAll('#split .engine-only li')].map(e => e.dataset.i)`)
	marked := Eval[[]string](b, `[...document.querySelectorAll('#strip .t.ef')].map(e => e.dataset.i)`)
	var only []string
	for _, i := range want.EngineOnly {
		only = append(only, strconv.Itoa(i))
	}
	if strings.Join(listed, ",") != strings.Join(only, ",") || strings.Join(marked, ",") != strings.Join(only, ",") {
		t.Errorf("engine-only flips: the panel lists %v, the strip marks %v, the CLI %v", listed, marked, only)
	}

	// Shared, the split goes with the comparison: a teammate's browser
	// shows the same panel, marks and window.logitscope.split.
	link := shareLink(t, b)
	b2 := NewBrowser(t)
	if state := b2.Open(link, 2*time.Minute); state != "done" {
		t.Fatalf("the shared split ended in %q: %s", state, Eval[string](b2, `String(window.logitscope.error)`))
	}
	for _, js := range []string{`JSON.stringify(window.logitscope.split)`, `document.querySelector('#split').innerText`,
		`[...document.querySelectorAll('#strip .t.ef')].map(e => e.dataset.i).join(',')`} {
		if got, want := Eval[string](b2, js), Eval[string](b, js); got != want {
			t.Errorf("%s: reopened %.200q, the page's %.200q", js, got, want)
		}
	}
}
