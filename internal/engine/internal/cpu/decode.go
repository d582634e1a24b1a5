package cpu

import (
	"encoding/binary"

	"github.com/x448/float16"

	"logitscope/internal/format/ggml"
	"logitscope/internal/quant"
)

// The pure-Go row decoders of the formats a page runs most (quant's q4
// and q8, ggml's Q4_0 and Q8_0): the same bits as the reference decoders
// (quant.Layout.DequantizeRow, ggml.Dequantize), in straight runs of code
// without their per-row checks and per-group calls. In wasm, where every
// branch and call costs, the reference decoders took most of a decode
// step once the products were cheap. A 4-bit group's sixteen values
// (nibble − 8)·scale are computed once into a table, exactly as the
// reference computes each: float32(q) · scale.

// decodeQ4Go decodes quant's q4 groups: per group 16 code bytes (column
// 2i in byte i's low nibble, 2i+1 in its high one) and an f16 scale.
func decodeQ4Go(codes, scales []byte, groups int, dst []float32) {
	codes, scales, dst = codes[:16*groups], scales[:2*groups], dst[:32*groups]
	for len(dst) >= 32 {
		t := nibbleTable(half(scales))
		c, d := codes[:16:16], dst[:32:32]
		for i := range 16 {
			d[2*i], d[2*i+1] = t[c[i]&15], t[c[i]>>4]
		}
		codes, scales, dst = codes[16:], scales[2:], dst[32:]
	}
}

// decodeQ8Go decodes quant's q8 groups: 32 int8 codes and an f16 scale.
func decodeQ8Go(codes, scales []byte, groups int, dst []float32) {
	codes, scales, dst = codes[:32*groups], scales[:2*groups], dst[:32*groups]
	for len(dst) >= 32 {
		s := half(scales)
		c, d := codes[:32:32], dst[:32:32]
		for i := range 32 {
			d[i] = float32(int8(c[i])) * s
		}
		codes, scales, dst = codes[32:], scales[2:], dst[32:]
	}
}

// decodeQ4_0Go decodes ggml's Q4_0 blocks of 18 bytes: an f16 d, then
// weight j in byte j's low nibble and j+16 in its high one.
func decodeQ4_0Go(src []byte, dst []float32) {
	for len(dst) >= 32 {
		b, d := src[:18:18], dst[:32:32]
		t := nibbleTable(half(b))
		for j := range 16 {
			d[j], d[j+16] = t[b[2+j]&15], t[b[2+j]>>4]
		}
		src, dst = src[18:], dst[32:]
	}
}

// decodeQ8_0Go decodes ggml's Q8_0 blocks of 34 bytes: an f16 d, then
// 32 int8 weights.
func decodeQ8_0Go(src []byte, dst []float32) {
	for len(dst) >= 32 {
		b, d := src[:34:34], dst[:32:32]
		s := half(b)
		for j := range 32 {
			d[j] = float32(int8(b[2+j])) * s
		}
		src, dst = src[34:], dst[32:]
	}
}

// nibbleTable is (n − 8)·s for each 4-bit code n.
func nibbleTable(s float32) *[16]float32 {
	return &[16]float32{
		-8 * s, -7 * s, -6 * s, -5 * s, -4 * s, -3 * s, -2 * s, -1 * s,
		0 * s, 1 * s, 2 * s, 3 * s, 4 * s, 5 * s, 6 * s, 7 * s,
	}
}

// half is the little-endian f16 at b widened as the reference decoders
// widen it.
func half(b []byte) float32 {
	return float16.Frombits(binary.LittleEndian.Uint16(b)).Float32()
}

// The pure-Go decoders by format, which the assembly ones replace where
// the CPU has them (kernel_amd64.go).
func goQuantRows() map[quant.Scheme]func(codes, scales []byte, groups int, dst []float32) {
	return map[quant.Scheme]func([]byte, []byte, int, []float32){quant.Q4: decodeQ4Go, quant.Q8: decodeQ8Go}
}

func goGGMLRows() map[ggml.Type]func(src []byte, dst []float32) {
	return map[ggml.Type]func([]byte, []float32){ggml.Q4_0: decodeQ4_0Go, ggml.Q8_0: decodeQ8_0Go}
}
