package native

import (
	"encoding/binary"
	"errors"
	"math"
	"testing"

	"logitscope/internal/gpu"
	"logitscope/internal/sys/prereq"
)

// openDevice opens the Vulkan device or skips the test when there is none,
// except in CI, where a missing driver is a broken setup, not a reason to
// skip.
func openDevice(tb testing.TB) gpu.Device {
	tb.Helper()
	d, err := Open()
	if err != nil {
		if errors.Is(err, ErrNoAdapter) {
			prereq.Missing(tb, prereq.Vulkan, err.Error())
		}
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	return d
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func bytesF32(b []byte) []float32 {
	v := make([]float32, len(b)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

func u32Bytes(v []uint32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], x)
	}
	return b
}

func bytesU32(b []byte) []uint32 {
	v := make([]uint32, len(b)/4)
	for i := range v {
		v[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return v
}

// kernel compiles wgsl's entry point "main" into a pipeline.
func kernel(tb testing.TB, d gpu.Device, label, wgsl string) gpu.Pipeline {
	tb.Helper()
	m, err := d.CreateShaderModule(label, wgsl)
	if err != nil {
		tb.Fatal(err)
	}
	p, err := d.CreateComputePipeline(label, m, "main")
	if err != nil {
		tb.Fatal(err)
	}
	return p
}

// bufferWith creates a buffer holding data.
func bufferWith(tb testing.TB, d gpu.Device, label string, data []byte) gpu.Buffer {
	tb.Helper()
	b, err := d.CreateBuffer(label, int64(len(data)))
	if err != nil {
		tb.Fatal(err)
	}
	if err := d.WriteBuffer(b, 0, data); err != nil {
		tb.Fatal(err)
	}
	return b
}

// bind creates the bind group of group 0 with whole buffers at bindings
// 0, 1, 2, ...
func bind(tb testing.TB, d gpu.Device, p gpu.Pipeline, bufs ...gpu.Buffer) gpu.BindGroup {
	tb.Helper()
	entries := make([]gpu.Binding, len(bufs))
	for i, b := range bufs {
		entries[i] = gpu.Binding{Binding: uint32(i), Buffer: b}
	}
	g, err := d.CreateBindGroup(p, 0, entries)
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

func read(tb testing.TB, d gpu.Device, b gpu.Buffer, offset, size int64) []byte {
	tb.Helper()
	out, err := d.ReadBuffer(b, offset, size)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}
