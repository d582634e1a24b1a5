package native

import (
	"fmt"
	"testing"
	"time"

	"logitscope/internal/gpu"
)

const matvecWGSL = `
@group(0) @binding(0) var<storage, read> w: array<f32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let n = arrayLength(&x);
    let row = id.x;
    if (row >= arrayLength(&y)) { return; }
    var acc = 0.0;
    for (var k = 0u; k < n; k++) {
        acc += w[row * n + k] * x[k];
    }
    y[row] = acc;
}
`

// BenchmarkMatvec1024 is one 1024×1024 f32 matvec (one row per invocation)
// plus the readback of its result: what a tiny layer costs per token.
func BenchmarkMatvec1024(b *testing.B) {
	d := openDevice(b)
	const n = 1024
	w, x := make([]float32, n*n), make([]float32, n)
	for i := range w {
		w[i] = float32(i%17) / 17
	}
	for i := range x {
		x[i] = float32(i%5) - 2
	}
	p := kernel(b, d, "matvec", matvecWGSL)
	y, err := d.CreateBuffer("y", 4*n)
	if err != nil {
		b.Fatal(err)
	}
	g := bind(b, d, p, bufferWith(b, d, "w", f32Bytes(w)), bufferWith(b, d, "x", f32Bytes(x)), y)
	got := bytesF32(matvecOnce(b, d, p, g, y))
	want := float32(0)
	for k := range n {
		want += w[k] * x[k]
	}
	if diff := got[0] - want; diff > 1e-3 || diff < -1e-3 {
		b.Fatalf("y[0] = %v, want %v", got[0], want)
	}
	start := time.Now()
	for b.Loop() {
		matvecOnce(b, d, p, g, y)
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/op")
}

func matvecOnce(b *testing.B, d gpu.Device, p gpu.Pipeline, g gpu.BindGroup, y gpu.Buffer) []byte {
	if err := d.Dispatch(p, []gpu.BindGroup{g}, 1024/64, 1, 1); err != nil {
		b.Fatal(err)
	}
	return read(b, d, y, 0, 4*1024)
}

// BenchmarkRoundTrip is an empty Submit plus a 4-byte ReadBuffer: the
// floor under every generated token.
func BenchmarkRoundTrip(b *testing.B) {
	d := openDevice(b)
	buf := bufferWith(b, d, "one", make([]byte, 4))
	start := time.Now()
	for b.Loop() {
		if err := d.Submit(); err != nil {
			b.Fatal(err)
		}
		read(b, d, buf, 0, 4)
	}
	b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/op")
}

// BenchmarkChain records 64 small dependent dispatches and reads the end,
// once with one compute pass for the run and once with a pass per
// dispatch, to choose the recorder's policy.
func BenchmarkChain(b *testing.B) {
	for _, perDispatch := range []bool{false, true} {
		b.Run(fmt.Sprintf("passPerDispatch=%v", perDispatch), func(b *testing.B) {
			d := openDevice(b)
			d.(*device).rec.passPerDispatch = perDispatch
			p := kernel(b, d, "scale", scaleWGSL)
			const n = 1024
			x := bufferWith(b, d, "x", make([]byte, 4*n))
			y := bufferWith(b, d, "y", make([]byte, 4*n))
			fwd, back := bind(b, d, p, x, y), bind(b, d, p, y, x)
			start := time.Now()
			for b.Loop() {
				for i := range 64 {
					g := fwd
					if i%2 == 1 {
						g = back
					}
					if err := d.Dispatch(p, []gpu.BindGroup{g}, n/64, 1, 1); err != nil {
						b.Fatal(err)
					}
				}
				read(b, d, x, 0, 4)
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/op")
		})
	}
}
