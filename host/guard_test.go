package host

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tetratelabs/wazero/api"

	"logitscope/wasm/abi"
)

// A module without the exports the host calls is refused when it loads,
// naming each missing or mistyped export, instead of panicking at the
// first call.
func TestLoadChecksExports(t *testing.T) {
	without := func(name string) []fn {
		var fns []fn
		for _, f := range abiFns() {
			if f.name != name {
				fns = append(fns, f)
			}
		}
		return fns
	}
	mistyped := abiFns()
	for i := range mistyped {
		if mistyped[i].name == "ls_step" {
			mistyped[i].params = []api.ValueType{api.ValueTypeI32}
		}
	}
	i32 := api.ValueTypeI32
	tests := []struct {
		name     string
		wasm     []byte
		want     []string // in the error; none: it loads
		wantNot  []string
		noMemory bool
	}{
		{"empty module", []byte("\x00asm\x01\x00\x00\x00"),
			[]string{"no _initialize", "no ls_malloc", "no ls_free", "no ls_error", "no ls_open", "no ls_request", "no ls_step", "no ls_region", "no ls_feed", "no ls_result", "no memory"}, nil, true},
		{"no ls_feed", assemble(without("ls_feed")), []string{"not an engine.wasm", "exports no ls_feed"}, []string{"ls_malloc", "memory"}, false},
		{"ls_step takes an argument", assemble(mistyped), []string{"ls_step is (i32) -> (i32), want () -> (i32)"}, []string{"no "}, false},
		{"ls_malloc returns nothing", assemble(append(without("ls_malloc"), fn{name: "ls_malloc", params: []api.ValueType{i32}, body: []byte{}})),
			[]string{"ls_malloc is (i32) -> (), want (i32) -> (i32)"}, nil, false},
		{"every export", assemble(abiFns()), nil, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(context.Background(), tc.wasm, "")
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				m.Close(context.Background())
				return
			}
			if err == nil {
				m.Close(context.Background())
				t.Fatalf("Load succeeded, want an error containing %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error %q says %q", err, w)
				}
			}
		})
	}
}

// A guest that never returns fails its call when ctx is done or the
// module's CallTimeout passes, and the instance is discarded, instead of
// hanging the host.
func TestCallDeadline(t *testing.T) {
	i32 := []api.ValueType{api.ValueTypeI32}
	loopMalloc := fn{name: "ls_malloc", params: i32, results: i32, body: loopForever}
	loopStep := fn{name: "ls_step", results: i32, body: loopForever}
	tests := []struct {
		name        string
		loop        fn
		callTimeout time.Duration
		ctxTimeout  time.Duration
		want        string
	}{
		{"ls_malloc past CallTimeout", loopMalloc, 100 * time.Millisecond, 0, "ls_malloc did not return within the call timeout of 100ms"},
		{"ls_malloc past ctx deadline", loopMalloc, 0, 100 * time.Millisecond, "ls_malloc stopped, instance discarded: context deadline exceeded"},
		{"ls_step past CallTimeout", loopStep, 100 * time.Millisecond, 0, "ls_step did not return within the call timeout"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, e := fakeGuest(t, script{}, tc.loop)
			m.CallTimeout = tc.callTimeout
			e.timeout = tc.callTimeout
			ctx := context.Background()
			if tc.ctxTimeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.ctxTimeout)
				defer cancel()
			}
			done := make(chan error, 1)
			go func() {
				_, _, err := e.Run(ctx, abi.Request{Mode: "greedy", PromptIDs: []int{1}})
				done <- err
			}()
			var err error
			select {
			case err = <-done:
			case <-time.After(20 * time.Second):
				t.Fatal("Run still running 20 s after its deadline")
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if _, err := e.call(context.Background(), "ls_step"); !errors.Is(err, ErrClosed) {
				t.Errorf("after the deadline: %v, want ErrClosed", err)
			}
		})
	}
}

