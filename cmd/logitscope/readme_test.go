package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"logitscope/internal/model/synth"
	"logitscope/internal/peer/llamacpp"
)

// README's sample of capture's output is what its commands print (the
// tiny preset, "Hello", --max-new 8): go test -run TestREADMESample
// -update rewrites the block when the model or the template changes. The
// wall time is shown as measured once, not compared.
func TestREADMESample(t *testing.T) {
	const readme = "../../README.md"
	b, err := os.ReadFile(readme)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	block := regexp.MustCompile("(?s)It prints:\n\n```\n(.*?)```\n").FindStringSubmatchIndex(text)
	if block == nil {
		t.Fatalf("%s: no block after \"It prints:\"", readme)
	}
	shown := text[block[2]:block[3]]

	dump := filepath.Join(t.TempDir(), "ref.dump")
	out, err := run(t, captureCmd, "--model", tiny(t), "--device", "cpu", "--max-new", "8", "--dump-logits", dump, "Hello")
	if err != nil {
		t.Fatal(err)
	}
	out = strings.ReplaceAll(out, dump, "/tmp/ref.dump")
	// The decoded text of a random model is noise: the block describes it.
	out = regexp.MustCompile(`(?s)---DECODED---\n.*`).ReplaceAllString(out, "---DECODED---\n<the decoded text without stop ids>\n")
	wall := regexp.MustCompile(`wall_time_seconds: [0-9.]+`)
	if *update {
		got := wall.ReplaceAllString(out, wall.FindString(shown))
		if err := os.WriteFile(readme, []byte(text[:block[2]]+got+text[block[3]:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if w := "wall_time_seconds: W"; wall.ReplaceAllString(out, w) != wall.ReplaceAllString(shown, w) {
		t.Errorf("%s shows\n%s\nthe commands print\n%s(go test -run TestREADMESample -update rewrites it)", readme, shown, out)
	}
}

// Every preset mkmodel knows has its row in the README's table.
func TestREADMEPresetTable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range synth.Presets {
		if !strings.Contains(string(b), "| `"+name+"` |") {
			t.Errorf("README.md: no row for the preset %s", name)
		}
	}
}

// cliArgv makes the test binary the command itself, its arguments as
// given, for the README's walkthrough in a shell.
const cliArgv = "LOGITSCOPE_TEST_CLI_ARGV"

// The README's walkthroughs (each sh block of go run ./cmd/logitscope
// commands, the GGUF example with llama.cpp's quantizer included) run top
// to bottom as written, in bash from the repository root, with /tmp/ a
// fresh folder and go run ./cmd/logitscope this test binary.
func TestREADMEWalkthrough(t *testing.T) {
	llamacpp.Harness(t) // export --type quantizes with it
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wrapper := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q \"$@\"\n", cliArgv, self)
	if err := os.WriteFile(filepath.Join(bin, "logitscope"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(b), -1)
	ran := 0
	for _, blk := range blocks {
		script := blk[1]
		if !strings.Contains(script, "go run ./cmd/logitscope") {
			continue
		}
		for _, line := range strings.Split(strings.TrimSpace(script), "\n") {
			if line != "" && !strings.HasPrefix(line, "#") && !strings.Contains(line, "go run ./cmd/logitscope ") {
				t.Fatalf("README.md: a walkthrough line that is not a logitscope command: %q", line)
			}
		}
		if strings.Contains(script, "conform") { // the sharded suite has its own test (TestConformMerge)
			continue
		}
		tmp := t.TempDir() + "/"
		script = strings.ReplaceAll(script, "go run ./cmd/logitscope", "logitscope")
		script = strings.ReplaceAll(script, "/tmp/", tmp)
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("README.md's walkthrough\n%s\nfailed: %v\n%s", blk[1], err, out)
		}
		// Each ends with a report of what quantization did (or a sweep of it).
		if !strings.Contains(string(out), "KLD") {
			t.Errorf("README.md's walkthrough\n%s\nprinted no report:\n%s", blk[1], out)
		}
		ran++
	}
	if ran != 4 {
		t.Errorf("%d walkthroughs ran; README.md has 4 (the commands, the GGUF example, its split through llama.cpp, the chain)", ran)
	}
}
