package host

import (
	"context"
	"math"
	"slices"
	"testing"

	"logitscope/internal/engine"
	"logitscope/internal/gpu/native/nativetest"
	"logitscope/internal/run/session"
)

// prompt and windows span more than one chunk (32) so that the prefill and
// panel paths both split.
func testPrompt() []int {
	p := make([]int, 40)
	for i := range p {
		p[i] = (i*37 + 11) % 500
	}
	return p
}

func testWindows() [][]int {
	w := [][]int{make([]int, 45), make([]int, 33)}
	for i := range w {
		for j := range w[i] {
			w[i][j] = (j*53 + 7*i + 3) % 500
		}
	}
	return w
}

func TestBitIdentical(t *testing.T) {
	setup(t)
	dev := nativetest.Device(t)
	ctx := context.Background()
	for _, c := range []struct{ name, dir, variant string }{
		{"tiny/f32", fixtures.modelDir, "f32"},
		{"tiny/q4", fixtures.modelDir, "q4"},
		{"tiny-qwen3/f32", fixtures.families["tiny-qwen3"], "f32"},           // q/k norm in place on the KV cache
		{"tiny-llama3/f32", fixtures.families["tiny-llama3"], "f32"},         // rope_scaling llama3
		{"tiny-mistral/f32", fixtures.families["tiny-mistral"], "f32"},       // a sliding window of 8
		{"tiny-llama-bias/f32", fixtures.families["tiny-llama-bias"], "f32"}, // attention and MLP biases
		{"tiny-gemma3/f32", fixtures.families["tiny-gemma3"], "f32"},         // (1 + w) norms, GELU-tanh, two RoPE tables
		{"tiny-qwen3-moe/f32", fixtures.families["tiny-qwen3-moe"], "f32"},   // routed experts in banks, route tails in the rows
		{"tiny-qwen2-moe/f32", fixtures.families["tiny-qwen2-moe"], "f32"},   // a dense layer, then experts and a gated shared expert
		{"tiny-glm4-moe/f32", fixtures.families["tiny-glm4-moe"], "f32"},     // partial RoPE, grouped sigmoid routing, ungated shared experts
	} {
		t.Run(c.name, func(t *testing.T) {
			prompt := testPrompt()
			const maxNew = 6
			nat := goEngine(t, dev, c.dir, c.variant, 64)
			want, err := session.Drive(nat, session.Request{Mode: session.Greedy, PromptIDs: prompt, MaxNew: maxNew, Stops: []int{}})
			if err != nil {
				t.Fatal(err)
			}
			e, err := fixtures.mod.Open(ctx, dev, c.dir, c.variant, 64)
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close(ctx)
			rows, out, stopped, err := e.Greedy(ctx, prompt, maxNew, []int{})
			if err != nil {
				t.Fatal(err)
			}
			if stopped || !slices.Equal(out, want.Output) {
				t.Fatalf("greedy output %v (stopped %v), native %v", out, stopped, want.Output)
			}
			sameBits(t, "greedy", rows, engineRows(want))

			samePanel(t, ctx, e, nat)
		})
	}
}

// engineRows puts a result's rows back as an engine writes them, each
// row's routes (a mixture of experts') after its logits, as the wasm host
// keeps them.
func engineRows(res session.Result) [][]float32 {
	if res.Routes == nil {
		return res.Rows
	}
	out := make([][]float32, len(res.Rows))
	for i, row := range res.Rows {
		out[i] = slices.Clone(row)
		for _, id := range res.Routes[i] {
			out[i] = append(out[i], float32(id))
		}
	}
	return out
}

func sameBits(t *testing.T, what string, got, want [][]float32) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, native %d", what, len(got), len(want))
	}
	for i := range got {
		if len(got[i]) != len(want[i]) {
			t.Fatalf("%s row %d: %d values, native %d", what, i, len(got[i]), len(want[i]))
		}
		for j := range got[i] {
			if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
				t.Fatalf("%s row %d [%d]: %v (%#x), native %v (%#x)", what, i, j,
					got[i][j], math.Float32bits(got[i][j]), want[i][j], math.Float32bits(want[i][j]))
			}
		}
	}
}

// samePanel runs testWindows through e and, each window from an empty
// cache, through nat: the targets must be equal and the rows bit-identical.
func samePanel(t *testing.T, ctx context.Context, e *Instance, nat engine.Engine) {
	t.Helper()
	var wantRows [][]float32
	var wantTargets []int
	for _, w := range testWindows() {
		nat.Reset()
		r, err := session.Forward(nat, w, true)
		if err != nil {
			t.Fatal(err)
		}
		wantRows = append(wantRows, r[:len(w)-1]...)
		wantTargets = append(wantTargets, w[1:]...)
	}
	rows, targets, err := e.Panel(ctx, testWindows())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(targets, wantTargets) {
		t.Fatalf("panel targets %v, want %v", targets, wantTargets)
	}
	sameBits(t, "panel", rows, wantRows)
}
