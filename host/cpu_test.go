package host

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/engine/wasmsimd"
	"logitscope/internal/quant"
	"logitscope/internal/run/session"
	"logitscope/wasm/abi"
)

// engine.wasm on its CPU path ("device":"cpu") against the Go CPU
// reference on the same requests: greedy with a prompt longer than one
// chunk, forced (its rows start mid-chunk), and a panel, f32 and q4. The
// rows are bit-identical: float32 arithmetic is IEEE on both sides, and
// where they differ, math.Exp (assembly on amd64, pure Go in wasm; the last
// float64 bit differs for ~16% of inputs in [-20, 20]), cpu rounds the
// result to float32, which hid every difference in a 2M-input sweep.
//
// The guest's products run in the host's SIMD128 kernels (simd.wasm,
// package wasmsimd): each variant's run must have called those of its
// format, or the bits compared were the pure-Go kernels'.
func TestWasmCPUMatchesNative(t *testing.T) {
	setup(t)
	ctx := context.Background()
	for _, c := range []struct {
		preset, variant string
		kernels         []string // simd.wasm's exports the run must call
	}{
		{"tiny", "f32", []string{"f32_rows", "tile4x4"}},
		{"tiny", "q4", []string{"q4_rows", "q4_decode", "tile4x4"}},
		{"tiny", "q8", []string{"q8_rows", "q8_decode", "tile4x4"}},
		{"tiny-mistral", "f32", []string{"f32_rows", "tile4x4"}},  // a sliding window of 8: attention's first key moves
		{"tiny-glm4-moe", "f32", []string{"f32_rows", "tile4x4"}}, // GLM-4.5's routing and partial RoPE in the guest
	} {
		v := c.variant
		t.Run(c.preset+"/"+v, func(t *testing.T) {
			dir := fixtures.modelDir
			switch {
			case c.preset != "tiny":
				dir = fixtures.families[c.preset]
			case v == "q8": // the fixture has no q8 (TestABI wants none)
				dir = withVariant(t, quant.Q8)
			}
			nat := goEngine(t, nil, dir, v, 64)
			e, err := fixtures.mod.Open(ctx, nil, dir, v, 64)
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
			sameBits(t, "greedy", rows, engineRows(want)) // a mixture of experts' rows end in its routes

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

			for _, k := range c.kernels {
				if n := e.simdCalls()[k]; n == 0 {
					t.Errorf("simd.%s was never called (calls: %v)", k, e.simdCalls())
				}
			}
		})
	}
}

// withVariant is a copy of the tiny model with a variant of scheme s.
func withVariant(t *testing.T, s quant.Scheme) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := writeTiny(dir, s); err != nil {
		t.Fatal(err)
	}
	return dir
}

// simdCalls counts the instance's calls of each simd.wasm kernel.
func (e *Instance) simdCalls() map[string]int {
	m := map[string]int{}
	for i, n := range e.st.calls {
		m[wasmsimd.Kernels[i].Name] = n
	}
	return m
}

// With "device":"cpu" the guest calls no gpu import, not even info, though
// the instance has a device to call; and a device it does not know is
// refused with its name.
func TestWasmCPUCallsNoGPU(t *testing.T) {
	setup(t)
	ctx := context.Background()
	// Every method records its call; noGPU fails it.
	dev := &counting{Device: noGPU{}, calls: map[string]int{}}
	e := fresh(t, dev)
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

// Files the host put in guest memory ("files" of ls_open) give the CPU
// path its weights in place: the same rows as the files read, other rows
// once the blocks are overwritten, and the blocks are the model's
// (ls_free no longer frees them). A block that
// is not one, or is not the file's size, and files on the GPU path are
// refused, naming the file.
func TestWasmFilesInGuestMemory(t *testing.T) {
	setup(t)
	ctx := context.Background()
	plain, err := fixtures.mod.Open(ctx, nil, fixtures.modelDir, "q4", 64)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close(ctx)
	prompt := testPrompt()
	want, _, _, err := plain.Greedy(ctx, prompt, 4, []int{})
	if err != nil {
		t.Fatal(err)
	}

	shards, _ := filepath.Glob(filepath.Join(fixtures.modelDir, "variants", "q4", "*.bin"))
	if len(shards) == 0 {
		t.Fatal("the fixture's q4 variant has no shards")
	}
	// load puts every shard in a fresh block of e; grow adds bytes to
	// each block beyond the file's.
	load := func(t *testing.T, e *Instance, grow int) map[string]uint32 {
		files := map[string]uint32{}
		for _, s := range shards {
			data, err := os.ReadFile(s)
			if err != nil {
				t.Fatal(err)
			}
			p, err := e.malloc(ctx, uint32(len(data)+grow))
			if err != nil {
				t.Fatal(err)
			}
			if !e.mod.Memory().Write(p, data) {
				t.Fatalf("block %#x outside guest memory", p)
			}
			rel, _ := filepath.Rel(fixtures.modelDir, s)
			files[rel] = p
		}
		return files
	}
	open := func(e *Instance, device string, files map[string]uint32) error {
		args, _ := json.Marshal(abi.Open{Model: Mount, Variant: "q4", Capacity: 64, Device: device, Files: files})
		_, err := e.callIn(ctx, "ls_open", args)
		return err
	}

	t.Run("same rows", func(t *testing.T) {
		e := fresh(t, nil)
		files := load(t, e, 0)
		if err := open(e, "cpu", files); err != nil {
			t.Fatal(err)
		}
		for _, p := range files {
			e.free(ctx, p) // the model's now: a no-op
		}
		got, _, _, err := e.Greedy(ctx, prompt, 4, []int{})
		if err != nil {
			t.Fatal(err)
		}
		sameBits(t, "greedy", got, want)
		// In place: blocks zeroed after the open change the rows.
		for _, p := range files {
			if !e.mod.Memory().Write(p, make([]byte, 4096)) {
				t.Fatalf("block %#x outside guest memory", p)
			}
		}
		if got, _, _, err = e.Greedy(ctx, prompt, 4, []int{}); err != nil {
			t.Fatal(err)
		}
		if slices.EqualFunc(got, want, slices.Equal) {
			t.Fatal("zeroing the blocks after the open changed no row: the weights are not the blocks")
		}
	})
	for _, c := range []struct {
		name, device, want string
		grow               int
		files              func(map[string]uint32) map[string]uint32
	}{
		{"on the GPU", "gpu", "only the CPU path", 0, nil},
		{"a block of another size", "cpu", "its block at", 8, nil},
		{"not a block", "cpu", "is not the address of a block", 0, func(f map[string]uint32) map[string]uint32 {
			for k, p := range f {
				f[k] = p + 8
			}
			return f
		}},
		{"outside the model directory", "cpu", `"../x.bin" is not a path inside`, 0, func(f map[string]uint32) map[string]uint32 {
			return map[string]uint32{"../x.bin": 8}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := fresh(t, nil)
			files := load(t, e, c.grow)
			if c.files != nil {
				files = c.files(files)
			}
			err := open(e, c.device, files)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}
