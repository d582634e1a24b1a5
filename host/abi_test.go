package host

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native/nativetest"
	"logitscope/wasm/abi"
)

// counting wraps a device, counts the calls per method and can corrupt
// bind group entries' buffer handles (an out-of-range handle).
type counting struct {
	gpu.Device
	mu        sync.Mutex
	calls     map[string]int
	badHandle bool
}

func (c *counting) hit(name string) {
	c.mu.Lock()
	c.calls[name]++
	c.mu.Unlock()
}

func (c *counting) Info() gpu.Info { c.hit("info"); return c.Device.Info() }
func (c *counting) CreateBuffer(l string, n int64) (gpu.Buffer, error) {
	c.hit("create_buffer")
	return c.Device.CreateBuffer(l, n)
}
func (c *counting) WriteBuffer(b gpu.Buffer, o int64, d []byte) error {
	c.hit("write_buffer")
	return c.Device.WriteBuffer(b, o, d)
}
func (c *counting) DestroyBuffer(b gpu.Buffer) { c.hit("destroy_buffer"); c.Device.DestroyBuffer(b) }
func (c *counting) CreateShaderModule(l, w string) (gpu.Module, error) {
	c.hit("create_shader_module")
	return c.Device.CreateShaderModule(l, w)
}
func (c *counting) CreateComputePipeline(l string, m gpu.Module, e string) (gpu.Pipeline, error) {
	c.hit("create_compute_pipeline")
	return c.Device.CreateComputePipeline(l, m, e)
}
func (c *counting) CreateBindGroup(p gpu.Pipeline, g uint32, es []gpu.Binding) (gpu.BindGroup, error) {
	c.hit("create_bind_group")
	if c.badHandle {
		es = append([]gpu.Binding(nil), es...)
		es[0].Buffer += 1 << 20
	}
	return c.Device.CreateBindGroup(p, g, es)
}
func (c *counting) DestroyBindGroup(g gpu.BindGroup) {
	c.hit("destroy_bind_group")
	c.Device.DestroyBindGroup(g)
}
func (c *counting) Dispatch(p gpu.Pipeline, gs []gpu.BindGroup, x, y, z uint32) error {
	c.hit("dispatch")
	return c.Device.Dispatch(p, gs, x, y, z)
}
func (c *counting) CopyBuffer(s gpu.Buffer, so int64, d gpu.Buffer, do, n int64) error {
	c.hit("copy_buffer")
	return c.Device.CopyBuffer(s, so, d, do, n)
}
func (c *counting) Submit() error { c.hit("submit"); return c.Device.Submit() }
func (c *counting) ReadBuffer(b gpu.Buffer, o, n int64) ([]byte, error) {
	c.hit("read_buffer")
	return c.Device.ReadBuffer(b, o, n)
}
func (c *counting) UploadFile(b gpu.Buffer, o int64, path string, fo, n int64) error {
	c.hit("upload_file")
	return c.Device.(gpu.FileUploader).UploadFile(b, o, path, fo, n)
}

