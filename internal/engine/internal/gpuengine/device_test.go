package gpuengine

import (
	"encoding/binary"
	"math"
	"testing"

	"logitscope/internal/gpu"
)

// buf uploads data (float32, uint32 or raw bytes) into a new buffer.
func buf(t testing.TB, dev gpu.Device, data any) gpu.Buffer {
	t.Helper()
	b := bytesOf(data)
	if len(b) < 256 {
		b = append(b, make([]byte, 256-len(b))...) // room for a uniform Params slot
	}
	h, err := dev.CreateBuffer("test", int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dev.DestroyBuffer(h) })
	if err := dev.WriteBuffer(h, 0, b); err != nil {
		t.Fatal(err)
	}
	return h
}

// bytesOf is data (float32, uint32 or raw bytes) little-endian, padded to
// whole words.
func bytesOf(data any) []byte {
	var b []byte
	switch v := data.(type) {
	case []float32:
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
		}
	case []uint32:
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, x)
		}
	case []byte:
		b = append(v[:len(v):len(v)], make([]byte, (4-len(v)%4)%4)...)
	}
	return b
}

// params packs uniform values (uint32 or float32), zero-padded to 32 bytes
// or a multiple of 16: a kernel's trailing fields (rmsnorm's unit) are 0
// where a test does not set them, as in the engine's zeroed params slots.
func params(vals ...any) []uint32 {
	out := make([]uint32, 0, len(vals))
	for _, v := range vals {
		switch x := v.(type) {
		case int:
			out = append(out, uint32(x))
		case uint32:
			out = append(out, x)
		case float32:
			out = append(out, math.Float32bits(x))
		}
	}
	for len(out) < 8 || len(out)%4 != 0 {
		out = append(out, 0)
	}
	return out
}

// bound compiles src's entry point and binds bufs at @binding(0..) (a
// zero buffer leaves its binding out): a pipeline to dispatch many times.
func bound(t testing.TB, dev gpu.Device, src, entry string, bufs []gpu.Buffer) (gpu.Pipeline, gpu.BindGroup) {
	t.Helper()
	m, err := dev.CreateShaderModule(entry, src)
	if err != nil {
		t.Fatal(err)
	}
	p, err := dev.CreateComputePipeline(entry, m, entry)
	if err != nil {
		t.Fatal(err)
	}
	var bs []gpu.Binding
	for i, b := range bufs {
		if b != 0 {
			bs = append(bs, gpu.Binding{Binding: uint32(i), Buffer: b})
		}
	}
	g, err := dev.CreateBindGroup(p, 0, bs)
	if err != nil {
		t.Fatal(err)
	}
	return p, g
}

// dispatch compiles src, binds bufs at @binding(0..) and runs it once.
func dispatch(t testing.TB, dev gpu.Device, src, entry string, bufs []gpu.Buffer, x, y, z uint32) {
	t.Helper()
	p, g := bound(t, dev, src, entry, bufs)
	submit(t, dev, p, g, x, y, z)
}

// submit records one dispatch of p with g and submits it.
func submit(t testing.TB, dev gpu.Device, p gpu.Pipeline, g gpu.BindGroup, x, y, z uint32) {
	t.Helper()
	if err := dev.Dispatch(p, []gpu.BindGroup{g}, x, y, z); err != nil {
		t.Fatal(err)
	}
	if err := dev.Submit(); err != nil {
		t.Fatal(err)
	}
}

// runStep records and submits step s of e's finished program, as a
// forward pass's step does, without its readback.
func runStep(t testing.TB, e *State, s step) {
	t.Helper()
	if err := e.prepare(make([]int, s.T), s); err != nil {
		t.Fatal(err)
	}
	for _, o := range e.prog {
		if err := e.dispatch(o, s); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.dev.Submit(); err != nil {
		t.Fatal(err)
	}
}

func read(t testing.TB, dev gpu.Device, b gpu.Buffer, n int) []float32 {
	t.Helper()
	raw, err := dev.ReadBuffer(b, 0, int64(4*n))
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// errors is the NMSE and the max abs error of got against want, as
// llama.cpp's test-backend-ops reports them.
func errors(got []float32, want []float64) (nmse, maxAbs float64) {
	var num, den float64
	for i := range want {
		d := float64(got[i]) - want[i]
		num += d * d
		den += want[i] * want[i]
		maxAbs = max(maxAbs, math.Abs(d))
	}
	return num / max(den, 1e-30), maxAbs
}

// rnd is a deterministic stream for test data.
type rnd uint64

func (r *rnd) f() float32 {
	*r = *r*6364136223846793005 + 1442695040888963407
	return float32(int64(*r>>11))/float32(1<<52) - 1
}

func (r *rnd) fill(n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = scale * r.f()
	}
	return v
}
