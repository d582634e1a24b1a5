//go:build wasip1

package cpu

import (
	"unsafe"

	"logitscope/internal/format/ggml"
	"logitscope/internal/model"
	"logitscope/internal/quant"
)

// engine.wasm's kernels in WebAssembly SIMD128 (package wasmsimd), which
// Go's wasm backend cannot emit: the host instantiates simd.wasm on this
// module's memory and serves its exports as the imports below, in the
// browser (web/static/worker.js) and under wazero (package host) alike.
// Each kernel gives the bits of its Go twin (the order of kernel.go), and
// each call does a whole block of rows or a whole tile, so that crossing
// into the host costs nothing next to the work. Pointers are into this
// module's linear memory (the Go heap does not move, and no goroutine runs
// during an import); strides are in bytes.

// simdAvailable is 1 when the host serves the kernels, 0 when it cannot
// (a browser without SIMD128): the Go kernels stay then.
//
//go:wasmimport simd available
func simdAvailable() int32

//go:wasmimport simd q4_rows
func simdQ4Rows(codes unsafe.Pointer, ldc uint32, scales unsafe.Pointer, lds uint32, groups uint32, x, out unsafe.Pointer, rows uint32)

//go:wasmimport simd q8_rows
func simdQ8Rows(codes unsafe.Pointer, ldc uint32, scales unsafe.Pointer, lds uint32, groups uint32, x, out unsafe.Pointer, rows uint32)

//go:wasmimport simd q4_decode
func simdQ4Decode(codes unsafe.Pointer, ldc uint32, scales unsafe.Pointer, lds uint32, groups uint32, dst unsafe.Pointer, ldd uint32, rows uint32)

//go:wasmimport simd q8_decode
func simdQ8Decode(codes unsafe.Pointer, ldc uint32, scales unsafe.Pointer, lds uint32, groups uint32, dst unsafe.Pointer, ldd uint32, rows uint32)

//go:wasmimport simd q4_0_rows
func simdQ4_0Rows(rows unsafe.Pointer, ldr uint32, blocks uint32, x, out unsafe.Pointer, n uint32)

//go:wasmimport simd q8_0_rows
func simdQ8_0Rows(rows unsafe.Pointer, ldr uint32, blocks uint32, x, out unsafe.Pointer, n uint32)

//go:wasmimport simd q4_0_decode
func simdQ4_0Decode(rows unsafe.Pointer, ldr uint32, blocks uint32, dst unsafe.Pointer, ldd uint32, n uint32)

//go:wasmimport simd q8_0_decode
func simdQ8_0Decode(rows unsafe.Pointer, ldr uint32, blocks uint32, dst unsafe.Pointer, ldd uint32, n uint32)

//go:wasmimport simd f32_rows
func simdF32Rows(w unsafe.Pointer, ldw uint32, x unsafe.Pointer, k uint32, out unsafe.Pointer, rows uint32)

//go:wasmimport simd tile4x4
func simdTile4x4(w unsafe.Pointer, ldw uint32, x unsafe.Pointer, ldx uint32, k uint32, acc, out unsafe.Pointer, flags uint32)

func init() {
	if simdAvailable() != 0 {
		useSIMD()
	}
}

// useSIMD installs the host's kernels.
func useSIMD() {
	rowDots[model.Format{Scheme: quant.Q4}] = simdQuantDot(quant.Q4, simdQ4Rows)
	rowDots[model.Format{Scheme: quant.Q8}] = simdQuantDot(quant.Q8, simdQ8Rows)
	quantBlocks[quant.Q4] = simdQuantDecode(simdQ4Decode)
	quantBlocks[quant.Q8] = simdQuantDecode(simdQ8Decode)
	rowDots[model.Format{Type: ggml.Q4_0}] = simdGGMLDot(ggml.Q4_0, simdQ4_0Rows)
	rowDots[model.Format{Type: ggml.Q8_0}] = simdGGMLDot(ggml.Q8_0, simdQ8_0Rows)
	ggmlBlocks[ggml.Q4_0] = simdGGMLDecode(simdQ4_0Decode)
	ggmlBlocks[ggml.Q8_0] = simdGGMLDecode(simdQ8_0Decode)
	dotRows = func(w []float32, ldw int, x []float32, k int, out []float32) {
		n := len(out)
		if n == 0 {
			return
		}
		_, _ = w[(n-1)*ldw+k-1], x[k-1]
		simdF32Rows(unsafe.Pointer(&w[0]), uint32(4*ldw), unsafe.Pointer(&x[0]), uint32(k), unsafe.Pointer(&out[0]), uint32(n))
	}
	tile4x1 = func(w []float32, ldw int, x []float32, k int, out *[4]float32) {
		dotRows(w, ldw, x, k, out[:])
	}
	tile4x4 = func(w []float32, ldw int, x []float32, ldx, k int, acc *[16][lanes]float32, out *[16]float32, flags int) {
		_, _ = w[3*ldw+k-1], x[3*ldx+k-1]
		simdTile4x4(unsafe.Pointer(&w[0]), uint32(4*ldw), unsafe.Pointer(&x[0]), uint32(4*ldx), uint32(k), unsafe.Pointer(acc), unsafe.Pointer(out), uint32(flags))
	}
}

