package host

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/engine"
	"logitscope/internal/engine/ggufmodeltest"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native/nativetest"
	"logitscope/internal/model/synth"
	"logitscope/internal/run/session"
)

// engine.wasm opens a GGUF file inside the model directory as its
// variant, and its rows equal the Go engine's on the same file bit for
// bit, on the GPU and on its CPU path, greedy and panel: logitscope's own
// q4 export of tiny (Q4_0) and of tiny-llama3 (Llama's interleaved q/k
// rows), and llama.cpp's Q4_K_M of small-llama3 (K-quants on every
// matrix) when the llama.cpp harness is installed. The guest sees only
// config, tokenizer and the GGUF, as a browser that fetched just those:
// it must not need the safetensors.
func TestGGUFBitIdentical(t *testing.T) {
	setup(t)
	dev := nativetest.Device(t)
	ctx := context.Background()
	for _, c := range []struct{ preset, scheme, ftype string }{
		{"tiny", "q4", ""},
		{"tiny", "q8", ""},
		{"tiny-llama3", "q4", ""},
		{"small-llama3", "", "Q4_K_M"},
	} {
		name := c.preset + "-" + c.scheme + c.ftype + ".gguf"
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), c.preset)
			if err := synth.Write(synth.Presets[c.preset], dir, synth.Options{}); err != nil {
				t.Fatal(err)
			}
			if c.ftype != "" {
				ggufmodeltest.LlamaCpp(t, dir, c.ftype, name)
			} else {
				ggufmodeltest.Export(t, dir, c.scheme, name)
			}
			guestDir := withoutWeights(t, dir, name)
			for _, d := range []struct {
				name string
				dev  gpu.Device
			}{{"gpu", dev}, {"cpu", nil}} {
				t.Run(d.name, func(t *testing.T) {
					nat := ggufEngine(t, d.dev, dir, name, 64)
					e, err := fixtures.mod.Open(ctx, d.dev, guestDir, name, 64)
					if err != nil {
						t.Fatal(err)
					}
					defer e.Close(ctx)
					prompt := testPrompt()
					const maxNew = 6
					want, err := session.Drive(nat, session.Request{Mode: session.Greedy, PromptIDs: prompt, MaxNew: maxNew, Stops: []int{}})
					if err != nil {
						t.Fatal(err)
					}
					rows, out, _, err := e.Greedy(ctx, prompt, maxNew, []int{})
					if err != nil {
						t.Fatal(err)
					}
					if !slices.Equal(out, want.Output) {
						t.Fatalf("greedy output %v, native %v", out, want.Output)
					}
					sameBits(t, "greedy", rows, want.Rows)
					samePanel(t, ctx, e, nat)
					// Our exports are Q4_0 and Q8_0, whose products the
					// CPU path computes in simd.wasm's kernels.
					if k := map[string]string{"q4": "q4_0", "q8": "q8_0"}[c.scheme]; d.dev == nil && k != "" {
						if calls := e.simdCalls(); calls[k+"_rows"] == 0 || calls[k+"_decode"] == 0 {
							t.Errorf("simd.%s_rows or _decode was never called (calls: %v)", k, calls)
						}
					}
				})
			}
		})
	}
}

// A GGUF variant must lie inside the mount, and be a GGUF of this model.
func TestGGUFRefused(t *testing.T) {
	setup(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(synth.Presets["tiny"], dir, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "tiny-qwen3")
	if err := synth.Write(synth.Presets["tiny-qwen3"], other, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	ggufmodeltest.Export(t, other, "q4", "qwen3.gguf")
	if err := os.Rename(filepath.Join(other, "qwen3.gguf"), filepath.Join(dir, "qwen3.gguf")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ variant, want string }{
		{"../x.gguf", "inside the model directory"},
		{"/etc/x.gguf", "inside the model directory"},
		{"missing.gguf", "missing.gguf"},
		{"qwen3.gguf", "general.architecture"},
		{"q5", "want f32, q8, q6, q4, exl3-kK[-CODEBOOK], a .gguf file"},
	} {
		t.Run(c.variant, func(t *testing.T) {
			_, err := fixtures.mod.Open(ctx, nil, dir, c.variant, 16)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ls_open of %s: %v, want an error containing %q", c.variant, err, c.want)
			}
			t.Log(err)
		})
	}
}

// withoutWeights copies dir's files but the safetensors (and every other
// GGUF) into a new directory: what a browser fetches for a GGUF.
func withoutWeights(t *testing.T, dir, gguf string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), filepath.Base(dir))
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		n := e.Name()
		if !e.Type().IsRegular() || strings.HasSuffix(n, ".safetensors") || (strings.HasSuffix(n, ".gguf") && n != gguf) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// ggufEngine opens dir/name with the Go engine on dev (nil: the CPU).
func ggufEngine(t *testing.T, dev gpu.Device, dir, name string, capacity int) engine.Engine {
	t.Helper()
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	w, err := engine.OpenGGUF(ck, filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.Open(ck, engine.Options{GGUF: w, Device: dev, Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}
