package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"logitscope/internal/format/logitdir"
)

// reportBody is a text report without its first lines, which name the
// inputs.
func reportBody(t *testing.T, ref, test string) string {
	t.Helper()
	out, err := run(t, reportCmd, "--ref", ref, "--test", test)
	if err != nil {
		t.Fatal(err)
	}
	_, body, _ := strings.Cut(out, "logitscope margins:")
	return body
}

// A panel captured window by window, whole or in shards (by flag, by a
// Slurm job array's variables, by a Kubernetes Indexed Job's), reports
// exactly as the same panel captured into one dump.
func TestWindowedCaptureShards(t *testing.T) {
	dir := quantized(t)
	panel := panelFile(t)
	out := t.TempDir()
	capture := func(variant string, extra ...string) {
		t.Helper()
		args := append([]string{"--model", dir, "--device", "cpu", "--runtime", "native", "--variant", variant, "--panel", panel, "--window", "64"}, extra...)
		if _, err := run(t, captureCmd, args...); err != nil {
			t.Fatal(err)
		}
	}
	capture("f32", "--dump-logits", filepath.Join(out, "f32.dump"))
	capture("q4", "--dump-logits", filepath.Join(out, "q4.dump"))
	capture("f32", "--out", filepath.Join(out, "f32"))
	capture("q4", "--out", filepath.Join(out, "q4-s1"), "--shard", "1/3")
	t.Setenv("SLURM_ARRAY_TASK_ID", "5")
	t.Setenv("SLURM_ARRAY_TASK_MIN", "4")
	t.Setenv("SLURM_ARRAY_TASK_COUNT", "3")
	capture("q4", "--out", filepath.Join(out, "q4-s2"))
	os.Unsetenv("SLURM_ARRAY_TASK_ID")
	t.Setenv("JOB_COMPLETION_INDEX", "2")
	t.Setenv("LOGITSCOPE_SHARDS", "3")
	capture("q4", "--out", filepath.Join(out, "q4-s3"))

	r, err := logitdir.ReadReceipt(filepath.Join(out, "q4-s2"))
	if err != nil || r.Shard != "2/3" || r.LogitFiles[0].WindowID != "1" {
		t.Fatalf("the Slurm task's shard: %+v %v", r, err)
	}
	want := reportBody(t, filepath.Join(out, "f32.dump"), filepath.Join(out, "q4.dump"))
	shards := strings.Join([]string{filepath.Join(out, "q4-s3"), filepath.Join(out, "q4-s1"), filepath.Join(out, "q4-s2")}, ",")
	if got := reportBody(t, filepath.Join(out, "f32"), shards); got != want {
		t.Fatalf("the shards' report differs from the dumps':\n%s\nwant\n%s", got, want)
	}
	if _, err := run(t, reportCmd, "--ref", filepath.Join(out, "f32"), "--test", filepath.Join(out, "q4-s1")); err == nil || !strings.Contains(err.Error(), "is not in the test capture") {
		t.Fatalf("one shard against the whole: %v", err)
	}
	if _, err := run(t, reportCmd, "--ref", filepath.Join(out, "f32"), "--test", filepath.Join(out, "q4.dump")); err == nil || !strings.Contains(err.Error(), "compare two of a kind") {
		t.Fatalf("a capture against a dump: %v", err)
	}
}

// A capture killed between windows resumes: the finished windows are
// kept, the rest computed, and the receipt is the uninterrupted one's.
// Without --resume, or over another capture's windows, it is refused.
func TestWindowedCaptureResume(t *testing.T) {
	dir := quantized(t)
	panel := panelFile(t)
	out := filepath.Join(t.TempDir(), "cap")
	args := []string{"--model", dir, "--device", "cpu", "--runtime", "native", "--panel", panel, "--window", "64", "--out", out}
	if _, err := run(t, captureCmd, args...); err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(filepath.Join(out, logitdir.ReceiptName))
	if err != nil {
		t.Fatal(err)
	}
	// What a kill leaves: some windows, no receipt.
	for _, p := range []string{logitdir.ReceiptName, logitdir.WindowPath(3), logitdir.WindowPath(7)} {
		if err := os.Remove(filepath.Join(out, p)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := run(t, captureCmd, args...); err == nil || !strings.Contains(err.Error(), "--resume") {
		t.Fatalf("over finished windows without --resume: %v", err)
	}
	got, err := run(t, captureCmd, append(args, "--resume")...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "windows_kept: 16\nwindows_written: 2\n") {
		t.Fatalf("resume:\n%s", got)
	}
	if again, _ := os.ReadFile(filepath.Join(out, logitdir.ReceiptName)); string(again) != string(whole) {
		t.Fatal("the resumed capture's receipt differs from the uninterrupted one's")
	}
	// Another variant's capture in the same directory is not resumed.
	if _, err := run(t, captureCmd, append(args, "--resume", "--variant", "q4")...); err == nil || !strings.Contains(err.Error(), "window-0000.safetensors: variant") {
		t.Fatalf("resuming another variant's windows: %v", err)
	}
	// A changed byte in a window is refused by report, naming the file.
	p := filepath.Join(out, logitdir.WindowPath(5))
	b, _ := os.ReadFile(p)
	b[len(b)-1] ^= 1
	os.WriteFile(p, b, 0o644)
	if _, err := run(t, reportCmd, "--ref", out, "--test", out); err == nil || !strings.Contains(err.Error(), "window-0005.safetensors") {
		t.Fatalf("a changed window: %v", err)
	}
}

// The Kubernetes manifest deals as many shards as the Job has
// completions, and passes capture only flags it has.
func TestIndexedJobManifest(t *testing.T) {
	b, err := os.ReadFile("cluster/capture-job.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m := string(b)
	completions := regexp.MustCompile(`(?m)^\s+completions: (\d+)$`).FindStringSubmatch(m)
	shards := regexp.MustCompile(`name: LOGITSCOPE_SHARDS\s+value: "(\d+)"`).FindStringSubmatch(m)
	if completions == nil || shards == nil || completions[1] != shards[1] {
		t.Fatalf("completions %v, LOGITSCOPE_SHARDS %v", completions, shards)
	}
	help, _ := run(t, captureCmd, "-h")
	for _, f := range regexp.MustCompile(`- --([a-z-]+)`).FindAllStringSubmatch(m, -1) {
		if !strings.Contains(help, "  -"+f[1]+" ") && !strings.Contains(help, "  -"+f[1]+"\n") {
			t.Errorf("the manifest passes --%s, which capture -h does not list", f[1])
		}
	}
}
