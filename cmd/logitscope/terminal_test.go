package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/creack/pty"

	"logitscope/internal/format/receipt"
)

// childArgs is the environment variable that makes the test binary run
// cli on the JSON list of arguments it holds (TestMain).
const childArgs = "LOGITSCOPE_TEST_CLI_ARGS"

// cliChild is the command line args as a process of its own.
func cliChild(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	b, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childArgs+"="+string(b), "TERM=xterm")
	return cmd
}

// onTerminal runs args on a pseudo-terminal and returns all it printed.
func onTerminal(t *testing.T, args ...string) string {
	t.Helper()
	cmd := cliChild(t, args...)
	tty, err := pty.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	var out bytes.Buffer
	_, err = io.Copy(&out, tty)
	if err != nil && !errors.Is(err, syscall.EIO) { // EIO: the child closed the terminal
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out.Bytes())
	}
	return out.String()
}

// onPipes runs args with stdout and stderr on pipes, as in a CI log.
func onPipes(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := cliChild(t, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, e.Bytes())
	}
	return o.String(), e.String()
}

// Every long command shows a live bar on a terminal and plain lines in a
// log: no carriage return, no "0 / 0 MB", one final line per step.
func TestProgressOnTerminalAndPipe(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	steps := []struct {
		name  string
		args  []string
		lines []string // the final lines on a pipe
		bar   string   // on a terminal, redrawn with \r
	}{
		{"mkmodel", []string{"mkmodel", "--preset", "tiny", "--out", dir}, []string{"mkmodel tiny: 26 tensors in"}, "100% |"},
		{"quantize", []string{"quantize", "--model", dir, "--scheme", "q4"}, []string{"quantize q4: 26 tensors in"}, "100% |"},
		{"capture", []string{"capture", "--model", dir, "--variant", "q4", "--device", "cpu", "--max-new", "3", "--force", "--dump-logits", filepath.Join(dir, "x.dump"), "Hi"},
			[]string{"loading weights: 73.7 kB in", "capture greedy: "}, "100% |"},
		// The file's size is known only once written: a spinner.
		{"export", []string{"export", "--model", dir, "--force", "--gguf", filepath.Join(dir, "x.gguf")}, []string{"export x.gguf: 515 kB in"}, "| export x.gguf"},
	}
	for _, s := range steps {
		t.Run(s.name+"/pipe", func(t *testing.T) {
			_, stderr := onPipes(t, s.args...)
			if strings.Contains(stderr, "\r") || strings.Contains(stderr, " 0 MB") {
				t.Errorf("stderr on a pipe has a carriage return or 0 MB:\n%q", stderr)
			}
			for _, l := range s.lines {
				if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(l)).MatchString(stderr) {
					t.Errorf("no line starting %q in:\n%s", l, stderr)
				}
			}
		})
		t.Run(s.name+"/terminal", func(t *testing.T) {
			out := onTerminal(t, s.args...)
			if !strings.Contains(out, "\r") || !strings.Contains(out, s.bar) {
				t.Errorf("no progress bar on the terminal:\n%q", out)
			}
		})
	}
}

// Help goes to stdout and succeeds; a mistake goes to stderr and fails,
// a mistyped command named as such with the one it likely meant.
func TestUsageAndExitCodes(t *testing.T) {
	type want struct {
		code           int
		stdout, stderr string // substrings; "" for an empty stream
	}
	cases := []struct {
		args []string
		want want
	}{
		{nil, want{2, "", "usage: logitscope COMMAND"}},
		{[]string{"-h"}, want{0, "usage: logitscope COMMAND", ""}},
		{[]string{"--help"}, want{0, "quantize  write a quantized variant", ""}},
		{[]string{"help"}, want{0, "usage: logitscope COMMAND", ""}},
		{[]string{"help", "report"}, want{0, "usage: logitscope report", ""}},
		{[]string{"quantise"}, want{2, "", `unknown command "quantise"; did you mean quantize?`}},
		{[]string{"cap"}, want{2, "", `unknown command "cap"; did you mean capture?`}},
		{[]string{"frobnicate"}, want{2, "", `unknown command "frobnicate"` + "\n"}},
		{[]string{"capture", "--bogus"}, want{1, "", "flag provided but not defined: -bogus (logitscope capture -h lists its flags)"}},
		{[]string{"mkmodel", "--preset", "nope", "--out", "x"}, want{1, "", `unknown preset "nope"`}},
		{[]string{"conform", "merge", "-h"}, want{0, "usage: logitscope conform merge", ""}},
	}
	for name := range commands {
		cases = append(cases, struct {
			args []string
			want want
		}{[]string{name, "-h"}, want{0, "usage: logitscope " + name, ""}},
			struct {
				args []string
				want want
			}{[]string{name, "--help"}, want{0, "flags:\n", ""}})
	}
	for _, c := range cases {
		var stdout, stderr bytes.Buffer
		code := cli(c.args, &stdout, &stderr)
		check := func(stream, got, want string) {
			if want == "" && got != "" || !strings.Contains(got, want) {
				t.Errorf("%q: %s %q, want %q", c.args, stream, got, want)
			}
		}
		if code != c.want.code {
			t.Errorf("%q: exit %d, want %d", c.args, code, c.want.code)
		}
		check("stdout", stdout.String(), c.want.stdout)
		check("stderr", stderr.String(), c.want.stderr)
	}
}

