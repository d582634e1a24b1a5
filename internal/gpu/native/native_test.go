package native

import (
	"strings"
	"testing"

	"logitscope/internal/gpu"
)

func TestInfo(t *testing.T) {
	d := openDevice(t)
	info := d.Info()
	t.Logf("adapter %q backend %s subgroups %v (size %d) software %v", info.Adapter, info.Backend, info.Subgroups, info.SubgroupMinSize, info.Software)
	t.Logf("limits %+v", info.Limits)
	if info.Backend != "vulkan" || info.Adapter == "" {
		t.Errorf("Info = %+v", info)
	}
	// Mesa's lavapipe names itself llvmpipe: the engine's kernels for
	// software adapters depend on knowing it is one.
	if strings.HasPrefix(info.Adapter, "llvmpipe") != info.Software {
		t.Errorf("adapter %q: Software = %v", info.Adapter, info.Software)
	}
	// lavapipe's compute subgroups hold 8 invocations (shared/DESIGN.md):
	// the probe must find them usable.
	if info.Software && (!info.Subgroups || info.SubgroupMinSize != 8) {
		t.Errorf("adapter %q: subgroups %v of %d, want 8", info.Adapter, info.Subgroups, info.SubgroupMinSize)
	}
	if info.Limits.MaxStorageBufferBindingSize < 128<<20 || info.Limits.MaxBufferSize < 256<<20 {
		t.Errorf("limits below WebGPU defaults: %+v", info.Limits)
	}
}

const axpyWGSL = `
struct Params { n: u32, scale: f32 }

@group(0) @binding(0) var<storage, read> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= p.n) { return; }
    out[i] = a[i] + b[i] * p.scale;
}
`

func TestSmokeAXPY(t *testing.T) {
	d := openDevice(t)
	const n = 1000 // not a multiple of the workgroup size
	a, b := make([]float32, n), make([]float32, n)
	for i := range a {
		a[i] = float32(i) * 0.5
		b[i] = float32(n-i) / 7
	}
	const scale = float32(-1.25)
	p := kernel(t, d, "axpy", axpyWGSL)
	ba := bufferWith(t, d, "a", f32Bytes(a))
	bb := bufferWith(t, d, "b", f32Bytes(b))
	out, err := d.CreateBuffer("out", 4*n)
	if err != nil {
		t.Fatal(err)
	}
	params := bufferWith(t, d, "params", append(u32Bytes([]uint32{n}), f32Bytes([]float32{scale})...))
	g := bind(t, d, p, ba, bb, out, params)
	if err := d.Dispatch(p, []gpu.BindGroup{g}, (n+63)/64, 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := d.Submit(); err != nil {
		t.Fatal(err)
	}
	got := bytesF32(read(t, d, out, 0, 4*n))
	for i := range got {
		if want := a[i] + b[i]*scale; got[i] != want {
			t.Fatalf("out[%d] = %v, want %v", i, got[i], want)
		}
	}
	// An unaligned read is widened to words internally.
	part := read(t, d, out, 4*10+1, 6)
	if want := f32Bytes(got[10:12])[1:7]; string(part) != string(want) {
		t.Errorf("unaligned read = %x, want %x", part, want)
	}
}

const scaleWGSL = `
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i >= arrayLength(&y)) { return; }
    y[i] = 2.0 * x[i] + 1.0;
}
`

// TestChainInOrder records dependent dispatches (each reads what the one
// before wrote) and a copy, submits them once and reads the end.
func TestChainInOrder(t *testing.T) {
	d := openDevice(t)
	const n, steps = 4096, 8
	p := kernel(t, d, "scale", scaleWGSL)
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(i%13) - 6
	}
	bufs := []gpu.Buffer{bufferWith(t, d, "b0", f32Bytes(x))}
	for i := 1; i <= steps; i++ {
		b, err := d.CreateBuffer("b", 4*n)
		if err != nil {
			t.Fatal(err)
		}
		bufs = append(bufs, b)
	}
	for i := 0; i < steps; i++ {
		g := bind(t, d, p, bufs[i], bufs[i+1])
		if err := d.Dispatch(p, []gpu.BindGroup{g}, n/64, 1, 1); err != nil {
			t.Fatal(err)
		}
		d.DestroyBindGroup(g) // recorded work keeps it alive
	}
	final, err := d.CreateBuffer("final", 4*n)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.CopyBuffer(bufs[steps], 0, final, 0, 4*n); err != nil {
		t.Fatal(err)
	}
	if err := d.Submit(); err != nil {
		t.Fatal(err)
	}
	got := bytesF32(read(t, d, final, 0, 4*n))
	for i, v := range x {
		for range steps {
			v = 2*v + 1
		}
		if got[i] != v {
			t.Fatalf("final[%d] = %v, want %v", i, got[i], v)
		}
	}
}

func TestWriteOrderedBeforeSubmit(t *testing.T) {
	d := openDevice(t)
	p := kernel(t, d, "scale", scaleWGSL)
	x := bufferWith(t, d, "x", f32Bytes([]float32{1, 2, 3, 4}))
	y, err := d.CreateBuffer("y", 16)
	if err != nil {
		t.Fatal(err)
	}
	g := bind(t, d, p, x, y)
	for round, v := range []float32{10, 20} {
		// Overwrite x after the previous round's read: the dispatch must
		// see this round's data.
		if err := d.WriteBuffer(x, 0, f32Bytes([]float32{v, v, v, v})); err != nil {
			t.Fatal(err)
		}
		if err := d.Dispatch(p, []gpu.BindGroup{g}, 1, 1, 1); err != nil {
			t.Fatal(err)
		}
		got := bytesF32(read(t, d, y, 0, 16))
		if got[3] != 2*v+1 {
			t.Fatalf("round %d: y = %v, want %v", round, got, 2*v+1)
		}
	}
}
