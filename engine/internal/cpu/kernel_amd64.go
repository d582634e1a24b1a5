package cpu

import (
	"golang.org/x/sys/cpu"

	"logitscope/ggml"
	"logitscope/model"
	"logitscope/quant"
)

// The assembly kernels (kernel_amd64.s). They index memory through raw
// pointers; the Go wrappers below check every bound first.

//go:noescape
func tile4x4AVX512(w *float32, ldw int, x *float32, ldx, k int, acc *[16][lanes]float32, out *[16]float32, flags int)

//go:noescape
func tile4x1AVX512(w *float32, ldw int, x *float32, k int, out *[4]float32)

//go:noescape
func decodeQ4AVX512(codes, scales *byte, groups int, dst *float32)

//go:noescape
func decodeQ8AVX512(codes, scales *byte, groups int, dst *float32)

//go:noescape
func decodeQ4_0AVX512(blocks *byte, n int, dst *float32)

//go:noescape
func decodeQ8_0AVX512(blocks *byte, n int, dst *float32)

//go:noescape
func decodeBF16AVX512(src *byte, chunks int, dst *float32)

//go:noescape
func decodeF16AVX512(src *byte, chunks int, dst *float32)

//go:noescape
func dot4Q4AVX512(w *byte, ldw int, s *float32, lds int, n int, x *float32, out *[4]float32)

//go:noescape
func dot4Q8AVX512(w *byte, ldw int, s *float32, lds int, n int, x *float32, out *[4]float32)

//go:noescape
func dot4Q4_0AVX512(w *byte, ldw int, s *byte, lds int, n int, x *float32, out *[4]float32)

//go:noescape
func dot4Q8_0AVX512(w *byte, ldw int, s *byte, lds int, n int, x *float32, out *[4]float32)

//go:noescape
func dot4BF16AVX512(w *byte, ldw int, s *byte, lds int, n int, x *float32, out *[4]float32)

//go:noescape
func axpyAVX512(out *float32, n int, p *float32, m int, v *float32, ldv int)

// hasAVX512 is whether this CPU runs the kernels: AVX-512 Foundation for
// the 512-bit work and VL for the reduction's EVEX-encoded 128- and
// 256-bit instructions (every AVX-512 CPU has both, and F16C, which
// VCVTPH2PS needs, and AVX2).
var hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL

func init() {
	if hasAVX512 {
		useAVX512()
	}
}

// useAVX512 installs the assembly kernels.
func useAVX512() {
	tile4x4, tile4x1 = tile4x4Asm, tile4x1Asm
	axpy = func(out, p, v []float32, ldv int) {
		if len(out) == 0 || len(p) == 0 {
			return
		}
		_ = v[(len(p)-1)*ldv+len(out)-1]
		axpyAVX512(&out[0], len(out), &p[0], len(p), &v[0], ldv)
	}
	quantRows[quant.Q4] = func(codes, scales []byte, groups int, dst []float32) {
		_, _, _ = codes[16*groups-1], scales[2*groups-1], dst[32*groups-1]
		decodeQ4AVX512(&codes[0], &scales[0], groups, &dst[0])
	}
	quantRows[quant.Q8] = func(codes, scales []byte, groups int, dst []float32) {
		_, _, _ = codes[32*groups-1], scales[2*groups-1], dst[32*groups-1]
		decodeQ8AVX512(&codes[0], &scales[0], groups, &dst[0])
	}
	ggmlRows[ggml.Q4_0] = blockDecoder(18, decodeQ4_0AVX512)
	ggmlRows[ggml.Q8_0] = blockDecoder(34, decodeQ8_0AVX512)
	ggmlRows[ggml.BF16] = halfDecoder(ggml.BF16, decodeBF16AVX512)
	ggmlRows[ggml.F16] = halfDecoder(ggml.F16, decodeF16AVX512)
	if cpu.X86.HasAVX512VBMI { // VPERMB
		rowDots[model.Format{Scheme: quant.Q4}] = quantDot(quant.Q4, dot4Q4AVX512)
	}
	rowDots[model.Format{Scheme: quant.Q8}] = quantDot(quant.Q8, dot4Q8AVX512)
	rowDots[model.Format{Type: ggml.Q4_0}] = ggmlDot(ggml.Q4_0, 32, dot4Q4_0AVX512)
	rowDots[model.Format{Type: ggml.Q8_0}] = ggmlDot(ggml.Q8_0, 32, dot4Q8_0AVX512)
	rowDots[model.Format{Type: ggml.BF16}] = ggmlDot(ggml.BF16, 16, dot4BF16AVX512)
}