// The ABI from the Go host's side: every export and, through a counting
// device, every import, with the error paths.
func TestABI(t *testing.T) {
	setup(t)
	dev := &counting{Device: nativetest.Device(t), calls: map[string]int{}}
	ctx := context.Background()
	open := func(t *testing.T, v string) *Instance {
		e, err := fixtures.mod.Open(ctx, dev, fixtures.modelDir, v, 128)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close(ctx) })
		return e
	}
	wantErr := func(t *testing.T, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("error %v, want one containing %q", err, want)
		}
	}

	tests := []struct {
		name string
		run  func(t *testing.T)
	}{
		{"ls_open bad JSON", func(t *testing.T) {
			_, err := fresh(t, dev).callIn(ctx, "ls_open", []byte(`{"model":`))
			wantErr(t, err, "ls_open: unexpected end of JSON")
		}},
		{"ls_open unknown variant", func(t *testing.T) {
			_, err := fixtures.mod.Open(ctx, dev, fixtures.modelDir, "q3", 64)
			wantErr(t, err, `variant "q3"`)
		}},
		{"ls_open missing variant", func(t *testing.T) {
			_, err := fixtures.mod.Open(ctx, dev, fixtures.modelDir, "q8", 64)
			wantErr(t, err, "no variant at /model/variants/q8")
		}},
		{"ls_open pointer outside ls_malloc blocks", func(t *testing.T) {
			e := fresh(t, dev)
			_, err := e.call(ctx, "ls_open", 8, 16)
			wantErr(t, err, "not inside a block from ls_malloc")
			if e.mod == nil {
				t.Fatal("a refused pointer discarded the instance")
			}
		}},
		{"ls_request before ls_open", func(t *testing.T) {
			_, err := fresh(t, dev).callIn(ctx, "ls_request", []byte(`{"mode":"panel"}`))
			wantErr(t, err, "no model open")
		}},
		{"ls_request unknown mode", func(t *testing.T) {
			_, err := open(t, "f32").callIn(ctx, "ls_request", []byte(`{"mode":"beam"}`))
			wantErr(t, err, `mode "beam"`)
		}},
		{"ls_step before ls_request", func(t *testing.T) {
			_, err := open(t, "f32").call(ctx, "ls_step")
			wantErr(t, err, "no request")
		}},
		{"ls_region and ls_result before ls_request", func(t *testing.T) {
			e := open(t, "f32")
			p, _ := e.malloc(ctx, 24)
			_, err := e.call(ctx, "ls_region", uint64(p))
			wantErr(t, err, "no region pending")
			_, err = e.callOut(ctx, "ls_result")
			wantErr(t, err, "no request")
		}},
		{"ls_step twice without ls_feed", func(t *testing.T) {
			e := open(t, "f32")
			if _, err := e.callIn(ctx, "ls_request", []byte(`{"mode":"panel","windows":[[1,2,3]]}`)); err != nil {
				t.Fatal(err)
			}
			if r, err := e.call(ctx, "ls_step"); r != 1 || err != nil {
				t.Fatalf("ls_step = %d, %v; want 1", r, err)
			}
			_, err := e.call(ctx, "ls_step")
			wantErr(t, err, "not fed back")
		}},
		{"ls_feed wrong length", func(t *testing.T) {
			e := open(t, "f32")
			if _, err := e.callIn(ctx, "ls_request", []byte(`{"mode":"greedy","prompt_ids":[1,2],"max_new":1}`)); err != nil {
				t.Fatal(err)
			}
			if _, err := e.call(ctx, "ls_step"); err != nil {
				t.Fatal(err)
			}
			_, err := e.callIn(ctx, "ls_feed", make([]byte, 12))
			wantErr(t, err, "ls_feed: 12 bytes, the region holds 2048")
		}},
		{"ls_step returns 2 after each prefill chunk, ls_progress counts the prompt", func(t *testing.T) {
			e := open(t, "f32")
			prompt := make([]int, 70) // chunks of 32: two that keep no row, then the rest
			for i := range prompt {
				prompt[i] = 3 + i
			}
			req, _ := json.Marshal(map[string]any{"mode": "greedy", "prompt_ids": prompt, "max_new": 1, "stops": []int{}})
			if _, err := e.callIn(ctx, "ls_request", req); err != nil {
				t.Fatal(err)
			}
			var steps []int32
			var done []abi.Progress
			for {
				p, err := e.Progress(ctx)
				if err != nil {
					t.Fatal(err)
				}
				done = append(done, p)
				r, err := e.call(ctx, "ls_step")
				if err != nil {
					t.Fatal(err)
				}
				steps = append(steps, r)
				if r != 2 {
					break
				}
			}
			want := []abi.Progress{{Done: 0, Total: 70}, {Done: 32, Total: 70}, {Done: 64, Total: 70}}
			if !slices.Equal(steps, []int32{2, 2, 1}) || !slices.Equal(done, want) {
				t.Fatalf("ls_step gave %v with progress %v before each; want [2 2 1] with %v", steps, done, want)
			}
			if p, err := e.Progress(ctx); err != nil || p != (abi.Progress{Done: 70, Total: 70}) {
				t.Fatalf("ls_progress with the first row pending = %+v, %v; want 70 of 70", p, err)
			}
		}},
		{"ls_feed without region", func(t *testing.T) {
			_, err := open(t, "f32").callIn(ctx, "ls_feed", make([]byte, 4))
			wantErr(t, err, "no region pending")
		}},
		{"greedy text prompt through ChatML", func(t *testing.T) {
			e := open(t, "q4")
			rows, res, err := e.Run(ctx, map[string]any{"mode": "greedy", "text": "Hello", "max_new": 3, "stops": []int{}})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.PromptIDs) < 10 || len(res.Output) != 3 || len(rows) != 3 || !res.Done {
				t.Fatalf("result %+v with %d rows", res, len(rows))
			}
			if r, err := e.call(ctx, "ls_step"); r != 0 || err != nil {
				t.Fatalf("ls_step after done = %d, %v; want 0", r, err)
			}
		}},
		{"ls_probe: every import", func(t *testing.T) {
			if _, err := open(t, "q4").callIn(ctx, "ls_probe", []byte(Mount+"/config.json")); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"info", "create_buffer", "write_buffer", "destroy_buffer", "create_shader_module",
				"create_compute_pipeline", "create_bind_group", "destroy_bind_group", "dispatch", "copy_buffer", "submit",
				"read_buffer", "upload_file"} {
				if dev.calls[name] == 0 {
					t.Errorf("import %s never reached the device", name)
				}
			}
		}},
		{"upload_file outside the mount", func(t *testing.T) {
			_, err := open(t, "f32").callIn(ctx, "ls_probe", []byte("/etc/passwd"))
			wantErr(t, err, "open /etc/passwd") // WASI has no such file
			_, err = open(t, "f32").callIn(ctx, "ls_probe", []byte(Mount+"/../config.json"))
			if err == nil {
				t.Fatal("a path escaping the mount was served")
			}
		}},
		{"out-of-range handle: import error reaches ls_error", func(t *testing.T) {
			dev.badHandle = true
			defer func() { dev.badHandle = false }()
			_, err := fixtures.mod.Open(ctx, dev, fixtures.modelDir, "f32", 64)
			wantErr(t, err, "ls_open: ")
			t.Log(err)
		}},
		{"trap discards the instance; the next Open works", func(t *testing.T) {
			e := open(t, "f32")
			_, err := e.call(ctx, "ls_trap")
			wantErr(t, err, "ls_trap trapped, instance discarded")
			if _, _, _, err := e.Greedy(ctx, []int{1, 2}, 1, nil); !errors.Is(err, ErrClosed) {
				t.Fatalf("after a trap: %v, want ErrClosed", err)
			}
			_, out, _, err := open(t, "f32").Greedy(ctx, []int{1, 2}, 2, []int{})
			if err != nil || len(out) != 2 {
				t.Fatalf("after a trap, a new instance gave %v, %v", out, err)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, tc.run)
	}
}
