package host

import (
	"context"
	"slices"
	"strings"
	"testing"

	"logitscope/session"
)

// engine.wasm on its CPU path ("device":"cpu") against the Go CPU
// reference on the same requests: greedy with a prompt longer than one
// chunk, forced (its rows start mid-chunk), and a panel, f32 and q4. The
// rows are bit-identical: float32 arithmetic is IEEE on both sides, and
// where they differ, math.Exp (assembly on amd64, pure Go in wasm; the last
// float64 bit differs for ~16% of inputs in [-20, 20]), cpu rounds the
// result to float32, which hid every difference in a 2M-input sweep.
func TestWasmCPUMatchesNative(t *testing.T) {
	setup(t)
	ctx := context.Background()
	for _, v := range []string{"f32", "q4"} {
		t.Run(v, func(t *testing.T) {
			nat := goEngine(t, nil, fixtures.modelDir, v, 64)
			e, err := fixtures.mod.Open(ctx, nil, fixtures.modelDir, v, 64)
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
			rows, out, stopped, err := e.Greedy(ctx, prompt, maxNew, []int{})
			if err != nil {
				t.Fatal(err)
			}
			if stopped || !slices.Equal(out, want.Output) {
				t.Fatalf("greedy output %v (stopped %v), native %v", out, stopped, want.Output)
			}
			sameBits(t, "greedy", rows, want.Rows)

			nat.Reset()
			fed := append(append([]int(nil), prompt...), want.Output[:maxNew-1]...)
			all, err := session.Forward(nat, fed, true)
			if err != nil {
				t.Fatal(err)
			}
			rows, err = e.Forced(ctx, prompt, want.Output)
			if err != nil {
				t.Fatal(err)
			}
			sameBits(t, "forced", rows, all[len(prompt)-1:])

			samePanel(t, ctx, e, nat)
		})
	}
}

// With "device":"cpu" the guest calls no gpu import, not even info, though
// the instance has a device to call; and a device it does not know is
// refused with its name.
func TestWasmCPUCallsNoGPU(t *testing.T) {
	setup(t)
	ctx := context.Background()
	// Every method records its call; noGPU fails it.
	dev := &counting{Device: noGPU{}, calls: map[string]int{}}
	e, err := fixtures.mod.instantiate(ctx, dev, fixtures.modelDir)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	if _, err := e.callIn(ctx, "ls_open", []byte(`{"model":"/model","variant":"q4","capacity":64,"device":"cpu"}`)); err != nil {
		t.Fatal(err)
	}
	rows, out, _, err := e.Greedy(ctx, testPrompt(), 3, []int{})
	if err != nil || len(rows) != 3 || len(out) != 3 {
		t.Fatalf("greedy on the CPU: %d rows, output %v, %v", len(rows), out, err)
	}
	if _, _, err := e.Panel(ctx, testWindows()); err != nil {
		t.Fatal(err)
	}
	if len(dev.calls) != 0 {
		t.Fatalf("the CPU path called gpu imports: %v", dev.calls)
	}

	r, err := e.callIn(ctx, "ls_open", []byte(`{"model":"/model","capacity":64,"device":"tpu"}`))
	if r != -1 || err == nil || !strings.Contains(err.Error(), `device "tpu"`) {
		t.Fatalf("device tpu: status %d, %v; want -1 and a message naming it", r, err)
	}
	if len(dev.calls) != 0 {
		t.Fatalf("a refused device called gpu imports: %v", dev.calls)
	}
}