// quantDot wraps a fused kernel of a quant scheme (n: code bytes per
// row): the rows' codes in the piece's first region, their f16 scales
// widened into scratch first, so that the kernel reads each as a float32
// broadcast from memory.
func quantDot(s quant.Scheme, dot func(w *byte, ldw int, s *float32, lds int, n int, x *float32, out *[4]float32)) func(p *model.Piece, k, a, z int, x, out, scratch []float32) {
	half := halfDecoder(ggml.F16, decodeF16AVX512)
	return func(p *model.Piece, k, a, z int, x, out, scratch []float32) {
		l, _ := quant.NewLayout(s, p.Rows, k)
		qw, sw := 4*l.QuantWordsPerRow, 4*l.ScaleWordsPerRow
		codes := p.Data[a*qw : z*qw]
		scales := scratch[:(z-a)*sw/2]
		half(p.Data[l.QuantBytes()+a*sw:l.QuantBytes()+z*sw], scales)
		_, _ = x[32*l.Groups-1], out[z-a-1]
		var t4 [4]float32
		for i := 0; i+4 <= z-a; i += 4 {
			dot(&codes[i*qw], qw, &scales[i*sw/2], sw*2, qw, &x[0], &t4)
			copy(out[i:i+4], t4[:])
		}
	}
}

// ggmlDot wraps a fused kernel of ggml rows (n: chunks of size values
// per row).
func ggmlDot(t ggml.Type, size int, dot func(w *byte, ldw int, s *byte, lds int, n int, x *float32, out *[4]float32)) func(p *model.Piece, k, a, z int, x, out, scratch []float32) {
	return func(p *model.Piece, k, a, z int, x, out, _ []float32) {
		rb, _ := t.RowBytes(k)
		rows := p.Data[int64(a)*rb : int64(z)*rb]
		_, _ = x[k-1], out[z-a-1]
		var t4 [4]float32
		for i := 0; i+4 <= z-a; i += 4 {
			dot(&rows[int64(i)*rb], int(rb), &rows[0], 0, k/size, &x[0], &t4)
			copy(out[i:i+4], t4[:])
		}
	}
}

func tile4x4Asm(w []float32, ldw int, x []float32, ldx, k int, acc *[16][lanes]float32, out *[16]float32, flags int) {
	_, _ = w[3*ldw+k-1], x[3*ldx+k-1]
	tile4x4AVX512(&w[0], ldw, &x[0], ldx, k, acc, out, flags)
}

func tile4x1Asm(w []float32, ldw int, x []float32, k int, out *[4]float32) {
	_, _ = w[3*ldw+k-1], x[k-1]
	tile4x1AVX512(&w[0], ldw, &x[0], k, out)
}

// blockDecoder wraps a decoder of 32-weight blocks of size bytes.
func blockDecoder(size int, dec func(*byte, int, *float32)) func(src []byte, dst []float32) {
	return func(src []byte, dst []float32) {
		n := len(dst) / 32
		if n == 0 {
			return
		}
		_ = src[n*size-1]
		dec(&src[0], n, &dst[0])
	}
}

// halfDecoder wraps a decoder of 16-bit floats in chunks of 16; the
// reference decoder does the rest.
func halfDecoder(t ggml.Type, dec func(*byte, int, *float32)) func(src []byte, dst []float32) {
	return func(src []byte, dst []float32) {
		n := len(dst) / 16
		if n > 0 {
			_ = src[32*n-1]
			dec(&src[0], n, &dst[0])
		}
		if 16*n < len(dst) {
			ggml.Dequantize(t, src[32*n:2*len(dst)], dst[16*n:])
		}
	}
}
