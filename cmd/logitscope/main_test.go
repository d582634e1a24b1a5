package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"syscall"
	"testing"

	"logitscope/internal/model/synth"
)

var update = flag.Bool("update", false, "rewrite golden files")

// tinyModel writes the tiny preset (seed 0) once per test binary.
var tinyDir string

func tiny(t *testing.T) string {
	t.Helper()
	if tinyDir == "" {
		dir, err := os.MkdirTemp("", "logitscope-tiny-")
		if err != nil {
			t.Fatal(err)
		}
		if err := synth.Write(synth.Presets["tiny"], dir, synth.Options{}); err != nil {
			t.Fatal(err)
		}
		tinyDir = dir
	}
	return tinyDir
}

func TestMain(m *testing.M) {
	// The test binary doubles as the command (cliChild), so that tests
	// can give it a real terminal or a pipe.
	if args := os.Getenv(childArgs); args != "" {
		var a []string
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			panic(err)
		}
		os.Exit(cli(a, os.Stdout, os.Stderr))
	}
	if os.Getenv(cliArgv) != "" {
		os.Exit(cli(os.Args[1:], os.Stdout, os.Stderr))
	}
	code := m.Run()
	for _, p := range []string{tinyDir, enginePath} {
		if p != "" {
			os.RemoveAll(p)
		}
	}
	os.Exit(code)
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Fatalf("%s differs:\n--- got\n%s--- want\n%s", path, got, want)
	}
}

func fileSHA(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func run(t *testing.T, cmd func([]string, *bytes.Buffer, *bytes.Buffer) error, args ...string) (string, error) {
	var out, errb bytes.Buffer
	err := cmd(args, &out, &errb)
	return out.String(), err
}

func captureCmd(args []string, out, errb *bytes.Buffer) error { return captureCommand(args, out, errb) }
func mkmodelCmd(args []string, out, errb *bytes.Buffer) error { return mkmodel(args, out, errb) }

var wallTime = regexp.MustCompile(`wall_time_seconds: [0-9.]+`)

// The printed fields and the dump bytes of a fixed capture are golden.
func TestCaptureGolden(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ref.dump")
	out, err := run(t, captureCmd, "--model", tiny(t), "--device", "cpu", "--max-new", "8", "--dump-logits", path, "What is the capital of France?")
	if err != nil {
		t.Fatal(err)
	}
	out = wallTime.ReplaceAllString(out, "wall_time_seconds: W")
	out = strings.ReplaceAll(out, path, "DUMP")
	golden(t, "capture-tiny.golden", out+"dump_sha256: "+fileSHA(t, path)+"\n")
}

func TestCaptureStopAndPromptIDs(t *testing.T) {
	dir := tiny(t)
	path := filepath.Join(t.TempDir(), "a.dump")
	out, err := run(t, captureCmd, "--model", dir, "--dump-logits", path, "--max-new", "4", "Hi")
	if err != nil {
		t.Fatal(err)
	}
	first := regexp.MustCompile(`output_ids: \[(\d+)`).FindStringSubmatch(out)[1]
	// Stopping on the first token: one row, stop id kept in output_ids,
	// left out of the decoded text. The prompt may come before the flags.
	out, err = run(t, captureCmd, "Hi", "--model", dir, "--force", "--dump-logits", path, "--prompt-ids", "-", "--stop", "9999", first)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"output_ids: [" + first + "]\n", "stop_reason: 1\n",
		"logit_rows_dumped: 1 rows x 512 vocab", "---DECODED---\n\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasPrefix(out, `{"ids":[`) {
		t.Errorf("--prompt-ids - did not print the ids first:\n%s", out)
	}
	if st, _ := os.Stat(path); st.Size() != 16+512*4 {
		t.Errorf("dump is %d bytes, want one row", st.Size())
	}
}

// mkmodel's files are byte-identical for a seed; their hashes are golden.
func TestMkmodelDeterministic(t *testing.T) {
	hashes := func(seed string) map[string]string {
		dir := filepath.Join(t.TempDir(), "m")
		if _, err := run(t, mkmodelCmd, "--preset", "tiny", "--seed", seed, "--out", dir); err != nil {
			t.Fatal(err)
		}
		ents, _ := os.ReadDir(dir)
		h := map[string]string{}
		for _, e := range ents {
			h[e.Name()] = fileSHA(t, filepath.Join(dir, e.Name()))
		}
		return h
	}
	a, b, c := hashes("0"), hashes("0"), hashes("1")
	var lines []string
	for name, sum := range a {
		if b[name] != sum {
			t.Errorf("%s differs between two runs with seed 0", name)
		}
		lines = append(lines, sum+"  "+name)
	}
	if a["model.safetensors"] == c["model.safetensors"] {
		t.Error("seeds 0 and 1 gave the same weights")
	}
	if a["tokenizer.json"] != c["tokenizer.json"] {
		t.Error("the seed changed the tokenizer")
	}
	sort.Strings(lines)
	golden(t, "mkmodel-tiny-seed0.sha256", strings.Join(lines, "\n")+"\n")
}

