//go:build !wasm

package cpu

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"logitscope/internal/engine/wasmsimd"
	"logitscope/internal/format/ggml"
)

// The SIMD128 kernels that engine.wasm's hosts serve (package wasmsimd)
// give the bits of the Go kernels here, which engine.wasm runs without
// them: run under wazero on a memory of their own, on random inputs and
// the edges of the order (partial chunks, −0 lanes, every f16 scale).

// simdMachine is simd.wasm instantiated on a fresh memory, with a bump
// allocator that hands out addresses 8 bytes past a 16-byte boundary, as
// Go's heap may (the kernels load v128s unaligned).
type simdMachine struct {
	t    *testing.T
	ctx  context.Context
	mem  api.Memory
	mod  api.Module
	next uint32
}

// memoryWasm is a module that exports a memory of 1024 pages (64 MiB).
var memoryWasm = []byte{
	0, 'a', 's', 'm', 1, 0, 0, 0,
	5, 4, 1, 0, 0x80, 8, // memory section: min 1024 pages
	7, 10, 1, 6, 'm', 'e', 'm', 'o', 'r', 'y', 2, 0, // export "memory"
}

func newSIMDMachine(t *testing.T) *simdMachine {
	t.Helper()
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	t.Cleanup(func() { rt.Close(ctx) })
	engine, err := rt.InstantiateWithConfig(ctx, memoryWasm, wazero.NewModuleConfig().WithName("engine-1"))
	if err != nil {
		t.Fatal(err)
	}
	compiled, err := rt.CompileModule(ctx, wasmsimd.Wasm)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := wasmsimd.Instantiate(ctx, rt, compiled, engine, "simd-1")
	if err != nil {
		t.Fatal(err)
	}
	return &simdMachine{t: t, ctx: ctx, mem: engine.Memory(), mod: mod}
}

// reset frees everything allocated.
func (m *simdMachine) reset() { m.next = 0 }

func (m *simdMachine) alloc(n int) uint32 {
	p := (m.next+15)/16*16 + 8
	m.next = p + uint32(n)
	if m.next > m.mem.Size() {
		m.t.Fatalf("simd test memory: %d bytes past %d", m.next, m.mem.Size())
	}
	return p
}

func (m *simdMachine) bytes(b []byte) uint32 {
	p := m.alloc(len(b))
	m.mem.Write(p, b)
	return p
}