// simdQuantDot is the fused one-token kernel of quant scheme s: rows
// [a, z) of the piece decoded group by group in registers (codes and f16
// scales as stored) and multiplied with x, all in one call.
func simdQuantDot(s quant.Scheme, rows func(codes unsafe.Pointer, ldc uint32, scales unsafe.Pointer, lds uint32, groups uint32, x, out unsafe.Pointer, rows uint32)) func(p *model.Piece, k, a, z int, x, out, scratch []float32) {
	return func(p *model.Piece, k, a, z int, x, out, _ []float32) {
		n := z - a
		if n == 0 {
			return
		}
		l, _ := quant.NewLayout(s, p.Rows, k)
		qw, sw := 4*l.QuantWordsPerRow, 4*l.ScaleWordsPerRow
		codes := p.Data[a*qw : z*qw]
		scales := p.Data[l.QuantBytes()+a*sw : l.QuantBytes()+z*sw]
		_, _ = x[32*l.Groups-1], out[n-1]
		rows(unsafe.Pointer(&codes[0]), uint32(qw), unsafe.Pointer(&scales[0]), uint32(sw), uint32(l.Groups), unsafe.Pointer(&x[0]), unsafe.Pointer(&out[0]), uint32(n))
	}
}

// simdQuantDecode decodes a block of rows of a quant scheme into float32
// (prefill's scratch) in one call.
func simdQuantDecode(decode func(codes unsafe.Pointer, ldc uint32, scales unsafe.Pointer, lds uint32, groups uint32, dst unsafe.Pointer, ldd uint32, rows uint32)) func(codes, scales []byte, qw, sw, groups int, dst []float32, k int) {
	return func(codes, scales []byte, qw, sw, groups int, dst []float32, k int) {
		n := len(codes) / qw
		if n == 0 {
			return
		}
		// Each row writes its whole groups, its last one past k.
		_, _ = scales[(n-1)*sw+2*groups-1], dst[(n-1)*k+32*groups-1]
		decode(unsafe.Pointer(&codes[0]), uint32(qw), unsafe.Pointer(&scales[0]), uint32(sw), uint32(groups), unsafe.Pointer(&dst[0]), uint32(4*k), uint32(n))
	}
}

// simdGGMLDot is the fused one-token kernel of ggml type t (blocks of 32
// columns): rows [a, z) of the piece in one call.
func simdGGMLDot(t ggml.Type, rows func(rows unsafe.Pointer, ldr uint32, blocks uint32, x, out unsafe.Pointer, n uint32)) func(p *model.Piece, k, a, z int, x, out, scratch []float32) {
	return func(p *model.Piece, k, a, z int, x, out, _ []float32) {
		n := z - a
		if n == 0 {
			return
		}
		rb, _ := t.RowBytes(k)
		data := p.Data[int64(a)*rb : int64(z)*rb]
		_, _ = x[k-1], out[n-1]
		rows(unsafe.Pointer(&data[0]), uint32(rb), uint32(k/32), unsafe.Pointer(&x[0]), unsafe.Pointer(&out[0]), uint32(n))
	}
}

// simdGGMLDecode decodes a block of rows of 32-column blocks into
// float32 in one call.
func simdGGMLDecode(decode func(rows unsafe.Pointer, ldr uint32, blocks uint32, dst unsafe.Pointer, ldd uint32, n uint32)) func(rows []byte, rb int, dst []float32, k int) {
	return func(rows []byte, rb int, dst []float32, k int) {
		n := len(rows) / rb
		if n == 0 {
			return
		}
		_ = dst[n*k-1]
		decode(unsafe.Pointer(&rows[0]), uint32(rb), uint32(k/32), unsafe.Pointer(&dst[0]), uint32(4*k), uint32(n))
	}
}