// copyModel copies the tiny checkpoint so that a test can damage it.
func copyModel(t *testing.T) string {
	dst := filepath.Join(t.TempDir(), "model")
	os.MkdirAll(dst, 0o755)
	ents, _ := os.ReadDir(tiny(t))
	for _, e := range ents {
		b, _ := os.ReadFile(filepath.Join(tiny(t), e.Name()))
		os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
	}
	return dst
}

func edit(t *testing.T, path, old, new string) {
	b, err := os.ReadFile(path)
	if err != nil || !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s has no %q", path, old)
	}
	os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644)
}

// Bad input: a one-line error naming the file and the problem, and no dump.
func TestCaptureErrors(t *testing.T) {
	cases := []struct {
		name   string
		damage func(dir string) // nil: the model is fine
		args   []string
		want   []string // substrings of the error
	}{
		{"missing model dir", func(dir string) { os.RemoveAll(dir) }, nil, []string{"model"}},
		{"missing config", func(dir string) { os.Remove(filepath.Join(dir, "config.json")) }, nil, []string{"config.json"}},
		{"missing tokenizer", func(dir string) { os.Remove(filepath.Join(dir, "tokenizer.json")) }, nil, []string{"tokenizer.json"}},
		{"missing weights", func(dir string) { os.Remove(filepath.Join(dir, "model.safetensors")) }, nil, []string{"safetensors"}},
		{"unknown architecture", func(dir string) {
			edit(t, filepath.Join(dir, "config.json"), "Qwen2ForCausalLM", "MambaForCausalLM")
		}, nil, []string{"config.json", "MambaForCausalLM", "not supported"}},
		{"hidden size vs tensors", func(dir string) {
			edit(t, filepath.Join(dir, "config.json"), `"intermediate_size": 176`, `"intermediate_size": 192`)
		}, nil, []string{"model.safetensors", "mlp.gate_proj.weight", "[176 64]", "[192 64]"}},
		{"missing config field", func(dir string) {
			edit(t, filepath.Join(dir, "config.json"), `"hidden_size": 64,`, ``)
		}, nil, []string{"config.json", "hidden_size"}},
		{"truncated weights", func(dir string) {
			p := filepath.Join(dir, "model.safetensors")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-100], 0o644)
		}, nil, []string{"model.safetensors"}},
		{"lying header size", func(dir string) {
			p := filepath.Join(dir, "model.safetensors")
			b, _ := os.ReadFile(p)
			b[7] = 0x7f
			os.WriteFile(p, b, 0o644)
		}, nil, []string{"model.safetensors", "header"}},
		{"prompt longer than context", func(dir string) {
			edit(t, filepath.Join(dir, "config.json"), `"max_position_embeddings": 4096`, `"max_position_embeddings": 12`)
		}, nil, []string{"exceeds", "context of 12 tokens"}},
		{"max-new 0", nil, []string{"--max-new", "0"}, []string{"--max-new 0"}},
		{"two prompts", nil, []string{"extra"}, []string{"exactly one PROMPT"}},
		{"bad stop id", nil, []string{"--stop", "x1"}, []string{`"x1" is not a token id`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := copyModel(t)
			if c.damage != nil {
				c.damage(dir)
			}
			dumpPath := filepath.Join(t.TempDir(), "x.dump")
			args := append([]string{"--model", dir, "--dump-logits", dumpPath, "Hello"}, c.args...)
			_, err := run(t, captureCmd, args...)
			if err == nil {
				t.Fatal("capture succeeded")
			}
			msg := err.Error()
			t.Log(msg)
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not mention %q", msg, w)
				}
			}
			if _, err := os.Stat(dumpPath); err == nil {
				t.Error("a failed capture wrote a dump")
			}
		})
	}
}