func (m *simdMachine) floats(f []float32) uint32 {
	b := make([]byte, 4*len(f))
	for i, v := range f {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return m.bytes(b)
}

func (m *simdMachine) read(p uint32, n int) []float32 {
	b, ok := m.mem.Read(p, uint32(4*n))
	if !ok {
		m.t.Fatalf("reading %d floats at %#x", n, p)
	}
	f := make([]float32, n)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return f
}

func (m *simdMachine) call(name string, args ...uint32) {
	m.t.Helper()
	stack := make([]uint64, len(args))
	for i, a := range args {
		stack[i] = uint64(a)
	}
	if _, err := m.mod.ExportedFunction(name).Call(m.ctx, stack...); err != nil {
		m.t.Fatalf("%s: %v", name, err)
	}
}

// randHalves are n finite f16 scales: normal ones of varied exponent and
// some subnormal ones and zeros.
func randHalves(r *rand.Rand, n int) []byte {
	b := make([]byte, 2*n)
	for i := range n {
		h := uint16(r.IntN(0x7c00)) | uint16(r.IntN(2))<<15
		if r.IntN(4) > 0 { // mostly the scales a model has
			h = uint16(0x2000+r.IntN(0x2000)) | uint16(r.IntN(2))<<15
		}
		binary.LittleEndian.PutUint16(b[2*i:], h)
	}
	return b
}

func TestSIMDQuantRows(t *testing.T) {
	m := newSIMDMachine(t)
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct {
		bits, rows, groups, trial int
	}{
		{4, 4, 1, 0}, {4, 1, 1, 1}, {4, 8, 3, 2}, {4, 12, 28, 0}, {4, 4, 152, 3}, {4, 4, 28, 4},
		{8, 4, 1, 0}, {8, 1, 1, 1}, {8, 8, 3, 2}, {8, 12, 28, 0}, {8, 4, 152, 3}, {8, 4, 28, 4},
	} {
		t.Run(fmt.Sprintf("q%d/%dx%d/trial%d", c.bits, c.rows, c.groups, c.trial), func(t *testing.T) {
			m.reset()
			k := 32 * c.groups
			// Rows as quant lays them out: qw code bytes and sw scale
			// bytes each (scales padded to whole words).
			qw, sw := c.bits*k/8, 4*((c.groups+1)/2)
			codes := make([]byte, c.rows*qw)
			for i := range codes {
				codes[i] = byte(r.Uint32())
			}
			scales := make([]byte, c.rows*sw)
			for i := range c.rows {
				copy(scales[i*sw:], randHalves(r, c.groups))
			}
			x := randomValues(r, k, c.trial)
			want := make([]float32, c.rows)
			w := make([]float32, k)
			for i := range c.rows {
				if c.bits == 4 {
					decodeQ4Go(codes[i*qw:], scales[i*sw:], c.groups, w)
				} else {
					decodeQ8Go(codes[i*qw:], scales[i*sw:], c.groups, w)
				}
				want[i] = dotGo(w, x)
			}
			out := m.alloc(4 * c.rows)
			m.call(fmt.Sprintf("q%d_rows", c.bits), m.bytes(codes), uint32(qw), m.bytes(scales), uint32(sw), uint32(c.groups), m.floats(x), out, uint32(c.rows))
			sameBits(t, "q_rows", m.read(out, c.rows), want)
		})
	}
}

// TestSIMDQuantDecode decodes blocks of rows for prefill, k columns a
// row in whole groups (the last group's spill overwritten by the next
// row, as decodeRows' Go decoders do) or not.
func TestSIMDQuantDecode(t *testing.T) {
	m := newSIMDMachine(t)
	r := rand.New(rand.NewPCG(9, 10))
	for _, c := range []struct{ bits, rows, groups, k int }{
		{4, 1, 1, 32}, {4, 5, 28, 896}, {4, 3, 2, 50}, {8, 1, 1, 32}, {8, 5, 28, 896}, {8, 3, 2, 50},
	} {
		t.Run(fmt.Sprintf("q%d/%dx%d/k%d", c.bits, c.rows, c.groups, c.k), func(t *testing.T) {
			m.reset()
			qw, sw := c.bits*4*c.groups, 4*((c.groups+1)/2)
			codes := make([]byte, c.rows*qw)
			for i := range codes {
				codes[i] = byte(r.Uint32())
			}
			scales := make([]byte, c.rows*sw)
			for i := range c.rows {
				copy(scales[i*sw:], randHalves(r, c.groups))
			}
			n := (c.rows-1)*c.k + 32*c.groups
			want := make([]float32, n)
			for i := range c.rows {
				if c.bits == 4 {
					decodeQ4Go(codes[i*qw:], scales[i*sw:], c.groups, want[i*c.k:])
				} else {
					decodeQ8Go(codes[i*qw:], scales[i*sw:], c.groups, want[i*c.k:])
				}
			}
			dst := m.alloc(4 * n)
			m.call(fmt.Sprintf("q%d_decode", c.bits), m.bytes(codes), uint32(qw), m.bytes(scales), uint32(sw), uint32(c.groups), dst, uint32(4*c.k), uint32(c.rows))
			sameBits(t, "decoded", m.read(dst, n), want)
		})
	}
}

// TestSIMDGGML runs ggml's Q4_0 and Q8_0 rows through the fused kernels
// and the block decoders, against ggml's reference decoder (random
// blocks, their scales any finite f16) and the order's dot product.
func TestSIMDGGML(t *testing.T) {
	m := newSIMDMachine(t)
	r := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct {
		typ        ggml.Type
		rows, cols int
		trial      int
	}{
		{ggml.Q4_0, 1, 32, 0}, {ggml.Q4_0, 4, 896, 1}, {ggml.Q4_0, 7, 4864, 3}, {ggml.Q4_0, 4, 96, 4},
		{ggml.Q8_0, 1, 32, 0}, {ggml.Q8_0, 4, 896, 1}, {ggml.Q8_0, 7, 4864, 3}, {ggml.Q8_0, 4, 96, 4},
	} {
		t.Run(fmt.Sprintf("%s/%dx%d/trial%d", c.typ, c.rows, c.cols, c.trial), func(t *testing.T) {
			m.reset()
			w := make([]float32, c.rows*c.cols)
			data := randomBlocks(t, r, c.typ, c.rows, c.cols, w)
			rb := len(data) / c.rows
			x := randomValues(r, c.cols, c.trial)
			want := make([]float32, c.rows)
			for i := range want {
				want[i] = dotGo(w[i*c.cols:(i+1)*c.cols], x)
			}
			name := strings.ToLower(c.typ.String())
			p, out := m.bytes(data), m.alloc(4*c.rows)
			m.call(name+"_rows", p, uint32(rb), uint32(c.cols/32), m.floats(x), out, uint32(c.rows))
			sameBits(t, name+"_rows", m.read(out, c.rows), want)
			dst := m.alloc(4 * len(w))
			m.call(name+"_decode", p, uint32(rb), uint32(c.cols/32), dst, uint32(4*c.cols), uint32(c.rows))
			sameBits(t, name+"_decode", m.read(dst, len(w)), w)
		})
	}
}

// TestSIMDHalfScales runs every f16 bit pattern as a q8 group's scale:
// the kernel widens scales itself, as the reference decoder does.
func TestSIMDHalfScales(t *testing.T) {
	m := newSIMDMachine(t)
	r := rand.New(rand.NewPCG(3, 4))
	const rows, sw = 1 << 16, 4
	codes := make([]byte, 32*rows)
	for i := range codes {
		codes[i] = byte(r.Uint32())
	}
	scales := make([]byte, sw*rows)
	for i := range rows {
		binary.LittleEndian.PutUint16(scales[sw*i:], uint16(i))
	}
	x := randomValues(r, 32, 0)
	want := make([]float32, rows)
	w := make([]float32, 32)
	for i := range rows {
		decodeQ8Go(codes[32*i:], scales[sw*i:], 1, w)
		want[i] = dotGo(w, x)
	}
	out := m.alloc(4 * rows)
	m.call("q8_rows", m.bytes(codes), 32, m.bytes(scales), sw, 1, m.floats(x), out, rows)
	sameBits(t, "q8_rows", m.read(out, rows), want)
}

func TestSIMDF32Rows(t *testing.T) {
	m := newSIMDMachine(t)
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct{ rows, k, ldw, trial int }{
		{4, 1, 1, 0}, {4, 5, 7, 1}, {1, 15, 15, 2}, {4, 16, 16, 3}, {3, 17, 20, 4}, {4, 31, 31, 1},
		{8, 33, 40, 0}, {4, 896, 896, 1}, {9, 1000, 1003, 2}, {4, 4864, 4864, 3}, {4, 100, 100, 4},
	} {
		t.Run(fmt.Sprintf("%dx%d/trial%d", c.rows, c.k, c.trial), func(t *testing.T) {
			m.reset()
			w, x := randomValues(r, c.rows*c.ldw, c.trial), randomValues(r, c.k, c.trial)
			if c.trial == 4 { // products of either sign that round to ±0
				for i := range x {
					x[i] = -x[i]
				}
			}
			want := make([]float32, c.rows)
			for i := range want {
				want[i] = dotGo(w[i*c.ldw:i*c.ldw+c.k], x)
			}
			if c.rows == 4 { // and the tile the engine calls
				var t4 [4]float32
				tile4x1Go(w, c.ldw, x, c.k, &t4)
				sameBits(t, "tile4x1Go beside dotGo", t4[:], want)
			}
			out := m.alloc(4 * c.rows)
			m.call("f32_rows", m.floats(w), uint32(4*c.ldw), m.floats(x), uint32(c.k), out, uint32(c.rows))
			sameBits(t, "f32_rows", m.read(out, c.rows), want)
		})
	}
	// A product that fused multiply-add would round differently (as
	// TestProductsNotFused): lane 0 holds z, then gets a·b.
	u := float32(1.0 / (1 << 23))
	m.reset()
	w, x := make([]float32, 4*17), make([]float32, 17)
	w[0], x[0], w[16], x[16] = -1, 1, 1+u, 1-u
	out := m.alloc(16)
	m.call("f32_rows", m.floats(w), 4*17, m.floats(x), 17, out, 4)
	if got := m.read(out, 1)[0]; got != 0 {
		t.Errorf("(1+u)(1−u) − 1 = %g, want 0 (the product rounded first)", got)
	}
}

// TestSIMDTile4x4 runs the tile over a row in panels, as gemm does: the
// lanes carried between calls in acc, the last summed into out, a
// partial chunk at the end.
func TestSIMDTile4x4(t *testing.T) {
	m := newSIMDMachine(t)
	r := rand.New(rand.NewPCG(7, 8))
	negZero := float32(math.Copysign(0, -1))
	for _, c := range []struct {
		k, ldw, ldx, trial int
		panels             []int // columns per call
		first              bool  // the first call starts from zero lanes
	}{
		{1, 1, 1, 0, []int{1}, true},
		{7, 9, 8, 1, []int{7}, true},
		{16, 16, 16, 2, []int{16}, true},
		{17, 17, 19, 3, []int{17}, true},
		{100, 100, 100, 4, []int{64, 36}, true},
		{2100, 2100, 2104, 0, []int{1024, 1024, 52}, true},
		{2100, 2100, 2104, 3, []int{1024, 1024, 52}, true},
		// −0 lanes in acc, turned +0 by the padding's zero products.
		{5, 5, 5, 0, []int{5}, false},
		{10, 10, 10, 0, []int{5, 5}, false},
		{32, 32, 32, 1, []int{16, 16}, false},
	} {
		t.Run(fmt.Sprintf("k%d/%v/trial%d", c.k, c.panels, c.trial), func(t *testing.T) {
			m.reset()
			w, x := randomValues(r, 4*c.ldw, c.trial), randomValues(r, 4*c.ldx, c.trial)
			var acc [16][lanes]float32
			for i := range acc {
				for j := range acc[i] {
					acc[i][j] = negZero
				}
			}
			pa := m.bytes(floatBytes(&acc))
			po := m.alloc(64)
			var out [16]float32
			p0 := 0
			for i, kk := range c.panels {
				flags := 0
				if i == 0 && c.first {
					flags |= first
				}
				if i == len(c.panels)-1 {
					flags |= last
				}
				tile4x4Go(w[p0:], c.ldw, x[p0:], c.ldx, kk, &acc, &out, flags)
				m.call("tile4x4", m.floats(w[p0:]), uint32(4*c.ldw), m.floats(x[p0:]), uint32(4*c.ldx), uint32(kk), pa, po, uint32(flags))
				if flags&last == 0 {
					for i := range acc {
						sameBits(t, fmt.Sprintf("tile %d's lanes after columns [%d, %d)", i, p0, p0+kk), m.read(pa+uint32(64*i), lanes), acc[i][:])
					}
				}
				p0 += kk
			}
			sameBits(t, "tile4x4", m.read(po, 16), out[:])
		})
	}
}

func floatBytes(acc *[16][lanes]float32) []byte {
	b := make([]byte, 0, 4*16*lanes)
	for _, a := range acc {
		for _, v := range a {
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		}
	}
	return b
}
