package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files")

// testdata/events.jsonl is go test -json of a module whose tests pass,
// fail, and skip for missing components (as prereq.Missing words it) and
// for other reasons: the summary prints what plain go test prints, then
// the skips grouped by what was missing, then the slowest top-level tests
// (not subtests, not those under a second).
func TestSummary(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out bytes.Buffer
	s := newSummary(&out)
	if err := s.read(f); err != nil {
		t.Fatal(err)
	}
	s.writeSkips()
	s.writeSlowest(10)
	golden := filepath.Join("testdata", "summary.golden")
	if *update {
		if err := os.WriteFile(golden, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if out.String() != string(want) {
		t.Errorf("got\n%s\nwant\n%s", out.Bytes(), want)
	}
}

func TestReason(t *testing.T) {
	for _, c := range []struct {
		lines []string
		want  string
	}{
		{[]string{"=== RUN   TestX\n", "    x_test.go:12: missing Vulkan: no adapter\n", "--- SKIP: TestX (0.00s)\n"}, "missing Vulkan: no adapter"},
		{[]string{"    x_test.go:3: first\n", "    x_test.go:9: skipping: later\n"}, "skipping: later"},
		{[]string{"--- SKIP: TestX (0.00s)\n"}, "(no reason given)"},
	} {
		if got := reason(c.lines); got != c.want {
			t.Errorf("reason(%q) = %q, want %q", c.lines, got, c.want)
		}
	}
}
