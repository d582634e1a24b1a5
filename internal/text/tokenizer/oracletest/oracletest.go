// Package oracletest runs the Hugging Face oracle that tests compare
// against: tokenizers.js and @huggingface/jinja on real tokenizer files,
// through internal/text/tokenizer/testdata/oracle/oracle.mjs. A test that needs it
// skips on a developer machine without node or the npm install and fails
// in CI, which installs both (make deps).
package oracletest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"logitscope/internal/sys/prereq"
)

// Dir is internal/text/tokenizer/testdata/oracle, wherever the test runs from.
var Dir = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "oracle")
}()

// Node returns the node binary, after checking that the oracle's npm
// packages are installed.
func Node(tb testing.TB) string {
	tb.Helper()
	skip := func(why string) { tb.Helper(); prereq.Missing(tb, prereq.Node, why) }
	node, err := exec.LookPath("node")
	if err != nil {
		skip("node not found; install Node.js and npm (apt-get install nodejs npm) and run `make deps` (npm ci --prefix internal/text/tokenizer/testdata/oracle)")
	}
	if _, err := os.Stat(filepath.Join(Dir, "node_modules")); err != nil {
		skip("oracle not installed; run `make deps` (npm ci --prefix internal/text/tokenizer/testdata/oracle)")
	}
	return node
}

// Run runs `node oracle.mjs args...` with stdin and returns its stdout.
// TZ is UTC, so that dates the oracle formats do not depend on the machine.
func Run(tb testing.TB, stdin []byte, args ...string) []byte {
	tb.Helper()
	cmd := exec.Command(Node(tb), append([]string{"oracle.mjs"}, args...)...)
	cmd.Dir = Dir
	cmd.Env = append(os.Environ(), "TZ=UTC")
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("oracle %v: %v\n%s", args, err, stderr.Bytes())
	}
	return out
}