// Length-returning exports (ls_result, ls_error) that answer absurd
// lengths get an error naming them: no unbounded allocation, no endless
// retry, no recursion through ls_error, no silent empty value.
func TestCallOutLengths(t *testing.T) {
	const block = 1024 // where the scripted ls_malloc puts every block
	value := []byte(`{"rows":3}`)
	tests := []struct {
		name   string
		result func(mem api.Memory, p, cap uint32) int32 // ls_result
		errLen int32                                     // what ls_error returns
		malloc uint32                                    // ls_malloc's block; 0: block
		want   string                                    // in the error; "": value comes back
	}{
		{"fits", func(mem api.Memory, p, cap uint32) int32 {
			mem.Write(p, value)
			return int32(len(value))
		}, 0, 0, ""},
		{"a second call fits", func(mem api.Memory, p, cap uint32) int32 {
			if cap == 5000 {
				mem.Write(p, value)
				return int32(len(value))
			}
			return 5000
		}, 0, 0, ""},
		{"1 GiB", func(api.Memory, uint32, uint32) int32 { return 1 << 30 }, 0, 0,
			"ls_result: a value of 1073741824 bytes, more than the host takes (67108864)"},
		{"always one more", func(_ api.Memory, _, cap uint32) int32 { return int32(cap) + 1 }, 0, 0,
			"ls_result: 4098 bytes, after a block of the 4097 bytes it asked for"},
		{"outside memory", func(api.Memory, uint32, uint32) int32 { return 100 }, 0, 0xfff0,
			"ls_result: its 100 bytes at 0xfff0 are outside guest memory"},
		{"ls_result and ls_error fail", func(api.Memory, uint32, uint32) int32 { return -1 }, -1, 0,
			"ls_result: status -1 (ls_error: ls_error: status -1: the guest cannot say what went wrong)"},
		{"ls_error 1 GiB", func(api.Memory, uint32, uint32) int32 { return -1 }, 1 << 30, 0,
			"ls_error: a value of 1073741824 bytes, more than the host takes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.malloc
			if p == 0 {
				p = block
			}
			var asked []uint32
			_, e := fakeGuest(t, script{
				"ls_malloc": func(_ api.Memory, stack []uint64) {
					asked = append(asked, uint32(stack[0]))
					stack[0] = uint64(p)
				},
				"ls_result": func(mem api.Memory, stack []uint64) {
					ret(stack, tc.result(mem, uint32(stack[0]), uint32(stack[1])))
				},
				"ls_error": func(_ api.Memory, stack []uint64) { ret(stack, tc.errLen) },
			})
			got, err := e.callOut(context.Background(), "ls_result")
			for _, n := range asked {
				if n > maxOut {
					t.Errorf("asked the guest for a block of %d bytes", n)
				}
			}
			if tc.want == "" {
				if err != nil || string(got) != string(value) {
					t.Fatalf("got %q, %v; want %q", got, err, value)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %q, error %v; want an error containing %q", got, err, tc.want)
			}
		})
	}
}

