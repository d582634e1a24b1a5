package native

import (
	"math"
	"strings"
	"testing"

	"github.com/x448/float16"

	"logitscope/internal/gpu"
)

func TestSyntaxErrorNamesShader(t *testing.T) {
	d := openDevice(t)
	_, err := d.CreateShaderModule("broken kernel", `
@compute @workgroup_size(64)
fn main() {
    let x = ;
}
`)
	if err == nil || !strings.Contains(err.Error(), `"broken kernel"`) {
		t.Fatalf("err = %v", err)
	}
	t.Log(err)
	_, err = d.CreateShaderModule("unresolved", `
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main() {
    out[0] = y;
}
`)
	if err == nil || !strings.Contains(err.Error(), `"unresolved"`) || !strings.Contains(err.Error(), "y") {
		t.Fatalf("err = %v", err)
	}
	t.Log(err)
}

// TestTypeErrorNagaMisses pins down a naga v0.18 gap: it accepts a store of
// a u32 into an f32 array and emits invalid SPIR-V. The error must still
// come back, at pipeline creation, naming the pipeline.
func TestTypeErrorNagaMisses(t *testing.T) {
	d := openDevice(t)
	m, err := d.CreateShaderModule("type error", `
@group(0) @binding(0) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64)
fn main() {
    out[0] = 1u;
}
`)
	if err != nil {
		t.Logf("naga now reports it at compile time: %v", err)
		return
	}
	_, err = d.CreateComputePipeline("type error", m, "main")
	if err == nil || !strings.Contains(err.Error(), `"type error"`) {
		t.Fatalf("err = %v", err)
	}
	t.Log(err)
}

// The packed built-ins the quantized kernels rely on, on runtime values
// (unpack2x16float of a constant is folded wrongly by naga; see shader.go).
const packedWGSL = `
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read_write> halves: array<f32>;
@group(0) @binding(2) var<storage, read_write> bytes: array<i32>;
@group(0) @binding(3) var<storage, read_write> dots: array<i32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let i = id.x;
    if (i + 1u >= arrayLength(&w)) { return; }
    let h = unpack2x16float(w[i]);
    halves[2u * i] = h.x;
    halves[2u * i + 1u] = h.y;
    let b = unpack4xI8(w[i]);
    for (var k = 0u; k < 4u; k++) {
        bytes[4u * i + k] = b[k];
    }
    dots[i] = dot4I8Packed(w[i], w[i + 1u]);
}
`

func TestPackedBuiltins(t *testing.T) {
	d := openDevice(t)
	const n = 257
	w := make([]uint32, n)
	seed := uint32(12345)
	for i := range w {
		seed = seed*1664525 + 1013904223
		w[i] = seed
	}
	// Some words of finite f16 halves too, where float values compare exactly.
	for i := 0; i < n; i += 3 {
		w[i] = uint32(float16.Fromfloat32(float32(i)/7).Bits()) | uint32(float16.Fromfloat32(-float32(i)*3).Bits())<<16
	}
	p := kernel(t, d, "packed", packedWGSL)
	in := bufferWith(t, d, "w", u32Bytes(w))
	halves := bufferWith(t, d, "halves", make([]byte, 4*2*n))
	bytesOut := bufferWith(t, d, "bytes", make([]byte, 4*4*n))
	dots := bufferWith(t, d, "dots", make([]byte, 4*n))
	g := bind(t, d, p, in, halves, bytesOut, dots)
	if err := d.Dispatch(p, []gpu.BindGroup{g}, (n+63)/64, 1, 1); err != nil {
		t.Fatal(err)
	}
	gotH := bytesF32(read(t, d, halves, 0, 4*2*n))
	gotB := bytesU32(read(t, d, bytesOut, 0, 4*4*n))
	gotD := bytesU32(read(t, d, dots, 0, 4*n))
	for i := 0; i+1 < n; i++ {
		for k, bits := range []uint16{uint16(w[i]), uint16(w[i] >> 16)} {
			want := float16.Frombits(bits).Float32()
			got := gotH[2*i+k]
			if got != want && !(math.IsNaN(float64(got)) && math.IsNaN(float64(want))) {
				t.Fatalf("unpack2x16float(%#x)[%d] = %v, want %v", w[i], k, got, want)
			}
		}
		dot := int32(0)
		for k := range 4 {
			a, b := int8(w[i]>>(8*k)), int8(w[i+1]>>(8*k))
			if got := int32(gotB[4*i+k]); got != int32(a) {
				t.Fatalf("unpack4xI8(%#x)[%d] = %d, want %d", w[i], k, got, a)
			}
			dot += int32(a) * int32(b)
		}
		if got := int32(gotD[i]); got != dot {
			t.Fatalf("dot4I8Packed(%#x, %#x) = %d, want %d", w[i], w[i+1], got, dot)
		}
	}
}

// Two entry points in one module use different bindings, one of them only
// through a helper function: each pipeline's derived layout must hold just
// what its entry point uses, as WebGPU's "auto" layout does.
func TestLayoutPerEntryPoint(t *testing.T) {
	d := openDevice(t)
	m, err := d.CreateShaderModule("two entries", `
@group(0) @binding(0) var<storage, read_write> a: array<u32>;
@group(0) @binding(1) var<storage, read_write> b: array<u32>;
@group(1) @binding(0) var<uniform> k: vec4<u32>;

fn put(i: u32) { b[i] = k.x; }

@compute @workgroup_size(1)
fn first() { a[0] = 7u; }

@compute @workgroup_size(1)
fn second() { put(0u); }
`)
	if err != nil {
		t.Fatal(err)
	}
	first, err := d.CreateComputePipeline("first", m, "first")
	if err != nil {
		t.Fatal(err)
	}
	second, err := d.CreateComputePipeline("second", m, "second")
	if err != nil {
		t.Fatal(err)
	}
	a := bufferWith(t, d, "a", make([]byte, 16))
	b := bufferWith(t, d, "b", make([]byte, 16))
	k := bufferWith(t, d, "k", u32Bytes([]uint32{9, 0, 0, 0}))

	g1, err := d.CreateBindGroup(first, 0, []gpu.Binding{{Binding: 0, Buffer: a}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.CreateBindGroup(first, 1, []gpu.Binding{{Binding: 0, Buffer: k}})
	wantErr(t, "group the entry point does not use", err, "@group(1)")
	g2, err := d.CreateBindGroup(second, 0, []gpu.Binding{{Binding: 1, Buffer: b}})
	if err != nil {
		t.Fatal(err)
	}
	g2k, err := d.CreateBindGroup(second, 1, []gpu.Binding{{Binding: 0, Buffer: k}})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Dispatch(first, []gpu.BindGroup{g1}, 1, 1, 1); err != nil {
		t.Fatal(err)
	}
	if err := d.Dispatch(second, []gpu.BindGroup{g2, g2k}, 1, 1, 1); err != nil {
		t.Fatal(err)
	}
	if got := bytesU32(read(t, d, a, 0, 4))[0]; got != 7 {
		t.Errorf("a[0] = %d", got)
	}
	if got := bytesU32(read(t, d, b, 0, 4))[0]; got != 9 {
		t.Errorf("b[0] = %d", got)
	}
}