// A hint that names a command names one that works: following it makes
// the failed command succeed; a mistyped scheme gets no command (none
// would make it), but the schemes that exist.
func TestHintsWork(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if _, err := run(t, mkmodelCmd, "--preset", "tiny", "--out", dir); err != nil {
		t.Fatal(err)
	}
	dump := filepath.Join(dir, "x.dump")
	capture := []string{"capture", "--model", dir, "--device", "cpu", "--max-new", "2", "--force", "--dump-logits", dump, "--variant", "q8", "Hi"}
	followHint := func(capture []string) {
		t.Helper()
		var stderr bytes.Buffer
		if code := cli(capture, io.Discard, &stderr); code != 1 {
			t.Fatalf("%q: exit %d, want 1", capture, code)
		}
		hint := regexp.MustCompile(`run (logitscope quantize .*)`).FindStringSubmatch(stderr.String())
		if hint == nil {
			t.Fatalf("no quantize command in %q", stderr.String())
		}
		if code := cli(strings.Fields(hint[1])[1:], io.Discard, io.Discard); code != 0 {
			t.Fatalf("the hint %q: exit %d", hint[1], code)
		}
		if code := cli(capture, io.Discard, io.Discard); code != 0 {
			t.Fatalf("capture after the hint %q: exit %d", hint[1], code)
		}
	}
	followHint(capture) // a missing variant
	// Another model (seed 1) given the first one's variant: a stale one.
	other := filepath.Join(t.TempDir(), "tiny1")
	if _, err := run(t, mkmodelCmd, "--preset", "tiny", "--seed", "1", "--out", other); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(other, "variants", "q8"), os.DirFS(filepath.Join(dir, "variants", "q8"))); err != nil {
		t.Fatal(err)
	}
	followHint([]string{"capture", "--model", other, "--device", "cpu", "--max-new", "2", "--force", "--dump-logits", dump, "--variant", "q8", "Hi"})

	var stderr bytes.Buffer

	capture[len(capture)-2] = "q5"
	if code := cli(capture, io.Discard, &stderr); code != 1 || strings.Contains(stderr.String(), "logitscope quantize") ||
		!strings.Contains(stderr.String(), "--variant q5: no such scheme or variant directory (schemes: f32, q8, q6, q4, exl3-kK[-CODEBOOK];") {
		t.Errorf("--variant q5: exit %d, %q", code, stderr.String())
	}
}

// A dry run names the runtime and device the real run then records in
// its receipt, on whatever this machine has.
func TestDryRunIsHonest(t *testing.T) {
	dir := tiny(t)
	for _, device := range []string{"cpu", "auto"} {
		dump := filepath.Join(t.TempDir(), "x.dump")
		args := []string{"--model", dir, "--device", device, "--max-new", "2", "--dump-logits", dump, "Hi"}
		plan, err := run(t, captureCmd, append(args, "--dry-run")...)
		if err != nil {
			t.Fatal(err)
		}
		var p struct{ Runtime, Device string }
		if err := json.Unmarshal([]byte(plan), &p); err != nil {
			t.Fatal(err)
		}
		if _, err := run(t, captureCmd, args...); err != nil {
			t.Fatal(err)
		}
		r, err := receipt.Read(receipt.Path(dump))
		if err != nil {
			t.Fatal(err)
		}
		if p.Device != r.Device || p.Runtime == "" || strings.HasPrefix(r.Device, "wasm+") != (p.Runtime == "wasm") {
			t.Errorf("--device %s: the plan says %s on %q, the capture ran on %q", device, p.Runtime, p.Device, r.Device)
		}
	}
}