// Regions that are not whole rows of float32, that change their row
// length, or that lie outside guest memory fail Run, naming the region.
func TestRunRegions(t *testing.T) {
	row := func(off uint64, vocab int) abi.Region {
		return abi.Region{Offset: off, Size: uint64(4 * vocab), Rows: 1}
	}
	tests := []struct {
		name    string
		regions []abi.Region
		want    string // in the error; "": as many rows as regions
	}{
		{"rows", []abi.Region{row(0, 4), row(64, 4), {Offset: 128, Size: 32, Rows: 2}}, ""},
		{"no rows", []abi.Region{{Offset: 0, Size: 16, Rows: 0}}, "ls_region: 16 bytes in 0 rows: not rows of float32 logits"},
		{"no bytes", []abi.Region{{Offset: 0, Size: 0, Rows: 1}}, "ls_region: 0 bytes in 1 rows"},
		{"ragged", []abi.Region{{Offset: 0, Size: 10, Rows: 1}}, "ls_region: 10 bytes in 1 rows"},
		{"another vocab", []abi.Region{row(0, 4), row(0, 3)}, "ls_region: rows of 3 logits after rows of 4"},
		{"past memory", []abi.Region{row(65536-8, 4)}, "guest rows [0xfff8, +16) are outside guest memory"},
		{"past wasm32", []abi.Region{row(1<<32, 4)}, "outside wasm32 memory"},
		{"device buffer beyond int64", []abi.Region{{Buffer: 1, Offset: 1 << 63, Size: 4, Rows: 1}}, "out of range"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			step := 0
			_, e := fakeGuest(t, script{
				"ls_malloc": func(_ api.Memory, stack []uint64) { stack[0] = 1 << 15 },
				"ls_step": func(_ api.Memory, stack []uint64) {
					ret(stack, int32(min(1, len(tc.regions)-step)))
				},
				"ls_region": func(mem api.Memory, stack []uint64) {
					b := make([]byte, abi.RegionSize)
					tc.regions[step].Encode(b)
					step++
					mem.Write(uint32(stack[0]), b)
					ret(stack, 0)
				},
				"ls_result": func(mem api.Memory, stack []uint64) {
					mem.Write(uint32(stack[0]), []byte("{}"))
					ret(stack, 2)
				},
			})
			rows, _, err := e.Run(context.Background(), abi.Request{Mode: "panel"})
			if tc.want == "" {
				if err != nil || len(rows) != 4 {
					t.Fatalf("%d rows, %v; want 4 rows", len(rows), err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%d rows, error %v; want an error containing %q", len(rows), err, tc.want)
			}
		})
	}
}

// FuzzRead: any region a guest names is read or refused with an error,
// never a panic, and what is read is exactly the region's bytes.
func FuzzRead(f *testing.F) {
	_, e := fakeGuest(f, script{})
	mem := e.mod.Memory()
	for i := uint32(0); i < mem.Size(); i += 4 {
		mem.WriteUint32Le(i, i)
	}
	f.Add(uint32(0), uint64(0), uint64(16), uint32(1))
	f.Add(uint32(0), uint64(65532), uint64(8), uint32(2))
	f.Add(uint32(0), uint64(1<<63), uint64(1<<63), uint32(1))
	f.Add(uint32(0), uint64(16), uint64(0), uint32(0))
	f.Add(uint32(7), uint64(0), uint64(16), uint32(4))
	f.Fuzz(func(t *testing.T, buffer uint32, offset, size uint64, rows uint32) {
		reg := abi.Region{Buffer: buffer, Offset: offset, Size: size, Rows: rows}
		raw, err := e.read(reg)
		whole := rows > 0 && size > 0 && size%(4*uint64(rows)) == 0
		inside := buffer == 0 && offset <= uint64(mem.Size()) && size <= uint64(mem.Size())-offset
		if err != nil {
			if whole && inside {
				t.Fatalf("%+v: %v", reg, err)
			}
			return
		}
		if !whole || !inside { // noGPU reads no device buffer
			t.Fatalf("%+v: read %d bytes, want an error", reg, len(raw))
		}
		if uint64(len(raw)) != size {
			t.Fatalf("%+v: read %d bytes", reg, len(raw))
		}
		if size >= 4 && offset%4 == 0 && binary.LittleEndian.Uint32(raw) != uint32(offset) {
			t.Fatalf("%+v: read the wrong bytes", reg)
		}
	})
}

// FuzzCallOut: whatever lengths a length-returning export answers, callOut
// ends after at most two calls, asks for no block above maxOut, and
// returns a value only of a length the guest had room for.
func FuzzCallOut(f *testing.F) {
	var answers [2]int32
	var calls int
	var asked []uint32
	_, e := fakeGuest(f, script{
		"ls_malloc": func(_ api.Memory, stack []uint64) {
			asked = append(asked, uint32(stack[0]))
			stack[0] = 16
		},
		"ls_result": func(_ api.Memory, stack []uint64) {
			ret(stack, answers[min(calls, 1)])
			calls++
		},
	})
	f.Add(int32(10), int32(0))
	f.Add(int32(5000), int32(5000))
	f.Add(int32(5000), int32(5001))
	f.Add(int32(-1), int32(0))
	f.Add(int32(1<<30), int32(1<<30))
	f.Add(int32(maxOut), int32(3))
	f.Fuzz(func(t *testing.T, first, second int32) {
		answers, calls, asked = [2]int32{first, second}, 0, nil
		out, err := e.callOut(context.Background(), "ls_result")
		if calls > 2 {
			t.Fatalf("%d calls of ls_result", calls)
		}
		for _, n := range asked {
			if n > maxOut {
				t.Fatalf("a block of %d bytes", n)
			}
		}
		if first < 0 || first > maxOut {
			if err == nil {
				t.Fatalf("answers %d, %d: got %d bytes, want an error", first, second, len(out))
			}
			return
		}
		if first <= 4096 && (err != nil || len(out) != int(first)) {
			t.Fatalf("answer %d: got %d bytes, %v", first, len(out), err)
		}
		if err == nil && len(out) > int(max(first, 4096)) {
			t.Fatalf("answers %d, %d: %d bytes", first, second, len(out))
		}
	})
}
