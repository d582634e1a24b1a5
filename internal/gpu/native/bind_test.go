package native

import (
	"os"
	"strings"
	"testing"

	"logitscope/internal/gpu"
)

func TestBindSubRange(t *testing.T) {
	d := openDevice(t)
	p := kernel(t, d, "scale", scaleWGSL)
	x := make([]float32, 64)
	for i := range x {
		x[i] = float32(i)
	}
	in := bufferWith(t, d, "in", f32Bytes(x))
	out := bufferWith(t, d, "out", make([]byte, 4*64))
	// Bind words [16, 32) of in and [32, 48) of out: 64-byte offsets suit
	// lavapipe's 16-byte storage offset alignment; a device with WebGPU's
	// default of 256 skips.
	align := int64(d.Info().Limits.MinStorageBufferOffsetAlignment)
	if align > 64 {
		t.Skipf("storage offset alignment %d > 64", align)
	}
	g, err := d.CreateBindGroup(p, 0, []gpu.Binding{
		{Binding: 0, Buffer: in, Offset: 64, Size: 64},
		{Binding: 1, Buffer: out, Offset: 128, Size: 64},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Dispatch(p, []gpu.BindGroup{g}, 1, 1, 1); err != nil {
		t.Fatal(err)
	}
	got := bytesF32(read(t, d, out, 0, 4*64))
	for i, v := range got {
		want := float32(0)
		if i >= 32 && i < 48 {
			want = 2*x[i-16] + 1
		}
		if v != want {
			t.Fatalf("out[%d] = %v, want %v (arrayLength must see the window, not the buffer)", i, v, want)
		}
	}
}

const fillWGSL = `
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@group(0) @binding(1) var<uniform> base: vec4<u32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * 256u;
    for (var i = id.x; i < arrayLength(&out); i += stride) {
        out[i] = base.x + i;
    }
}
`

// TestLargeBufferWindows creates a buffer over the 128 MiB binding limit and
// fills it through two 100 MiB windows; binding it whole must be an error.
func TestLargeBufferWindows(t *testing.T) {
	d := openDevice(t)
	const window = 100 << 20
	lim := d.Info().Limits
	if lim.MaxBufferSize < 2*window {
		t.Skipf("maxBufferSize %d < 200 MiB", lim.MaxBufferSize)
	}
	big, err := d.CreateBuffer("big", 2*window)
	if err != nil {
		t.Fatal(err)
	}
	p := kernel(t, d, "fill", fillWGSL)
	for w := range int64(2) {
		base := bufferWith(t, d, "base", u32Bytes([]uint32{uint32(w * window / 4), 0, 0, 0}))
		g, err := d.CreateBindGroup(p, 0, []gpu.Binding{
			{Binding: 0, Buffer: big, Offset: w * window, Size: window},
			{Binding: 1, Buffer: base},
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Dispatch(p, []gpu.BindGroup{g}, 1024, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Submit(); err != nil {
		t.Fatal(err)
	}
	for _, word := range []int64{0, window/4 - 1, window / 4, window/4 + 1, 2*window/4 - 1} {
		if got := bytesU32(read(t, d, big, 4*word, 4))[0]; got != uint32(word) {
			t.Errorf("word %d = %d", word, got)
		}
	}

	base := bufferWith(t, d, "base", make([]byte, 16))
	_, err = d.CreateBindGroup(p, 0, []gpu.Binding{{Binding: 0, Buffer: big}, {Binding: 1, Buffer: base}})
	if err == nil || !strings.Contains(err.Error(), "exceeds") || !strings.Contains(err.Error(), `"big"`) {
		t.Errorf("binding all of a 200 MiB buffer: err = %v", err)
	}
	t.Log(err)
	_, err = d.CreateBindGroup(p, 0, []gpu.Binding{
		{Binding: 0, Buffer: big, Offset: 0, Size: lim.MaxStorageBufferBindingSize + 4},
		{Binding: 1, Buffer: base},
	})
	if err == nil {
		t.Error("a binding one word over maxStorageBufferBindingSize was accepted")
	}
}

func TestOversizeBuffer(t *testing.T) {
	d := openDevice(t)
	max := d.Info().Limits.MaxBufferSize
	_, err := d.CreateBuffer("embedding", max+1)
	if err == nil || !strings.Contains(err.Error(), `"embedding"`) || !strings.Contains(err.Error(), "maxBufferSize") {
		t.Fatalf("err = %v", err)
	}
	t.Log(err)
}

// Without XDG_RUNTIME_DIR (a shell with no login session, CI), the device
// opens with one of its own, private, so that Mesa does not print an
// error on every open of a run that succeeds.
func TestRuntimeDirWhenUnset(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "")
	os.Unsetenv("XDG_RUNTIME_DIR")
	openDevice(t)
	dir := os.Getenv("XDG_RUNTIME_DIR")
	st, err := os.Stat(dir)
	if dir == "" || err != nil || !st.IsDir() || st.Mode().Perm() != 0o700 {
		t.Fatalf("XDG_RUNTIME_DIR %q (%v): want a private directory", dir, err)
	}
}
