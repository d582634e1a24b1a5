package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"logitscope/internal/model/hub"
	"logitscope/internal/model/hub/download"
	"logitscope/internal/model/hub/hubtest"
	"logitscope/internal/sys/progress"
)

// TestCaptureHubID captures from hf:org/tiny through a hub on httptest
// (HF_ENDPOINT) into an empty hub cache (HF_HUB_CACHE): the dump equals
// the one captured from the folder the hub serves, stderr says what was
// downloaded, and with the hub gone the same id opens from the cache.
// tokenize and quantize take the id too.
func TestCaptureHubID(t *testing.T) {
	srv := hubtest.New()
	defer srv.Close()
	commit, err := srv.Add("org/tiny", "main", tiny(t))
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_HUB_CACHE", cache)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	tmp := t.TempDir()
	capture := func(model, name string) (string, string) {
		t.Helper()
		path := filepath.Join(tmp, name)
		var out, errb bytes.Buffer
		if err := captureCommand([]string{"--model", model, "--device", "cpu", "--max-new", "4", "--dump-logits", path, "Hello"}, &out, &errb); err != nil {
			t.Fatalf("capture --model %s: %v\n%s", model, err, errb.String())
		}
		return path, errb.String()
	}
	want, _ := capture(tiny(t), "dir.dump")
	got, stderr := capture("hf:org/tiny", "hub.dump")
	if fileSHA(t, got) != fileSHA(t, want) {
		t.Errorf("the dump from hf:org/tiny differs from the folder's")
	}
	snap := filepath.Join(cache, "models--org--tiny", "snapshots", commit)
	for _, line := range []string{"hf:org/tiny/config.json: 606 B in ", "hf:org/tiny/model.safetensors: 254 kB in ", "model: hf:org/tiny from " + srv.URL + ": " + snap + "\n"} {
		if !strings.Contains(stderr, line) {
			t.Errorf("stderr lacks %q:\n%s", line, stderr)
		}
	}
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "hf:") && strings.ContainsAny(line, "\x1b\r") {
			t.Errorf("stderr is not a terminal, yet a line has control characters: %q", line)
		}
	}

	var out, errb bytes.Buffer
	if err := tokenizeFrom(strings.NewReader(`"Hello"`+"\n"), []string{"--model", "hf:org/tiny"}, &out, &errb); err != nil || !strings.HasPrefix(out.String(), `{"ids":[`) {
		t.Errorf("tokenize --model hf:org/tiny: %q, %v", out.String(), err)
	}
	out.Reset()
	if err := quantize([]string{"--model", "hf:org/tiny", "--scheme", "q8"}, &out, &errb); err != nil {
		t.Fatalf("quantize --model hf:org/tiny: %v", err)
	}
	if _, err := os.Stat(filepath.Join(snap, "variants", "q8", "manifest.json")); err != nil {
		t.Errorf("quantize did not write the variant into the snapshot: %v", err)
	}

	srv.Close()
	again, stderr := capture("hf:org/tiny", "offline.dump")
	if fileSHA(t, again) != fileSHA(t, want) || !strings.Contains(stderr, "cannot be reached") {
		t.Errorf("with the hub gone: stderr %q", stderr)
	}
	if err := captureCommand([]string{"--model", "hf:org", "--dump-logits", filepath.Join(tmp, "x.dump"), "Hi"}, &out, &errb); err == nil || !strings.Contains(err.Error(), `hub id "hf:org": want ORG/NAME`) {
		t.Errorf("a malformed id: %v", err)
	}
}

// In a log, a download is a line per file (more for a slow one); a
// resumed one says where it resumed.
func Example_hubProgress() {
	id := hub.ID{Repo: "Qwen/Qwen2.5-0.5B-Instruct", Revision: "main"}
	steps := []download.Progress{
		{ID: id, File: "model.safetensors", Done: 400000000, Total: 988097824, State: download.StateStart},
		{ID: id, File: "model.safetensors", Done: 700000000, Total: 988097824, State: download.StateBytes},
		{ID: id, File: "model.safetensors", Done: 988097824, Total: 988097824, State: download.StateDone},
	}
	var b strings.Builder
	p := hubProgress(&b, progress.NewLines(&b))
	for _, s := range steps {
		p(s)
	}
	fmt.Print(regexp.MustCompile(`in [0-9.]+ s`).ReplaceAllString(b.String(), "in T s"))
	// Output:
	// hf:Qwen/Qwen2.5-0.5B-Instruct/model.safetensors: resuming at 400 MB of 988 MB
	// hf:Qwen/Qwen2.5-0.5B-Instruct/model.safetensors: 988 MB in T s
}
