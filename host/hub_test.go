package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/model/hubquant"
	"logitscope/internal/model/hubquant/hubquanttest"
	"logitscope/internal/model/synth"
)

// A hub checkpoint under the model's hub/ opens as ls_open's variant
// hub/DIR without the model's safetensors, as the page mounts a served
// model for it, and runs the same rows, bit for bit, as the hub
// checkpoint opened as the model itself. A path out of hub/, a missing
// one and another model's checkpoint are refused by name.
func TestHubVariant(t *testing.T) {
	setup(t)
	ctx := context.Background()
	// tiny-qwen3: engine.wasm reads lookup matrices of whole groups of 32
	// columns (tiny's 176-wide down_proj is not).
	dir := filepath.Join(t.TempDir(), "tiny-qwen3")
	if err := synth.Write(synth.Presets["tiny-qwen3"], dir, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	bare := withoutWeights(t, dir, "")
	hub := filepath.Join(bare, "hub", "gptq")
	hubquanttest.Write(t, dir, "gptq", hubquant.Options{Bits: 4, GroupSize: 32, Sym: false, DescAct: true}, hub)
	other := filepath.Join(t.TempDir(), "tiny-llama")
	if err := synth.Write(synth.Presets["tiny-llama"], other, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	hubquanttest.Write(t, other, "gptq", hubquant.Options{Bits: 4, GroupSize: 32}, filepath.Join(bare, "hub", "llama"))
	sameBits(t, "hub/gptq of the model", greedy4(t, bare, "hub/gptq"), greedy4(t, hub, "f32"))

	for _, c := range []struct{ variant, want string }{
		{"hub/../variants", "hub/DIR"},
		{"hub/", "hub/DIR"},
		{"hub/gptq/x", "hub/DIR"},
		{"hub/missing", "missing"},
		{"hub/llama", "another model"},
	} {
		_, err := fixtures.mod.Open(ctx, nil, bare, c.variant, 16)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ls_open of %s: %v, want an error containing %q", c.variant, err, c.want)
		}
	}
	if _, err := fixtures.mod.Open(ctx, nil, hub, "hub/gptq", 16); err == nil || !strings.Contains(err.Error(), "runs its own weights") {
		t.Errorf("a hub checkpoint's own hub/ variant: %v", err)
	}
	if _, err := os.Stat(filepath.Join(bare, "model.safetensors")); err == nil {
		t.Fatal("the mount holds the model's weights: the test would not show they are not needed")
	}
}
