package conform

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"logitscope/internal/run/capture"
)

// runShards runs suite s as n shards natively on the CPU, each into its
// own directory, and returns the directories in shard order.
func runShards(t *testing.T, s *Suite, n int) []string {
	t.Helper()
	var dirs []string
	for i := 1; i <= n; i++ {
		dir := filepath.Join(t.TempDir(), "shard")
		if _, err := Run(s, Options{Capture: capture.Options{Device: "cpu", Runtime: "native"}, Out: dir, Shard: Shard{i, n}}); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	return dirs
}

// Three shards, given in any order, merge into what one machine running
// the whole suite reports: the cases in the suite's order with the same
// results, counts and one exit status; the JUnit file has every case.
func TestMergeShards(t *testing.T) {
	model := tinyModel(t)
	s := writeSuite(t, t.TempDir(),
		panelCase("a-q8", model, "q8", map[string]any{"max_mean_kld": 1}),
		panelCase("b-q4-strict", model, "q4", map[string]any{"min_same_top1": 1}),
		panelCase("c-q8", model, "q8", map[string]any{}),
		panelCase("d-q6", model, "q6", map[string]any{}),
		panelCase("e-missing", filepath.Join(t.TempDir(), "none"), "q8", map[string]any{}))
	whole, err := Run(s, Options{Capture: capture.Options{Device: "cpu", Runtime: "native"}, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	dirs := runShards(t, s, 3)
	m, err := Merge([]string{dirs[2], dirs[0], dirs[1]})
	if err != nil {
		t.Fatal(err)
	}
	if m.Passed != whole.Passed || m.Failed != whole.Failed || m.Errors != whole.Errors || m.Passed != 3 || m.Shard != "1-3/3" {
		t.Errorf("merged %d/%d/%d (shard %s), whole %d/%d/%d", m.Passed, m.Failed, m.Errors, m.Shard, whole.Passed, whole.Failed, whole.Errors)
	}
	if m.Err() == nil || m.Err().Error() != whole.Err().Error() {
		t.Errorf("merged Err() %v, whole %v", m.Err(), whole.Err())
	}
	for i, c := range m.Cases {
		w := whole.Cases[i]
		if c.Name != w.Name || c.Status != w.Status || !reflect.DeepEqual(c.Metrics, w.Metrics) {
			t.Errorf("case %d: merged %s %s %+v, whole %s %s %+v", i, c.Name, c.Status, c.Metrics, w.Name, w.Status, w.Metrics)
		}
		if _, err := os.Stat(filepath.Join(c.Dir, "capture.log")); err != nil && c.Status != "error" {
			t.Errorf("case %s: Dir %s: %v", c.Name, c.Dir, err)
		}
	}
	junit := filepath.Join(t.TempDir(), "merged.xml")
	if err := m.WriteJUnit(junit); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	var js JUnitSuites
	if err := xml.Unmarshal(b, &js); err != nil {
		t.Fatal(err)
	}
	if js.Tests != 5 || js.Failures != 1 || js.Errors != 1 || len(js.Suites[0].Cases) != 5 || js.Suites[0].Cases[4].Name != "e-missing" {
		t.Errorf("junit: %+v", js)
	}
}

// What cannot be one run's shards is refused, naming the directories.
func TestMergeRefuses(t *testing.T) {
	model := tinyModel(t)
	dir := t.TempDir()
	s := writeSuite(t, dir, panelCase("a", model, "q8", nil), panelCase("b", model, "q8", nil), panelCase("c", model, "q8", nil))
	three := runShards(t, s, 3)
	two := runShards(t, s, 2)
	// The same suite name with another case: another suite file.
	other := writeSuite(t, t.TempDir(), panelCase("a", model, "q8", nil), panelCase("b", model, "q8", nil), panelCase("x", model, "q8", nil))
	otherShards := runShards(t, other, 3)
	unfinished := filepath.Join(t.TempDir(), "unfinished")
	sum, err := ReadSummary(three[0])
	if err != nil {
		t.Fatal(err)
	}
	sum.Cases = sum.Cases[:0]
	if err := os.MkdirAll(unfinished, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := sum.Write(unfinished); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		dirs []string
		want string
	}{
		{"missing", []string{three[0], three[2]}, "missing shards 2/3 of 3"},
		{"duplicate", []string{three[0], three[1], three[1]}, "shard 2/3 given twice: " + three[1] + " and " + three[1]},
		{"other split", []string{three[0], two[1]}, "is shard 1/3, " + two[1] + " is shard 2/2: shards of different splits"},
		{"other suite", []string{three[0], otherShards[1], three[2]}, otherShards[1] + " is suite t (3 cases, sha256 "},
		{"unfinished", []string{unfinished, three[1], three[2]}, unfinished + ": shard 1/3 of 3 cases holds 0 cases, want 1"},
		{"no summary", []string{t.TempDir()}, "summary.json: no such file"},
		{"none", nil, "no shard directories"},
	} {
		_, err := Merge(c.dirs)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if _, err := Merge(two); err != nil {
		t.Errorf("the two-way split: %v", err)
	}
}

// A summary comes from another machine: counts that would loop or
// allocate without bound are refused, and the merged counts are the
// cases', whatever the summary's fields say.
func TestMergeHostileSummaries(t *testing.T) {
	write := func(t *testing.T, body string) string {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "summary.json"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	cases := `[{"name": "a", "status": "pass"}, {"name": "b", "status": "fail"}, {"name": "c", "status": "error"}]`
	for _, c := range []struct{ name, body, want string }{
		{"negative cases", `{"suite": "s", "suite_cases": -1, "shard": "1/1", "cases": []}`, "suite_cases -1: want 1 to 100000"},
		{"2e10 cases", `{"suite": "s", "suite_cases": 20000000000, "shard": "1/1", "cases": []}`, "suite_cases 20000000000: want 1 to 100000"},
		{"huge split", `{"suite": "s", "suite_cases": 3, "shard": "1/300000000", "cases": []}`, "more shards than cases"},
		{"unknown status", `{"suite": "s", "suite_cases": 1, "shard": "1/1", "cases": [{"name": "a", "status": "ok"}]}`, `case a`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Merge([]string{write(t, c.body)}); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
	m, err := Merge([]string{write(t, `{"suite": "s", "suite_cases": 3, "shard": "1/1", "passed": 3, "cases": `+cases+`}`)})
	if err != nil {
		t.Fatal(err)
	}
	if m.Passed != 1 || m.Failed != 1 || m.Errors != 1 || m.Err() == nil {
		t.Fatalf("merged %d passed, %d failed, %d errors (err %v): want the cases' 1, 1, 1", m.Passed, m.Failed, m.Errors, m.Err())
	}
}
