package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"logitscope/internal/model/synth"
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
