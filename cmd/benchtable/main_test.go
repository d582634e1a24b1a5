package main

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/table.golden")

// TestGolden turns a recorded run (CPU, Vulkan and page rows beside their
// peers, a peer that measured 0, GPU decode rows with per-op times, a
// benchmark name without the GOMAXPROCS suffix, a failure) into the
// tables of testdata/table.golden.
func TestGolden(t *testing.T) {
	in, err := os.ReadFile("testdata/bench.txt")
	if err != nil {
		t.Fatal(err)
	}
	var out, errs bytes.Buffer
	if err := run(bytes.NewReader(in), &out, &errs); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("testdata/table.golden", out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile("testdata/table.golden")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), want) {
		t.Errorf("table differs from testdata/table.golden (go test ./cmd/benchtable -update):\n%s", out.Bytes())
	}
	for _, line := range []string{"--- BENCH: BenchmarkVulkan/qwen2.5-0.5b-2layer/q4/vulkan-2", "FAIL\tlogitscope/web/e2e\t0.012s"} {
		if !strings.Contains(errs.String(), line+"\n") {
			t.Errorf("stderr lacks %q:\n%s", line, errs.String())
		}
	}
}

func TestRatio(t *testing.T) {
	for _, c := range []struct{ ours, peer, want string }{
		{"601.0", "300.5", "2"},
		{"48.20", "60.25", "0.8"},
		{"10", "3", "3.33"},
		{"10", "0", ""},
		{"0", "10", ""},
		{"x", "10", ""},
	} {
		if got := ratio(c.ours, c.peer); got != c.want {
			t.Errorf("ratio(%s, %s) = %q, want %q", c.ours, c.peer, got, c.want)
		}
	}
}

func TestEmpty(t *testing.T) {
	var out, errs bytes.Buffer
	if err := run(strings.NewReader("PASS\nok\n"), &out, &errs); err == nil {
		t.Errorf("no benchmark lines: no error, printed %q", out.String())
	}
}
