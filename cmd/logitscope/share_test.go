package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/format/logitdir"
	"logitscope/internal/model/synth"
	"logitscope/internal/serve"
)

// teamServer is a logitscope server with a run store and a write token.
func teamServer(t *testing.T, token string) *httptest.Server {
	t.Helper()
	s, err := serve.New(serve.Options{Data: t.TempDir(), WriteToken: token, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts
}

// fetchLink GETs a link's stored document (/r/<id> → /api/runs/<id>).
func fetchLink(t *testing.T, link string) []byte {
	t.Helper()
	resp, err := http.Get(strings.Replace(link, "/r/", "/api/runs/", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", link, resp.StatusCode, b)
	}
	return b
}

// report --snapshot writes the page's document of the very report it
// prints (same summary, same flips, same positions), which Parse takes;
// --share posts the same bytes and prints the link.
func TestReportSnapshot(t *testing.T) {
	dir := copyModel(t)
	if _, err := run(t, quantizeCmd, "--model", dir, "--scheme", "q4"); err != nil {
		t.Fatal(err)
	}
	panel, out := panelFile(t), t.TempDir()
	for _, v := range []string{"f32", "q4"} {
		if _, err := run(t, captureCmd, "--model", dir, "--variant", v, "--device", "cpu", "--panel", panel, "--window", "64",
			"--dump-logits", filepath.Join(out, v+".dump")); err != nil {
			t.Fatal(err)
		}
	}
	ts := teamServer(t, "tok")
	t.Setenv(serve.TokenEnv, "tok")
	file := filepath.Join(out, "q4.snapshot.json")
	var stdout, stderr strings.Builder
	err := report([]string{"--ref", filepath.Join(out, "f32.dump"), "--test", filepath.Join(out, "q4.dump"), "--json",
		"--tokenizer", filepath.Join(dir, "tokenizer.json"), "--snapshot", file, "--share", ts.URL}, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	var printed struct {
		Summary   json.RawMessage `json:"summary"`
		Positions json.RawMessage `json:"positions"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &printed); err != nil {
		t.Fatal(err)
	}
	d, data := readSnapshot(t, file)
	summary, _ := json.Marshal(d.Report.Summary)
	positions, _ := json.Marshal(d.Report.Positions)
	if !jsonSame(t, summary, printed.Summary) || !jsonSame(t, positions, printed.Positions) {
		t.Errorf("the snapshot's summary or positions differ from the report's:\n%s\n%s", summary, printed.Summary)
	}
	if s := d.Report.Summary; s.Flips == 0 || s.ClearFlips == 0 || !s.TeacherForced {
		t.Errorf("summary %+v: want flips, clear ones, teacher-forced by the receipt's targets", s)
	}
	if d.Ref.Receipt == nil || d.Test.Receipt == nil || d.Ref.Label != "f32.dump" || d.Texts[jsonKey(d.Tokens[0])] == "" {
		t.Errorf("sides %+v / %+v, texts of %d tokens", d.Ref, d.Test, len(d.Texts))
	}
	link := strings.TrimSpace(strings.TrimPrefix(lastLine(stderr.String()), "link:"))
	if !strings.HasPrefix(link, ts.URL+"/r/") {
		t.Fatalf("no link printed:\n%s", stderr.String())
	}
	if string(fetchLink(t, link)) != string(data) {
		t.Error("the shared document is not the file's bytes")
	}

	// A windowed capture or a llama.cpp base file has no snapshot, and a
	// server that wants a token refuses the report's without it.
	t.Setenv(serve.TokenEnv, "")
	err = report([]string{"--ref", filepath.Join(out, "f32.dump"), "--test", filepath.Join(out, "q4.dump"), "--share", ts.URL}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), serve.TokenEnv) {
		t.Errorf("share without the token: %v", err)
	}
	windowed := filepath.Join(out, "windowed")
	os.MkdirAll(windowed, 0o755)
	os.WriteFile(filepath.Join(windowed, logitdir.ReceiptName), []byte("{}"), 0o644)
	err = report([]string{"--ref", windowed, "--test", windowed, "--snapshot", filepath.Join(out, "w.json")}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "--snapshot and --share take two dumps") {
		t.Errorf("--snapshot of a windowed capture: %v", err)
	}
}

func jsonSame(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

func jsonKey(id int) string { b, _ := json.Marshal(id); return string(b) }

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// A failing conform case writes its snapshot, names it in the JUnit
// failure, and with --share posts it and prints its link beside the
// failing metric; the document opens on the case and what it failed. A
// passing case writes none unless --snapshot-all.
func TestConformSnapshots(t *testing.T) {
	model := filepath.Join(t.TempDir(), "model")
	if err := synth.Write(synth.Presets["tiny"], model, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	suiteDir := t.TempDir()
	corpus, err := os.ReadFile("../../internal/model/synth/corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(suiteDir, "panel.txt"), corpus[:600], 0o644)
	cases := []map[string]any{
		{"name": "q8-ok", "model": model, "test": "q8", "panel": "panel.txt", "window": 32, "thresholds": map[string]any{"max_mean_kld": 1}},
		{"name": "q4-strict", "model": model, "test": "q4", "panel": "panel.txt", "window": 32, "thresholds": map[string]any{"max_mean_kld": 0}},
	}
	b, _ := json.Marshal(map[string]any{"name": "snap", "cases": cases})
	suite := filepath.Join(suiteDir, "suite.json")
	os.WriteFile(suite, b, 0o644)

	ts := teamServer(t, "tok")
	for _, tc := range []struct {
		name       string
		token      string
		all        bool
		wantShared bool
	}{
		{"failing cases, shared", "tok", false, true},
		{"every case, wrong token", "nope", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(serve.TokenEnv, tc.token)
			out := t.TempDir()
			junit := filepath.Join(out, "junit.xml")
			args := []string{"--suite", suite, "--runtime", "native", "--device", "cpu", "--out", out, "--junit", junit, "--share", ts.URL}
			if tc.all {
				args = append(args, "--snapshot-all")
			}
			table, stderr, err := runConform(t, args...)
			if err == nil || !strings.Contains(table, "1 passed, 1 failed") {
				t.Fatalf("conform: %v\n%s", err, table)
			}
			sum := readSummary(t, out)
			fail := sum.Cases[1]
			want := filepath.Join(out, "q4-strict", "snapshot.json")
			if len(fail.Snapshots) != 1 || fail.Snapshots[0] != want {
				t.Fatalf("failing case's snapshots %q, want %s", fail.Snapshots, want)
			}
			if pass := sum.Cases[0]; (len(pass.Snapshots) == 1) != tc.all {
				t.Errorf("passing case's snapshots %q with --snapshot-all %v", pass.Snapshots, tc.all)
			}
			d, data := readSnapshot(t, want)
			if c := d.Conform; c == nil || c.Case != "q4-strict" || c.Suite != "snap" || !reflect.DeepEqual(c.Failures, fail.Failures) ||
				!strings.HasPrefix(c.Failures[0], "mean_kld") || d.Report.Summary.Positions != fail.Metrics.Positions {
				t.Errorf("the snapshot's case %+v, %d positions; the summary's %+v", d.Conform, d.Report.Summary.Positions, fail)
			}
			msg := readJUnit(t, junit).Suites[0].Cases[1].Failure.Message
			if tc.wantShared {
				link := fail.Links[0]
				if !strings.HasPrefix(link, ts.URL+"/r/") || string(fetchLink(t, link)) != string(data) {
					t.Fatalf("link %q does not serve the snapshot file", link)
				}
				for what, text := range map[string]string{"JUnit message": msg, "table": table, "log": stderr} {
					if !strings.Contains(text, "mean_kld") || !strings.Contains(text, link) {
						t.Errorf("the %s does not name the failing metric beside its link %s:\n%s", what, link, text)
					}
				}
			} else {
				if len(fail.Links) != 1 || fail.Links[0] != "" || !strings.Contains(stderr, "not shared: share: ") || !strings.Contains(msg, want) {
					t.Errorf("a refused share: links %q, message %q, log:\n%s", fail.Links, msg, stderr)
				}
			}
		})
	}
}

// readSnapshot parses the snapshot document a command wrote to path, and
// returns its bytes too.
func readSnapshot(t *testing.T, path string) (*snapshot.Doc, []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d, err := snapshot.Parse(data)
	if err != nil {
		t.Fatalf("the snapshot file %s does not parse: %v", path, err)
	}
	return d, data
}
