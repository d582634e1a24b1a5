package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/analysis/attribution"
	"logitscope/internal/format/seal"
	"logitscope/internal/gpu/native/nativetest"
)

func sensitivityCmd(args []string, out, errb *bytes.Buffer) error {
	return sensitivityCommand(args, out, errb)
}

// A sweep of the tiny model's q4 variant by kind: a table, a sealed JSON
// that says the same, and no state left behind; an existing --out is
// kept without --force.
func TestSensitivityCommand(t *testing.T) {
	model := copyModel(t)
	out := filepath.Join(t.TempDir(), "sweep.json")
	args := []string{"--model", model, "--scheme", "q4", "--panel", "../../internal/model/synth/corpus.txt", "--window", "32", "--unit", "kind", "--out", out}
	text, err := run(t, sensitivityCmd, args...)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"units by kind", "whole test:", "noise floor:", "additivity:", "divergence by layer", "mlp.down_proj", "clear calls:", "wrote " + out} {
		if !strings.Contains(text, want) {
			t.Errorf("the output has no %q:\n%s", want, text)
		}
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := seal.Verify(data, "seal", out); err != nil {
		t.Error(err)
	}
	var res attribution.Result
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if res.Kind != attribution.Kind || res.Unit != "kind" || len(res.Units) != 8 || len(res.Layers) == 0 || res.Floor == nil {
		t.Errorf("the result: kind %q, unit %q, %d units (want the tied embedding and 7 kinds), %d layers, floor %v", res.Kind, res.Unit, len(res.Units), len(res.Layers), res.Floor)
	}
	if _, err := os.Stat(out + ".partial"); !os.IsNotExist(err) {
		t.Errorf("the sweep's state is left: %v", err)
	}
	if _, err := run(t, sensitivityCmd, args...); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("an existing --out: %v", err)
	}
}

func TestSensitivityRefusals(t *testing.T) {
	model := copyModel(t) // --unit's refusal comes after q4 is written
	panel := "../../internal/model/synth/corpus.txt"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", model, "--panel", panel}, "--scheme q8|q6|q4 or --variant"},
		{[]string{"--model", model, "--scheme", "q4", "--variant", "x", "--panel", panel}, "one of them"},
		{[]string{"--model", model, "--scheme", "q4"}, "--panel FILE is required"},
		{[]string{"--model", model, "--scheme", "q5", "--panel", panel}, "q5"},
		{[]string{"--model", model, "--variant", "f32", "--panel", panel}, "the reference itself"},
		{[]string{"--model", model, "--scheme", "q4", "--panel", panel, "--unit", "block"}, `--unit "block"`},
		{[]string{"--model", model, "--scheme", "q4", "--panel", panel, "--window", "1"}, "--window 1"},
		{[]string{"--model", model, "--scheme", "q4", "--panel", filepath.Join(t.TempDir(), "none.txt")}, "none.txt"},
	} {
		_, err := run(t, sensitivityCmd, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.args, err, c.want)
		}
	}
}

// --device gpu sweeps on this machine's WebGPU and ranks as the CPU does;
// it refuses the controls, whose noisy matrices run on the CPU only.
func TestSensitivityOnTheDevice(t *testing.T) {
	nativetest.Device(t)
	model := copyModel(t)
	corpus, err := os.ReadFile("../../internal/model/synth/corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	panel := filepath.Join(t.TempDir(), "panel.txt")
	if err := os.WriteFile(panel, corpus[:300], 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--model", model, "--scheme", "q4", "--panel", panel, "--window", "32", "--unit", "kind"}
	if _, err := run(t, sensitivityCmd, append(args, "--device", "gpu")...); err == nil || !strings.Contains(err.Error(), "--controls=false") {
		t.Fatalf("controls on the device: %v", err)
	}
	args = append(args, "--controls=false")
	cpu, err := run(t, sensitivityCmd, args...)
	if err != nil {
		t.Fatal(err)
	}
	gpu, err := run(t, sensitivityCmd, append(args, "--device", "gpu")...)
	if err != nil {
		t.Fatal(err)
	}
	rank := func(text string) []string {
		var names []string
		for _, line := range strings.Split(text, "\n") {
			if f := strings.Fields(line); len(f) > 2 && f[0] >= "1" && f[0] <= "9" && strings.Contains(line, "q4") {
				names = append(names, f[1])
			}
		}
		return names
	}
	if c, g := rank(cpu), rank(gpu); len(c) != 8 || strings.Join(c[:3], " ") != strings.Join(g[:3], " ") {
		t.Errorf("the first kinds: %v on the CPU, %v on the device", c, g)
	}
	if strings.Contains(gpu, "mean rel") || !strings.Contains(gpu, "no divergence by layer: swept on gpu") {
		t.Errorf("the device's sweep prints a divergence it has not measured:\n%s", gpu)
	}
}
