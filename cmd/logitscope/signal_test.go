package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"logitscope/internal/sys/tempfile"
)

// A SIGINT or SIGTERM that arrives while capture or quantize writes
// removes the temporaries, leaves no dump without its receipt, and exits
// with 128+signal and a message. The test binary runs the command as a
// child that stops inside the write: when the temporary named by
// LOGITSCOPE_CHILD_PAUSE is created.
func TestSignalRemovesTemporaries(t *testing.T) {
	if args := os.Getenv("LOGITSCOPE_CHILD_MAIN"); args != "" {
		pause := os.Getenv("LOGITSCOPE_CHILD_PAUSE")
		tempfile.Created = func(name string) {
			if strings.HasPrefix(filepath.Base(name), pause) {
				fmt.Fprintln(os.Stderr, "paused in", name)
				time.Sleep(time.Hour)
			}
		}
		os.Exit(cli(strings.Split(args, "\x1f"), os.Stdout, os.Stderr))
	}
	model := tiny(t)
	captureArgs := func(out string) []string {
		return []string{"capture", "--model", model, "--device", "cpu", "--max-new", "2", "--dump-logits", filepath.Join(out, "x.dump"), "Hi"}
	}
	cases := []struct {
		name  string
		args  func(out string) []string
		pause string // the prefix of the temporary the child stops in
		sig   syscall.Signal
	}{
		{"capture writing the dump", captureArgs, ".x.dump.tmp", syscall.SIGINT},
		{"capture writing the receipt", captureArgs, ".x.dump.receipt.json.tmp", syscall.SIGTERM},
		{"quantize", func(out string) []string {
			return []string{"quantize", "--model", model, "--scheme", "q4", "--out", filepath.Join(out, "q4")}
		}, ".q4.tmp", syscall.SIGINT},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			args := c.args(out)
			cmd := exec.Command(os.Args[0], "-test.run=^TestSignalRemovesTemporaries$")
			cmd.Env = append(os.Environ(), "LOGITSCOPE_CHILD_MAIN="+strings.Join(args, "\x1f"), "LOGITSCOPE_CHILD_PAUSE="+c.pause)
			pipe, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var stderr strings.Builder
			paused, done := make(chan struct{}), make(chan struct{})
			go func() {
				sc := bufio.NewScanner(pipe)
				for sc.Scan() {
					mu.Lock()
					stderr.WriteString(sc.Text() + "\n")
					mu.Unlock()
					if strings.HasPrefix(sc.Text(), "paused in ") {
						close(paused)
					}
				}
				close(done)
			}()
			select {
			case <-paused:
			case <-done:
			case <-time.After(2 * time.Minute):
			}
			cmd.Process.Signal(c.sig)
			select {
			case <-done:
			case <-time.After(time.Minute):
				cmd.Process.Kill()
				<-done
			}
			err = cmd.Wait()
			mu.Lock()
			log := stderr.String()
			mu.Unlock()
			if !strings.Contains(log, "paused in ") {
				t.Fatalf("the child never stopped in %s*:\n%s", c.pause, log)
			}
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 128+int(c.sig) {
				t.Errorf("exit: %v, want status %d", err, 128+int(c.sig))
			}
			if want := fmt.Sprintf("logitscope %s: %v: removed ", args[0], c.sig); !strings.Contains(log, want) || !strings.Contains(log, c.pause) {
				t.Errorf("stderr lacks %q naming the %s* temporary:\n%s", want, c.pause, log)
			}
			var left []string
			ents, _ := os.ReadDir(out)
			for _, e := range ents {
				left = append(left, e.Name())
			}
			if len(left) != 0 {
				t.Errorf("left behind: %q", left)
			}
		})
	}
}
