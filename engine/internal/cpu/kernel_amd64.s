#include "textflag.h"

// AVX-512 kernels: kernel.go says the order they compute in, and
// kernel_amd64.go how they are called. A 16-lane accumulator is one Z
// register, lane i of the chunk at column j0 holding column j0+i.

// FMA4(x, a, b, c, d): the four rows Z16..Z19 times token x into a..d.
#define FMA4(x, a, b, c, d) \
	VFMADD231PS x, Z16, a \
	VFMADD231PS x, Z17, b \
	VFMADD231PS x, Z18, c \
	VFMADD231PS x, Z19, d

// REDUCE(z, y, x, off): the tree sum of z's lanes (i += i+8, i += i+4,
// i += i+2, 0 += 1) stored as a float32 at off(DI).
#define REDUCE(z, y, x, off) \
	VEXTRACTF64X4 $1, z, Y16 \
	VADDPS Y16, y, y \
	VEXTRACTF32X4 $1, y, X16 \
	VADDPS X16, x, x \
	VPERMILPS $0x0E, x, X16 \
	VADDPS X16, x, x \
	VMOVSHDUP x, X16 \
	VADDSS X16, x, x \
	VMOVSS x, off(DI)

// func tile4x4AVX512(w *float32, ldw int, x *float32, ldx, k int, out *[16]float32)
//
// out[4r+t] = w_r · x_t for rows r < 4 (stride ldw) and tokens t < 4
// (stride ldx), k columns. Accumulator Z(4t+r) is row r, token t.
TEXT ·tile4x4AVX512(SB), NOSPLIT, $0-48
	MOVQ w+0(FP), SI
	MOVQ ldw+8(FP), BX
	SHLQ $2, BX
	LEAQ (SI)(BX*1), R8
	LEAQ (R8)(BX*1), R9
	LEAQ (R9)(BX*1), R10
	MOVQ x+16(FP), DI
	MOVQ ldx+24(FP), DX
	SHLQ $2, DX
	LEAQ (DI)(DX*1), R11
	LEAQ (R11)(DX*1), R12
	LEAQ (R12)(DX*1), R13
	MOVQ k+32(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	XORQ AX, AX
	MOVQ CX, BX
	SHRQ $4, BX
	JZ tail4x4

loop4x4:
	VMOVUPS (SI)(AX*1), Z16
	VMOVUPS (R8)(AX*1), Z17
	VMOVUPS (R9)(AX*1), Z18
	VMOVUPS (R10)(AX*1), Z19
	VMOVUPS (DI)(AX*1), Z20
	VMOVUPS (R11)(AX*1), Z21
	VMOVUPS (R12)(AX*1), Z22
	VMOVUPS (R13)(AX*1), Z23
	FMA4(Z20, Z0, Z1, Z2, Z3)
	FMA4(Z21, Z4, Z5, Z6, Z7)
	FMA4(Z22, Z8, Z9, Z10, Z11)
	FMA4(Z23, Z12, Z13, Z14, Z15)
	ADDQ $64, AX
	DECQ BX
	JNZ loop4x4

tail4x4:
	// The last k mod 16 columns, the rest of the chunk read as zeros.
	ANDQ $15, CX
	JZ sum4x4
	MOVL $1, DX
	SHLL CX, DX
	DECL DX
	KMOVW DX, K1
	VMOVUPS.Z (SI)(AX*1), K1, Z16
	VMOVUPS.Z (R8)(AX*1), K1, Z17
	VMOVUPS.Z (R9)(AX*1), K1, Z18
	VMOVUPS.Z (R10)(AX*1), K1, Z19
	VMOVUPS.Z (DI)(AX*1), K1, Z20
	VMOVUPS.Z (R11)(AX*1), K1, Z21
	VMOVUPS.Z (R12)(AX*1), K1, Z22
	VMOVUPS.Z (R13)(AX*1), K1, Z23
	FMA4(Z20, Z0, Z1, Z2, Z3)
	FMA4(Z21, Z4, Z5, Z6, Z7)
	FMA4(Z22, Z8, Z9, Z10, Z11)
	FMA4(Z23, Z12, Z13, Z14, Z15)

sum4x4:
	MOVQ out+40(FP), DI
	REDUCE(Z0, Y0, X0, 0)
	REDUCE(Z1, Y1, X1, 16)
	REDUCE(Z2, Y2, X2, 32)
	REDUCE(Z3, Y3, X3, 48)
	REDUCE(Z4, Y4, X4, 4)
	REDUCE(Z5, Y5, X5, 20)
	REDUCE(Z6, Y6, X6, 36)
	REDUCE(Z7, Y7, X7, 52)
	REDUCE(Z8, Y8, X8, 8)
	REDUCE(Z9, Y9, X9, 24)
	REDUCE(Z10, Y10, X10, 40)
	REDUCE(Z11, Y11, X11, 56)
	REDUCE(Z12, Y12, X12, 12)
	REDUCE(Z13, Y13, X13, 28)
	REDUCE(Z14, Y14, X14, 44)
	REDUCE(Z15, Y15, X15, 60)
	VZEROUPPER
	RET

// func tile4x1AVX512(w *float32, ldw int, x *float32, k int, out *[4]float32)
//
// out[r] = w_r · x for rows r < 4 (stride ldw), k columns.
TEXT ·tile4x1AVX512(SB), NOSPLIT, $0-40
	MOVQ w+0(FP), SI
	MOVQ ldw+8(FP), BX
	SHLQ $2, BX
	LEAQ (SI)(BX*1), R8
	LEAQ (R8)(BX*1), R9
	LEAQ (R9)(BX*1), R10
	MOVQ x+16(FP), DI
	MOVQ k+24(FP), CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	XORQ AX, AX
	MOVQ CX, BX
	SHRQ $4, BX
	JZ tail4x1

loop4x1:
	VMOVUPS (SI)(AX*1), Z16
	VMOVUPS (R8)(AX*1), Z17
	VMOVUPS (R9)(AX*1), Z18
	VMOVUPS (R10)(AX*1), Z19
	VMOVUPS (DI)(AX*1), Z20
	FMA4(Z20, Z0, Z1, Z2, Z3)
	ADDQ $64, AX
	DECQ BX
	JNZ loop4x1

tail4x1:
	ANDQ $15, CX
	JZ sum4x1
	MOVL $1, DX
	SHLL CX, DX
	DECL DX
	KMOVW DX, K1
	VMOVUPS.Z (SI)(AX*1), K1, Z16
	VMOVUPS.Z (R8)(AX*1), K1, Z17
	VMOVUPS.Z (R9)(AX*1), K1, Z18
	VMOVUPS.Z (R10)(AX*1), K1, Z19
	VMOVUPS.Z (DI)(AX*1), K1, Z20
	FMA4(Z20, Z0, Z1, Z2, Z3)

sum4x1:
	MOVQ out+32(FP), DI
	REDUCE(Z0, Y0, X0, 0)
	REDUCE(Z1, Y1, X1, 4)
	REDUCE(Z2, Y2, X2, 8)
	REDUCE(Z3, Y3, X3, 12)
	VZEROUPPER
	RET

// nibbles[i] = float32(i - 8): a 4-bit code's value, looked up by
// VPERMPS, which reads only the low 4 bits of each index.
DATA nibbles<>+0(SB)/4, $-8.0
DATA nibbles<>+4(SB)/4, $-7.0
DATA nibbles<>+8(SB)/4, $-6.0
DATA nibbles<>+12(SB)/4, $-5.0
DATA nibbles<>+16(SB)/4, $-4.0
DATA nibbles<>+20(SB)/4, $-3.0
DATA nibbles<>+24(SB)/4, $-2.0
DATA nibbles<>+28(SB)/4, $-1.0
DATA nibbles<>+32(SB)/4, $0.0
DATA nibbles<>+36(SB)/4, $1.0
DATA nibbles<>+40(SB)/4, $2.0
DATA nibbles<>+44(SB)/4, $3.0
DATA nibbles<>+48(SB)/4, $4.0
DATA nibbles<>+52(SB)/4, $5.0
DATA nibbles<>+56(SB)/4, $6.0
DATA nibbles<>+60(SB)/4, $7.0
GLOBL nibbles<>(SB), RODATA|NOPTR, $64

// interleave<> holds two VPERMI2PS index vectors that merge the even
// columns (first table) and the odd ones (second table) of 32: columns
// 0..15, then 16..31.
DATA interleave<>+0(SB)/4, $0
DATA interleave<>+4(SB)/4, $16
DATA interleave<>+8(SB)/4, $1
DATA interleave<>+12(SB)/4, $17
DATA interleave<>+16(SB)/4, $2
DATA interleave<>+20(SB)/4, $18
DATA interleave<>+24(SB)/4, $3
DATA interleave<>+28(SB)/4, $19
DATA interleave<>+32(SB)/4, $4
DATA interleave<>+36(SB)/4, $20
DATA interleave<>+40(SB)/4, $5
DATA interleave<>+44(SB)/4, $21
DATA interleave<>+48(SB)/4, $6
DATA interleave<>+52(SB)/4, $22
DATA interleave<>+56(SB)/4, $7
DATA interleave<>+60(SB)/4, $23
DATA interleave<>+64(SB)/4, $8
DATA interleave<>+68(SB)/4, $24
DATA interleave<>+72(SB)/4, $9
DATA interleave<>+76(SB)/4, $25
DATA interleave<>+80(SB)/4, $10
DATA interleave<>+84(SB)/4, $26
DATA interleave<>+88(SB)/4, $11
DATA interleave<>+92(SB)/4, $27
DATA interleave<>+96(SB)/4, $12
DATA interleave<>+100(SB)/4, $28
DATA interleave<>+104(SB)/4, $13
DATA interleave<>+108(SB)/4, $29
DATA interleave<>+112(SB)/4, $14
DATA interleave<>+116(SB)/4, $30
DATA interleave<>+120(SB)/4, $15
DATA interleave<>+124(SB)/4, $31
GLOBL interleave<>(SB), RODATA|NOPTR, $128

// SCALE(p): Z4 = the f16 at p widened to float32 in every lane.
#define SCALE(p) \
	VPBROADCASTW p, Y4 \
	VCVTPH2PS Y4, Z4

// func decodeQ4AVX512(codes, scales *byte, groups int, dst *float32)
//
// quant's q4 rows: per group 16 code bytes (column 2i in byte i's low
// nibble, 2i+1 in its high one, value nibble − 8) and an f16 scale;
// dst[32g+j] = float32(q) * scale, 32 values per group.
TEXT ·decodeQ4AVX512(SB), NOSPLIT, $0-32
	MOVQ codes+0(FP), SI
	MOVQ scales+8(FP), DX
	MOVQ groups+16(FP), CX
	MOVQ dst+24(FP), DI
	VMOVUPS nibbles<>(SB), Z31
	VMOVDQU32 interleave<>(SB), Z30
	VMOVDQU32 interleave<>+64(SB), Z29
	TESTQ CX, CX
	JZ doneQ4

loopQ4:
	VPMOVZXBD (SI), Z0
	VPSRLD $4, Z0, Z1
	VPERMPS Z31, Z0, Z2
	VPERMPS Z31, Z1, Z3
	SCALE((DX))
	VMULPS Z4, Z2, Z2
	VMULPS Z4, Z3, Z3
	VMOVAPS Z30, Z5
	VPERMI2PS Z3, Z2, Z5
	VMOVAPS Z29, Z6
	VPERMI2PS Z3, Z2, Z6
	VMOVUPS Z5, (DI)
	VMOVUPS Z6, 64(DI)
	ADDQ $16, SI
	ADDQ $2, DX
	ADDQ $128, DI
	DECQ CX
	JNZ loopQ4

doneQ4:
	VZEROUPPER
	RET

// func decodeQ8AVX512(codes, scales *byte, groups int, dst *float32)
//
// quant's q8 rows: per group 32 code bytes (column j in byte j, two's
// complement) and an f16 scale; dst[32g+j] = float32(q) * scale.
TEXT ·decodeQ8AVX512(SB), NOSPLIT, $0-32
	MOVQ codes+0(FP), SI
	MOVQ scales+8(FP), DX
	MOVQ groups+16(FP), CX
	MOVQ dst+24(FP), DI
	TESTQ CX, CX
	JZ doneQ8

loopQ8:
	VPMOVSXBD (SI), Z0
	VPMOVSXBD 16(SI), Z1
	VCVTDQ2PS Z0, Z0
	VCVTDQ2PS Z1, Z1
	SCALE((DX))
	VMULPS Z4, Z0, Z0
	VMULPS Z4, Z1, Z1
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	ADDQ $32, SI
	ADDQ $2, DX
	ADDQ $128, DI
	DECQ CX
	JNZ loopQ8

doneQ8:
	VZEROUPPER
	RET

// func decodeQ4_0AVX512(blocks *byte, n int, dst *float32)
//
// ggml's Q4_0: blocks of 18 bytes, an f16 d then 16 bytes holding column
// j in byte j's low nibble and column j+16 in its high one;
// dst[32b+j] = float32(nibble − 8) * d.
TEXT ·decodeQ4_0AVX512(SB), NOSPLIT, $0-24
	MOVQ blocks+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ dst+16(FP), DI
	VMOVUPS nibbles<>(SB), Z31
	TESTQ CX, CX
	JZ doneQ4_0

loopQ4_0:
	VPMOVZXBD 2(SI), Z0
	VPSRLD $4, Z0, Z1
	VPERMPS Z31, Z0, Z2
	VPERMPS Z31, Z1, Z3
	SCALE((SI))
	VMULPS Z4, Z2, Z2
	VMULPS Z4, Z3, Z3
	VMOVUPS Z2, (DI)
	VMOVUPS Z3, 64(DI)
	ADDQ $18, SI
	ADDQ $128, DI
	DECQ CX
	JNZ loopQ4_0

doneQ4_0:
	VZEROUPPER
	RET

// func decodeQ8_0AVX512(blocks *byte, n int, dst *float32)
//
// ggml's Q8_0: blocks of 34 bytes, an f16 d then 32 int8 codes;
// dst[32b+j] = float32(q) * d.
TEXT ·decodeQ8_0AVX512(SB), NOSPLIT, $0-24
	MOVQ blocks+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ dst+16(FP), DI
	TESTQ CX, CX
	JZ doneQ8_0

loopQ8_0:
	VPMOVSXBD 2(SI), Z0
	VPMOVSXBD 18(SI), Z1
	VCVTDQ2PS Z0, Z0
	VCVTDQ2PS Z1, Z1
	SCALE((SI))
	VMULPS Z4, Z0, Z0
	VMULPS Z4, Z1, Z1
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	ADDQ $34, SI
	ADDQ $128, DI
	DECQ CX
	JNZ loopQ8_0

doneQ8_0:
	VZEROUPPER
	RET

// func decodeBF16AVX512(src *byte, chunks int, dst *float32)
//
// chunks of 16 bf16 values, each the high half of a float32.
TEXT ·decodeBF16AVX512(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ chunks+8(FP), CX
	MOVQ dst+16(FP), DI
	TESTQ CX, CX
	JZ doneBF16

loopBF16:
	VPMOVZXWD (SI), Z0
	VPSLLD $16, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ loopBF16

doneBF16:
	VZEROUPPER
	RET

// func decodeF16AVX512(src *byte, chunks int, dst *float32)
//
// chunks of 16 f16 values widened exactly (VCVTPH2PS: subnormals
// kept, a NaN made quiet, as ggml's GGML_FP16_TO_FP32).
TEXT ·decodeF16AVX512(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ chunks+8(FP), CX
	MOVQ dst+16(FP), DI
	TESTQ CX, CX
	JZ doneF16

loopF16:
	VCVTPH2PS (SI), Z0
	VMOVUPS Z0, (DI)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ loopF16

doneF16:
	VZEROUPPER
	RET
