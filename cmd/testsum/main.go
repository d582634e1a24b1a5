// Command testsum runs go test and ends with what it skipped and why, so
// that a green run cannot hide whole suites skipped for a missing
// component (make test runs it):
//
//	go run ./cmd/testsum [go test flags and packages]
//
// It runs `go test -json` with the arguments, prints what plain go test
// would (a line per package, the output of failing tests, build errors),
// then the skipped tests grouped by reason: a missing component
// (prereq.Missing's "missing COMPONENT: ...") as one group with its
// reason, counts and packages, other reasons with the tests they skipped.
// Last come the slowest top-level tests (CI's time is bounded: this is
// where to look first). Its exit status is go test's.
package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
)

func main() {
	cmd := exec.Command("go", append([]string{"test", "-json"}, os.Args[1:]...)...)
	cmd.Stderr = os.Stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		os.Exit(2)
	}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		os.Exit(2)
	}
	s := newSummary(os.Stdout)
	if err := s.read(pipe); err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
	}
	s.writeSkips()
	s.writeSlowest(10)
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		os.Exit(ee.ExitCode())
	} else if err != nil {
		fmt.Fprintln(os.Stderr, "testsum:", err)
		os.Exit(2)
	}
}

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
	// ImportPath is set on build-output events.
	ImportPath string
}

// summary follows go test -json's events.
type summary struct {
	w      io.Writer
	output map[string][]string // package or package+" "+test: its output lines
	skips  []skip
	times  []timing // top-level tests that passed or failed
}

type timing struct {
	test string // package+" "+test
	secs float64
}

type skip struct{ pkg, test, reason string }

func newSummary(w io.Writer) *summary {
	return &summary{w: w, output: map[string][]string{}}
}

// read prints what plain go test prints, as events arrive, and keeps the
// skips.
func (s *summary) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Fprintln(s.w, sc.Text()) // not an event: go test's own line
			continue
		}
		s.event(e)
	}
	return sc.Err()
}

func (s *summary) event(e event) {
	key := e.Package
	if e.Test != "" {
		key += " " + e.Test
	}
	if (e.Action == "pass" || e.Action == "fail") && e.Test != "" && !strings.Contains(e.Test, "/") {
		s.times = append(s.times, timing{key, e.Elapsed})
	}
	switch e.Action {
	case "build-output":
		fmt.Fprint(s.w, e.Output)
	case "output":
		s.output[key] = append(s.output[key], e.Output)
	case "fail":
		// A test's log and its --- FAIL; a package's own lines: a panic,
		// a TestMain's failure, FAIL.
		fmt.Fprint(s.w, strings.Join(slices.DeleteFunc(s.output[key], isRunLine), ""))
		delete(s.output, key)
	case "skip":
		if e.Test != "" {
			s.skips = append(s.skips, skip{e.Package, e.Test, reason(s.output[key])})
		} else {
			fmt.Fprint(s.w, strings.Join(slices.DeleteFunc(s.output[key], isRunLine), ""))
		}
		delete(s.output, key)
	case "pass":
		if e.Test == "" {
			fmt.Fprintf(s.w, "ok  \t%s\t%.3fs\n", e.Package, e.Elapsed)
		}
		delete(s.output, key)
	}
}

// isRunLine is one of the lines that -json's verbose run adds and plain
// go test does not print.
func isRunLine(line string) bool {
	t := strings.TrimLeft(line, " ")
	return strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- PASS") || strings.HasPrefix(t, "--- SKIP") ||
		line == "PASS\n" || strings.HasPrefix(line, "ok  \t")
}

// logLine is a test's log line: "    file_test.go:12: message".
var logLine = regexp.MustCompile(`^\s+[\w.-]+\.go:\d+: (.*)`)

// reason is why a test skipped: the last message it logged (Skip logs
// its reason last).
func reason(lines []string) string {
	r := ""
	for _, l := range lines {
		if m := logLine.FindStringSubmatch(l); m != nil {
			r = strings.TrimSpace(m[1])
		}
	}
	if r == "" {
		return "(no reason given)"
	}
	return r
}

// missing reads prereq's "missing COMPONENT: why".
var missing = regexp.MustCompile(`^missing ([^:]+): (.*)`)

// writeSkips prints the skipped tests: a group per missing component,
// then the other reasons with their tests.
func (s *summary) writeSkips() {
	if len(s.skips) == 0 {
		fmt.Fprintln(s.w, "\nno tests skipped")
		return
	}
	type group struct {
		reasons []string
		tests   []string
		pkgs    map[string]bool
	}
	groups := map[string]*group{}
	var order []string
	for _, k := range s.skips {
		name, why := "", k.reason
		if m := missing.FindStringSubmatch(k.reason); m != nil {
			name, why = "missing "+m[1], m[2]
		} else {
			name = "skipped: " + k.reason
		}
		g := groups[name]
		if g == nil {
			g = &group{pkgs: map[string]bool{}}
			groups[name] = g
			order = append(order, name)
		}
		if !slices.Contains(g.reasons, why) {
			g.reasons = append(g.reasons, why)
		}
		g.tests = append(g.tests, k.pkg+" "+k.test)
		g.pkgs[k.pkg] = true
	}
	// Missing components first: they are what a fresh machine lacks.
	slices.SortStableFunc(order, func(a, b string) int {
		return boolInt(!strings.HasPrefix(a, "missing ")) - boolInt(!strings.HasPrefix(b, "missing "))
	})
	fmt.Fprintf(s.w, "\n%s skipped:\n", count(len(s.skips), "test"))
	for _, name := range order {
		g := groups[name]
		pkgs := slices.Sorted(maps.Keys(g.pkgs))
		fmt.Fprintf(s.w, "  %s: %s in %s (%s)\n", name, count(len(g.tests), "test"), count(len(pkgs), "package"), strings.Join(pkgs, ", "))
		if strings.HasPrefix(name, "missing ") {
			for i, r := range g.reasons {
				if i == 3 {
					fmt.Fprintf(s.w, "      … and %d other reasons\n", len(g.reasons)-3)
					break
				}
				fmt.Fprintf(s.w, "      %s\n", r)
			}
			continue
		}
		for i, tst := range g.tests {
			if i == 5 {
				fmt.Fprintf(s.w, "      … and %d more\n", len(g.tests)-5)
				break
			}
			fmt.Fprintf(s.w, "      %s\n", tst)
		}
	}
}

// writeSlowest prints the n slowest top-level tests that took a second
// or more, slowest first.
func (s *summary) writeSlowest(n int) {
	slow := slices.DeleteFunc(slices.Clone(s.times), func(t timing) bool { return t.secs < 1 })
	if len(slow) == 0 {
		return
	}
	slices.SortStableFunc(slow, func(a, b timing) int { return cmp.Compare(b.secs, a.secs) })
	fmt.Fprintf(s.w, "\nslowest tests (of %s taking 1 s or more):\n", count(len(slow), "test"))
	for _, t := range slow[:min(n, len(slow))] {
		fmt.Fprintf(s.w, "  %7.1fs %s\n", t.secs, t.test)
	}
}

// count is "1 test", "2 tests".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