// A hub cache folder resolves to its only snapshot.
func TestCaptureHubCache(t *testing.T) {
	repo := filepath.Join(t.TempDir(), "models--Qwen--Tiny")
	snap := filepath.Join(repo, "snapshots", "0123abcd")
	os.MkdirAll(filepath.Dir(snap), 0o755)
	if err := os.Symlink(tiny(t), snap); err != nil {
		t.Fatal(err)
	}
	out, err := run(t, captureCmd, "--model", repo, "--max-new", "2", "--dump-logits", filepath.Join(t.TempDir(), "h.dump"), "Hi")
	if err != nil || !strings.Contains(out, "logit_rows_dumped: 2 rows x 512 vocab") {
		t.Fatalf("out %q err %v", out, err)
	}
}

func Example_idsString() {
	fmt.Println(idsString([]int{151644, 8948, 198}))
	// Output: [151644, 8948, 198]
}

// A capture without --model says which model it ran: the synthetic tiny
// preset, not the page's trained demo.
func TestCaptureNamesTheDefaultModel(t *testing.T) {
	t.Setenv("LOGITSCOPE_MODEL", "")
	var out, errb bytes.Buffer
	if err := captureCommand([]string{"--dry-run", "--dump-logits", filepath.Join(t.TempDir(), "x.dump"), "Hi"}, &out, &errb); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errb.String(), "the synthetic tiny preset, random weights (no --model, no $LOGITSCOPE_MODEL)") {
		t.Fatalf("stderr %q names no model", errb.String())
	}
}

// capture … - reads the prompt from stdin: the same ids as the prompt
// given as the argument.
func TestCapturePromptFromStdin(t *testing.T) {
	ids := func(prompt string, stdin string) string {
		t.Helper()
		if stdin != "" {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			w.WriteString(stdin)
			w.Close()
			old := os.Stdin
			os.Stdin = r
			defer func() { os.Stdin = old; r.Close() }()
		}
		out, err := run(t, captureCmd, "--model", tiny(t), "--dry-run", "--prompt-ids", "-", "--dump-logits", filepath.Join(t.TempDir(), "x.dump"), prompt)
		if err != nil {
			t.Fatal(err)
		}
		return out[:strings.Index(out, "\n")]
	}
	literal, piped := ids("Grace be with you.", ""), ids("-", "Grace be with you.")
	if literal != piped || !strings.Contains(literal, `"ids"`) {
		t.Fatalf("prompt ids from the argument %s, from stdin %s", literal, piped)
	}
}

// An output that is there is never replaced silently: a regular file
// needs --force, a device, FIFO or directory is refused even with it, and
// nothing is written beside it (no /dev/null.receipt.json).
func TestOutputPathsAreNotReplaced(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "old.dump")
	os.WriteFile(existing, []byte("keep"), 0o644)
	fifo := filepath.Join(dir, "fifo.gguf")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cmd  func([]string, *bytes.Buffer, *bytes.Buffer) error
		args []string
		want string
	}{
		{captureCmd, []string{"--model", tiny(t), "--max-new", "1", "--dump-logits", existing, "Hi"}, "old.dump exists: give --force to replace it"},
		{captureCmd, []string{"--model", tiny(t), "--max-new", "1", "--force", "--dump-logits", os.DevNull, "Hi"}, "/dev/null: not a regular file"},
		{captureCmd, []string{"--model", tiny(t), "--max-new", "1", "--force", "--dump-logits", dir, "Hi"}, "not a regular file"},
		{exportCmd, []string{"--model", tiny(t), "--gguf", existing}, "old.dump exists: give --force"},
		{exportCmd, []string{"--model", tiny(t), "--force", "--gguf", fifo}, "fifo.gguf: not a regular file"},
		{exportCmd, []string{"--model", tiny(t), "--force", "--gguf", os.DevNull}, "/dev/null: not a regular file"},
	} {
		if _, err := run(t, c.cmd, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	if b, _ := os.ReadFile(existing); string(b) != "keep" {
		t.Error("the existing dump was replaced")
	}
	if st, err := os.Stat(os.DevNull); err != nil || st.Mode().IsRegular() {
		t.Fatalf("/dev/null is now %v", st.Mode())
	}
	if _, err := os.Stat(os.DevNull + ".receipt.json"); err == nil {
		t.Error("a receipt was written beside /dev/null")
	}
	if _, err := run(t, captureCmd, "--model", tiny(t), "--device", "cpu", "--max-new", "1", "--force", "--dump-logits", existing, "Hi"); err != nil {
		t.Fatalf("--force over a dump: %v", err)
	}
}
