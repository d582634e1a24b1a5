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
)

// cli builds cmd/logitscope into dir.
func cli(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "logitscope")
	build := exec.Command("go", "build", "-o", bin, "./cmd/logitscope")
	build.Dir = RepoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building logitscope: %v\n%s", err, out)
	}
	return bin
}

// TestUICLISnapshot is the CLI's snapshot round trip: two captures of the
// demo (f32 and q4 on a panel, by the CLI), `logitscope report --snapshot
// FILE --share SITE`, then the file chosen in the page, ?snapshot=URL and
// the printed link, each in a fresh browser with no run: the page holds
// the file's document, and shows the report's flips (the summary's count
// and the strip's flagged positions) and mean KLD. A hostile file goes
// through the same snapshot.Parse and is refused, naming the field.
func TestUICLISnapshot(t *testing.T) {
	RequireUI(t)
	site := StartSite(t)
	dir := t.TempDir()
	bin := cli(t, dir)
	logitscope := func(args ...string) (string, string) {
		t.Helper()
		var stdout, stderr strings.Builder
		cmd := exec.Command(bin, args...)
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("logitscope %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	panel := filepath.Join(dir, "panel.txt")
	if err := os.WriteFile(panel, []byte("Quantization maps each weight to a small integer and a shared scale. "+
		"Most of the time the largest logit stays the largest; sometimes the reference was unsure, and the test flips."), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"f32", "q4"} {
		logitscope("capture", "--model", site.DemoDir, "--variant", v, "--device", "cpu", "--panel", panel, "--window", "16",
			"--dump-logits", filepath.Join(dir, v+".dump"))
	}
	file := filepath.Join(dir, "q4.snapshot.json")
	stdout, stderr := logitscope("report", "--ref", filepath.Join(dir, "f32.dump"), "--test", filepath.Join(dir, "q4.dump"), "--json",
		"--tokenizer", filepath.Join(site.DemoDir, "tokenizer.json"), "--snapshot", file, "--share", site.URL)
	var rep struct {
		Summary struct {
			Positions, Flips int
			KLD              struct{ Value float64 } `json:"kld_mean"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil {
		t.Fatal(err)
	}
	s := rep.Summary
	t.Logf("report: %d positions, %d flips, mean KLD %.6f", s.Positions, s.Flips, s.KLD.Value)
	if s.Flips == 0 {
		t.Fatal("the panel gives no flip: the test would not show flips round-trip")
	}
	link := ""
	for _, l := range strings.Split(stderr, "\n") {
		if after, ok := strings.CutPrefix(l, "link: "); ok {
			link = after
		}
	}
	if !strings.HasPrefix(link, site.URL+"/r/") {
		t.Fatalf("report printed no link:\n%s", stderr)
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}

	// shows checks a browser that has opened the snapshot.
	shows := func(b *Browser, how string) {
		t.Helper()
		if _, got := pageDoc(t, b); !jsonEqual(t, got, want) {
			t.Errorf("%s: the page's document is not the file's", how)
		}
		summary := Eval[string](b, `document.querySelector('#summary').innerText`)
		for _, w := range []string{strconv.Itoa(s.Flips) + " of " + strconv.Itoa(s.Positions) + " positions", strconv.FormatFloat(s.KLD.Value, 'f', 6, 64)} {
			if !strings.Contains(summary, w) {
				t.Errorf("%s: the summary lacks the report's %q:\n%s", how, w, summary)
			}
		}
		if n := Eval[int](b, `document.querySelectorAll('#strip .t.close, #strip .t.clear').length`); n != s.Flips {
			t.Errorf("%s: the strip flags %d flips, the report %d", how, n, s.Flips)
		}
		if h := Eval[string](b, `document.querySelector('#doc-header').innerText`); !strings.Contains(h, "shared snapshot") {
			t.Errorf("%s: the header does not say it is a snapshot:\n%s", how, h)
		}
	}

	t.Run("chosen file", func(t *testing.T) {
		b := NewBrowser(t)
		ctx, cancel := context.WithTimeout(b.Ctx, time.Minute)
		defer cancel()
		if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/?autorun=0")); err != nil {
			t.Fatal(err)
		}
		if _, err := b.WaitState(time.Minute, "idle"); err != nil {
			t.Fatal(err)
		}
		choose := func(path string) string {
			ctx, cancel := context.WithTimeout(b.Ctx, time.Minute)
			defer cancel()
			if err := chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.CSS("#file-input"), []string{path})); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond) // the page leaves its last state
			state, err := b.WaitState(time.Minute, "done", "error")
			if err != nil {
				t.Fatal(err)
			}
			return state
		}
		if state := choose(file); state != "done" {
			t.Fatalf("the chosen snapshot ended in %q: %s", state, Eval[string](b, `String(window.logitscope.error)`))
		}
		shows(b, "chosen file")
		// A hostile document: a flip the positions' choices deny.
		hostile := filepath.Join(dir, "hostile.json")
		bad := strings.Replace(string(want), `"flip":false`, `"flip":true`, 1)
		if bad == string(want) {
			t.Fatal("no agreeing position to forge")
		}
		os.WriteFile(hostile, []byte(bad), 0o644)
		if state := choose(hostile); state != "error" {
			t.Fatalf("the hostile file ended in %q", state)
		}
		if msg := Eval[string](b, `String(window.logitscope.error)`); !strings.Contains(msg, "hostile.json: snapshot: positions[") || !strings.Contains(msg, ".flip true") {
			t.Errorf("the hostile file's error %q does not name the field", msg)
		}
	})
	t.Run("snapshot URL", func(t *testing.T) {
		b := NewBrowser(t)
		u := "/api/runs/" + strings.TrimPrefix(link, site.URL+"/r/")
		if state := b.Open(site.URL+"/?snapshot="+u, 2*time.Minute); state != "done" {
			t.Fatalf("?snapshot= ended in %q: %s", state, Eval[string](b, `String(window.logitscope.error)`))
		}
		shows(b, "?snapshot=URL")
		if loc := Eval[string](b, `location.search`); !strings.Contains(loc, "snapshot="+strings.ReplaceAll(u, "/", "%2F")) {
			t.Errorf("the address bar lost the snapshot: %s", loc)
		}
	})
	t.Run("printed link", func(t *testing.T) {
		b := NewBrowser(t)
		if state := b.Open(link, 2*time.Minute); state != "done" {
			t.Fatalf("the link ended in %q", state)
		}
		shows(b, "link")
	})
}

// TestUIConformSnapshot is a failing conform case as CI meets it: conform
// --share SITE on the demo, with a threshold q4 cannot meet, prints the
// failing metric beside a link; the link, opened in a fresh browser,
// shows the case's positions and the metric it failed, with no run.
func TestUIConformSnapshot(t *testing.T) {
	RequireUI(t)
	site := StartSite(t)
	dir := t.TempDir()
	bin := cli(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "panel.txt"), []byte("In the beginning God created the heaven and the earth. And the earth was without form, and void."), 0o644); err != nil {
		t.Fatal(err)
	}
	suite, _ := json.Marshal(map[string]any{"name": "ci", "cases": []map[string]any{
		{"name": "demo-q4", "model": site.DemoDir, "test": "q4", "panel": "panel.txt", "window": 16, "thresholds": map[string]any{"max_mean_kld": 0}},
	}})
	if err := os.WriteFile(filepath.Join(dir, "suite.json"), suite, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	cmd := exec.Command(bin, "conform", "--suite", filepath.Join(dir, "suite.json"), "--runtime", "native", "--device", "cpu",
		"--out", out, "--junit", filepath.Join(dir, "junit.xml"), "--share", site.URL)
	table, err := cmd.Output()
	if _, failed := err.(*exec.ExitError); !failed {
		t.Fatalf("conform did not fail: %v\n%s", err, table)
	}
	var line string
	for _, l := range strings.Split(string(table), "\n") {
		if strings.HasPrefix(l, "demo-q4") {
			line = l
		}
	}
	i := strings.Index(line, "view: ")
	if !strings.Contains(line, "mean_kld") || !strings.Contains(line, "> max 0") || i < 0 {
		t.Fatalf("no failing metric and link in the table:\n%s", table)
	}
	link := strings.TrimSpace(line[i+len("view: "):])
	junit, _ := os.ReadFile(filepath.Join(dir, "junit.xml"))
	if !strings.Contains(string(junit), link) || !strings.Contains(string(junit), filepath.Join(out, "demo-q4", "snapshot.json")) {
		t.Errorf("the JUnit failure does not name the snapshot and its link:\n%s", junit)
	}
	b := NewBrowser(t)
	if state := b.Open(link, 2*time.Minute); state != "done" {
		t.Fatalf("the link ended in %q: %s", state, Eval[string](b, `String(window.logitscope.error)`))
	}
	summary := Eval[string](b, `document.querySelector('#summary').innerText`)
	for _, w := range []string{"Conformance case", "demo-q4", "Failed", "mean_kld", "> max 0"} {
		if !strings.Contains(summary, w) {
			t.Errorf("the summary lacks %q:\n%s", w, summary)
		}
	}
	doc, _ := pageDoc(t, b)
	if n := Eval[int](b, `document.querySelectorAll('#strip .t').length`); n != doc.Report.Rows || n == 0 {
		t.Errorf("the strip shows %d positions, the case has %d", n, doc.Report.Rows)
	}
}
