#include "textflag.h"

// AVX-512 kernels: kernel.go says the order they compute in, and
// kernel_amd64.go how they are called. A 16-lane accumulator is one Z
// register, lane i of the chunk at column j0 holding column j0+i.

// MULADD4(x, a, b, c, d): the four rows Z16..Z19 times token x added
// into a..d, each product rounded before its sum (kernel.go's order: a
// multiply and an add, not fused); Z24..Z27 hold the products.
#define MULADD4(x, a, b, c, d) \
	VMULPS x, Z16, Z24 \
	VMULPS x, Z17, Z25 \
	VMULPS x, Z18, Z26 \
	VMULPS x, Z19, Z27 \
	VADDPS Z24, a, a \
	VADDPS Z25, b, b \
	VADDPS Z26, c, c \
	VADDPS Z27, d, d

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

// ROWS4: SI, R8, R9, R10 = four rows from w (stride ldw bytes), DX, R11,
// R12, R13 = their scales from s (stride lds bytes), BX = the first byte
// of the next four rows (the rows are consecutive), CX = n, DI = x, the
// accumulators Z0..Z3 zero, AX = 0.
#define ROWS4 \
	MOVQ s+16(FP), DX \
	MOVQ lds+24(FP), BX \
	LEAQ (DX)(BX*1), R11 \
	LEAQ (R11)(BX*1), R12 \
	LEAQ (R12)(BX*1), R13 \
	MOVQ w+0(FP), SI \
	MOVQ ldw+8(FP), BX \
	LEAQ (SI)(BX*1), R8 \
	LEAQ (R8)(BX*1), R9 \
	LEAQ (R9)(BX*1), R10 \
	LEAQ (R10)(BX*1), BX \
	MOVQ n+32(FP), CX \
	MOVQ x+40(FP), DI \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3 \
	XORQ AX, AX

// SUM4: out[r] = the tree sums of Z0..Z3.
#define SUM4 \
	MOVQ out+48(FP), DI \
	REDUCE(Z0, Y0, X0, 0) \
	REDUCE(Z1, Y1, X1, 4) \
	REDUCE(Z2, Y2, X2, 8) \
	REDUCE(Z3, Y3, X3, 12) \
	VZEROUPPER

// A8ROWS4 and A8SUM begin and end the a8 kernels (a8Q4AVX512 and the
// others, further down; defined here, before any TEXT, for go vet): the
// pointers loaded and the lanes zeroed; the rows' tree sums stored.
#define A8ROWS4 \
	MOVQ codes+0(FP), SI \
	MOVQ ldc+8(FP), BX \
	LEAQ (SI)(BX*1), R8 \
	LEAQ (R8)(BX*1), R9 \
	LEAQ (R9)(BX*1), R10 \
	MOVQ scales+16(FP), DX \
	MOVQ lds+24(FP), BX \
	LEAQ (DX)(BX*1), R11 \
	LEAQ (R11)(BX*1), R12 \
	LEAQ (R12)(BX*1), R13 \
	MOVQ chunks+32(FP), CX \
	MOVQ acts+40(FP), DI \
	MOVQ sums+48(FP), R14 \
	MOVQ dx+56(FP), AX \
	MOVQ masks+64(FP), BX \
	VMOVDQU32 transposed<>(SB), Z29 \
	VPXORD Z0, Z0, Z0 \
	VPXORD Z1, Z1, Z1 \
	VPXORD Z2, Z2, Z2 \
	VPXORD Z3, Z3, Z3

// A8PREFETCH(lines) prefetches the rows ahead of these four, which
// follow them in memory, in step with the kernel's walk of these: 4n
// bytes per chunk of n code bytes a row (lines(op): op, PREFETCHT0 or
// PREFETCHT1, on the A8LINES* covering 4n bytes from BX). Into L1 the
// next four rows' share of this chunk, at SI0 + 4·ldc + 4·(SI − SI0);
// into L2 the share of the four rows 20 further on, at 24·ldc: more of
// the stream in flight than L1 holds requests for. A decode step, whose
// weights come from memory, ran at two thirds of the speed without the
// first (the float kernels prefetch the same way), and a whole
// Qwen2.5-0.5B q4+a8 step 6% faster with the second (median of ten
// adjacent pairs of runs, every pair faster, by 0–16%). BX, free
// between chunks, points there, then at the masks again for A8LAST.
#define A8PREFETCH(lines) \
	IMUL3Q $4, ldc+8(FP), BX \
	A8AHEAD \
	lines(PREFETCHT0) \
	IMUL3Q $24, ldc+8(FP), BX \
	A8AHEAD \
	lines(PREFETCHT1) \
	MOVQ masks+64(FP), BX

// A8AHEAD adds SI0 + 4·(SI − SI0) to BX.
#define A8AHEAD \
	LEAQ (BX)(SI*4), BX \
	SUBQ codes+0(FP), BX \
	SUBQ codes+0(FP), BX \
	SUBQ codes+0(FP), BX

// A8SCALESPREFETCH prefetches, for quant's kernels, the next four rows'
// scales of this chunk (R13 + i·lds: row 4 + i's). They lie apart from
// the codes, in a stream of their own that the hardware prefetchers left
// to demand misses: from memory on two cores, q4 4864x896 read 26 -> 30
// GB/s with it, q8 34 -> 38.
#define A8SCALESPREFETCH \
	MOVQ lds+24(FP), BX \
	PREFETCHT0 (R13)(BX*1) \
	PREFETCHT0 (R13)(BX*2) \
	PREFETCHT0 (R13)(BX*4) \
	LEAQ (BX)(BX*2), BX \
	PREFETCHT0 (R13)(BX*1) \
	MOVQ masks+64(FP), BX

// PF2(op, off) and PF16(op, off): op on the 2 or 16 lines from
// off(BX); A8LINES*(op) on a four-row chunk's of each format.
#define PF2(op, off) \
	op off(BX) \
	op off+64(BX)

#define PF16(op, off) \
	PF2(op, off) \
	PF2(op, off+128) \
	PF2(op, off+256) \
	PF2(op, off+384) \
	PF2(op, off+512) \
	PF2(op, off+640) \
	PF2(op, off+768) \
	PF2(op, off+896)

#define A8LINESQ4(op) PF16(op, 0)
#define A8LINESQ8(op) PF16(op, 0) PF16(op, 1024)
#define A8LINESQ4_0(op) PF16(op, 0) PF2(op, 1024)
#define A8LINESQ8_0(op) PF16(op, 0) PF16(op, 1024) PF2(op, 2048)

#define A8SUM \
	MOVQ out+72(FP), DI \
	REDUCE(Z0, Y0, X0, 0) \
	REDUCE(Z1, Y1, X1, 4) \
	REDUCE(Z2, Y2, X2, 8) \
	REDUCE(Z3, Y3, X3, 12) \
	VZEROUPPER

// LOAD16 and STORE16 move Z(4t+r) from and to row r, token t's lanes at
// (DX): acc[4r+t].
#define LOAD16 \
	VMOVUPS 0(DX), Z0 \
	VMOVUPS 256(DX), Z1 \
	VMOVUPS 512(DX), Z2 \
	VMOVUPS 768(DX), Z3 \
	VMOVUPS 64(DX), Z4 \
	VMOVUPS 320(DX), Z5 \
	VMOVUPS 576(DX), Z6 \
	VMOVUPS 832(DX), Z7 \
	VMOVUPS 128(DX), Z8 \
	VMOVUPS 384(DX), Z9 \
	VMOVUPS 640(DX), Z10 \
	VMOVUPS 896(DX), Z11 \
	VMOVUPS 192(DX), Z12 \
	VMOVUPS 448(DX), Z13 \
	VMOVUPS 704(DX), Z14 \
	VMOVUPS 960(DX), Z15

#define STORE16 \
	VMOVUPS Z0, 0(DX) \
	VMOVUPS Z1, 256(DX) \
	VMOVUPS Z2, 512(DX) \
	VMOVUPS Z3, 768(DX) \
	VMOVUPS Z4, 64(DX) \
	VMOVUPS Z5, 320(DX) \
	VMOVUPS Z6, 576(DX) \
	VMOVUPS Z7, 832(DX) \
	VMOVUPS Z8, 128(DX) \
	VMOVUPS Z9, 384(DX) \
	VMOVUPS Z10, 640(DX) \
	VMOVUPS Z11, 896(DX) \
	VMOVUPS Z12, 192(DX) \
	VMOVUPS Z13, 448(DX) \
	VMOVUPS Z14, 704(DX) \
	VMOVUPS Z15, 960(DX)

// func tile4x4AVX512(w *float32, ldw int, x *float32, ldx, k int, acc *[16][16]float32, out *[16]float32, flags int)
//
// The lanes of w_r · x_t for rows r < 4 (stride ldw) and tokens t < 4
// (stride ldx) carried over k more columns in Z(4t+r): from zero (flags
// bit 0) or acc[4r+t], then summed into out[4r+t] (flags bit 1) or kept
// in acc[4r+t].
TEXT ·tile4x4AVX512(SB), NOSPLIT, $0-64
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
	MOVQ acc+40(FP), DX
	TESTQ $1, flags+56(FP)
	JZ carried
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
	JMP start4x4

carried:
	LOAD16

start4x4:
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
	MULADD4(Z20, Z0, Z1, Z2, Z3)
	MULADD4(Z21, Z4, Z5, Z6, Z7)
	MULADD4(Z22, Z8, Z9, Z10, Z11)
	MULADD4(Z23, Z12, Z13, Z14, Z15)
	ADDQ $64, AX
	DECQ BX
	JNZ loop4x4

tail4x4:
	// The last k mod 16 columns, the rest of the chunk read as zeros.
	ANDQ $15, CX
	JZ end4x4
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
	MULADD4(Z20, Z0, Z1, Z2, Z3)
	MULADD4(Z21, Z4, Z5, Z6, Z7)
	MULADD4(Z22, Z8, Z9, Z10, Z11)
	MULADD4(Z23, Z12, Z13, Z14, Z15)

end4x4:
	TESTQ $2, flags+56(FP)
	JNZ sum4x4
	MOVQ acc+40(FP), DX
	STORE16
	VZEROUPPER
	RET

sum4x4:
	MOVQ out+48(FP), DI
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
	PREFETCHT0 2048(SI)(AX*1)
	PREFETCHT0 2048(R8)(AX*1)
	PREFETCHT0 2048(R9)(AX*1)
	PREFETCHT0 2048(R10)(AX*1)
	VMOVUPS (SI)(AX*1), Z16
	VMOVUPS (R8)(AX*1), Z17
	VMOVUPS (R9)(AX*1), Z18
	VMOVUPS (R10)(AX*1), Z19
	VMOVUPS (DI)(AX*1), Z20
	MULADD4(Z20, Z0, Z1, Z2, Z3)
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
	MULADD4(Z20, Z0, Z1, Z2, Z3)

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
	PREFETCHT0 512(SI)
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

// LOOKUPGROUP: Z4 = the group's scale at DX and Z7 its offset at R9 in
// every lane; DX and R9 advance to the next group's.
#define LOOKUPGROUP \
	VBROADCASTSS (DX), Z4 \
	VBROADCASTSS (R9), Z7 \
	ADDQ $4, DX \
	ADDQ $4, R9

// LOOKUPTABLE(t): t = the 16 values of Z28 (a 4-bit table) times the
// group's scale plus its offset (LOOKUPGROUP), each rounded as Go's
// float32(v*s) + o (a multiply, then an add: no fused multiply-add).
#define LOOKUPTABLE(t) \
	LOOKUPGROUP \
	VMULPS Z4, Z28, t \
	VADDPS Z7, t, t

// func decodeLookup4AVX512(codes *byte, table, scales, offsets *float32, n, per int, dst *float32)
//
// A 4-bit lookup row (package lookup): n runs of 32 columns, 16 code
// bytes each (column 2i in byte i's low nibble, 2i+1 in its high one),
// per runs to a group with its scale and offset; dst[c] =
// float32(table[q]·scale) + offset, q column c's code. Each group's 16
// values are computed once, then looked up: VPERMPS reads an index's low
// 4 bits only, so a code byte needs no mask for its low nibble.
TEXT ·decodeLookup4AVX512(SB), NOSPLIT, $0-56
	MOVQ codes+0(FP), SI
	MOVQ table+8(FP), AX
	MOVQ scales+16(FP), DX
	MOVQ offsets+24(FP), R9
	MOVQ n+32(FP), CX
	MOVQ per+40(FP), BX
	MOVQ dst+48(FP), DI
	TESTQ CX, CX
	JZ doneL4
	VMOVDQU32 interleave<>(SB), Z30
	VMOVDQU32 interleave<>+64(SB), Z29
	VMOVUPS (AX), Z28

groupL4:
	LOOKUPTABLE(Z31)
	MOVQ BX, R8

loopL4:
	PREFETCHT0 512(SI)
	VPMOVZXBD (SI), Z0
	VPSRLD $4, Z0, Z1
	VPERMPS Z31, Z0, Z2
	VPERMPS Z31, Z1, Z3
	VMOVAPS Z30, Z5
	VPERMI2PS Z3, Z2, Z5
	VMOVAPS Z29, Z6
	VPERMI2PS Z3, Z2, Z6
	VMOVUPS Z5, (DI)
	VMOVUPS Z6, 64(DI)
	ADDQ $16, SI
	ADDQ $128, DI
	DECQ CX
	JZ doneL4
	DECQ R8
	JNZ loopL4
	JMP groupL4           // the next group's scale and offset, read only when a run follows

doneL4:
	VZEROUPPER
	RET

// func decodeLookup8AVX512(codes *byte, table, scales, offsets *float32, n, per int, dst *float32)
//
// An 8-bit lookup row: n runs of 16 columns, a code byte each, per runs
// to a group with its scale and offset; dst[c] = float32(table[q]·scale)
// + offset, table[q] gathered (256 values), rounded as decodeLookup4's.
TEXT ·decodeLookup8AVX512(SB), NOSPLIT, $0-56
	MOVQ codes+0(FP), SI
	MOVQ table+8(FP), AX
	MOVQ scales+16(FP), DX
	MOVQ offsets+24(FP), R9
	MOVQ n+32(FP), CX
	MOVQ per+40(FP), BX
	MOVQ dst+48(FP), DI
	TESTQ CX, CX
	JZ doneL8

groupL8:
	LOOKUPGROUP
	MOVQ BX, R8

loopL8:
	PREFETCHT0 512(SI)
	VPMOVZXBD (SI), Z0
	KXNORW K0, K0, K1
	VGATHERDPS (AX)(Z0*4), K1, Z2
	VMULPS Z4, Z2, Z2
	VADDPS Z7, Z2, Z2
	VMOVUPS Z2, (DI)
	ADDQ $16, SI
	ADDQ $64, DI
	DECQ CX
	JZ doneL8
	DECQ R8
	JNZ loopL8
	JMP groupL8

doneL8:
	VZEROUPPER
	RET

// func decodeLookup8AffineAVX512(codes *byte, base int32, scales, offsets *float32, n, per int, dst *float32)
//
// An 8-bit lookup row whose table is table[q] = base + q, every value an
// integer (GPTQ's, MLX's and compressed-tensors' int8 grids): as
// decodeLookup8AVX512, the value converted from base + q instead of
// gathered, which is the same float32.
TEXT ·decodeLookup8AffineAVX512(SB), NOSPLIT, $0-56
	MOVQ codes+0(FP), SI
	MOVL base+8(FP), AX
	VPBROADCASTD AX, Z8
	MOVQ scales+16(FP), DX
	MOVQ offsets+24(FP), R9
	MOVQ n+32(FP), CX
	MOVQ per+40(FP), BX
	MOVQ dst+48(FP), DI
	TESTQ CX, CX
	JZ doneA8

groupA8:
	LOOKUPGROUP
	MOVQ BX, R8

loopA8:
	PREFETCHT0 512(SI)
	VPMOVZXBD (SI), Z0
	VPADDD Z8, Z0, Z0
	VCVTDQ2PS Z0, Z2
	VMULPS Z4, Z2, Z2
	VADDPS Z7, Z2, Z2
	VMOVUPS Z2, (DI)
	ADDQ $16, SI
	ADDQ $64, DI
	DECQ CX
	JZ doneA8
	DECQ R8
	JNZ loopA8
	JMP groupA8

doneA8:
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
	PREFETCHT0 1024(SI)
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
	PREFETCHT0 512(SI)
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
	PREFETCHT0 1024(SI)
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
	PREFETCHT0 1024(SI)
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
	PREFETCHT0 1024(SI)
	VCVTPH2PS (SI), Z0
	VMOVUPS Z0, (DI)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ loopF16

doneF16:
	VZEROUPPER
	RET

// The fused kernels of a decode step (one token): four rows of a stored
// format decoded group by group in registers and multiplied with x at
// once, in the order of kernel.go (the tiles' order: accumulator r gets
// columns 16c..16c+15 of row r in chunk order), without the scratch that
// prefill decodes into. Each takes the rows' bases and byte strides and
// writes out[r] = w_r · x. Rows of whole groups only: k is a multiple of
// 32 (16 for bf16). While they compute, they prefetch the next four rows
// (consecutive in memory) into L1, as many bytes per group as the four
// rows take: the hardware prefetchers alone leave a core waiting on a
// decode step's weights, which come from memory.

// Q4GROUP(codes, scale, acc): the group of 16 code bytes at codes and
// its float32 scale at scale, times x's Z20 (columns 0..15) and Z21
// (16..31) into acc. VPERMB puts code byte i/2 (8 + i/2 for the second
// chunk) in dword i, VPSRLVD brings nibble i down (shifts Z28), and
// VPERMPS looks it up in the group's table of (nibble − 8) · scale (the
// nibbles Z31 times the scale, exact: the product has at most 15
// significant bits), which reads only the low 4 bits. Z30 and Z29: the
// VPERMB indices.
#define Q4GROUP(codes, scale, acc) \
	VMOVDQU codes, X10 \
	VMULPS.BCST scale, Z31, Z9 \
	VPERMB Z10, Z30, Z5 \
	VPERMB Z10, Z29, Z6 \
	VPSRLVD Z28, Z5, Z5 \
	VPSRLVD Z28, Z6, Z6 \
	VPERMPS Z9, Z5, Z5 \
	VPERMPS Z9, Z6, Z6 \
	VMULPS Z20, Z5, Z5 \
	VMULPS Z21, Z6, Z6 \
	VADDPS Z5, acc, acc \
	VADDPS Z6, acc, acc

// func dot4Q4AVX512(w *byte, ldw int, s *float32, lds int, n int, x *float32, out *[4]float32)
//
// quant's q4: n code bytes per row (16 a group), the groups' scales as
// float32 at s (stride lds bytes). AX runs over the codes, x at 8·AX; the
// scale pointers advance.
TEXT ·dot4Q4AVX512(SB), NOSPLIT, $0-56
	ROWS4
	VMOVUPS nibbles<>(SB), Z31
	VMOVDQU64 spread<>(SB), Z30
	VMOVDQU64 spread<>+64(SB), Z29
	VMOVDQU64 shifts<>(SB), Z28
	MOVQ DX, CX // the scales advance by pointer: CX, R11..R13

loopDotQ4:
	PREFETCHT0 (BX)
	VMOVUPS (DI)(AX*8), Z20
	VMOVUPS 64(DI)(AX*8), Z21
	Q4GROUP((SI)(AX*1), (CX), Z0)
	Q4GROUP((R8)(AX*1), (R11), Z1)
	Q4GROUP((R9)(AX*1), (R12), Z2)
	Q4GROUP((R10)(AX*1), (R13), Z3)
	ADDQ $16, AX
	ADDQ $4, CX
	ADDQ $4, R11
	ADDQ $4, R12
	ADDQ $4, R13
	ADDQ $64, BX
	CMPQ AX, n+32(FP)
	JLT loopDotQ4
	SUM4
	RET

// spread<> holds VPERMB's indices for Q4GROUP: byte 4i is i/2, then
// 8 + i/2; shifts<> alternates 0 and 4.
DATA spread<>+0(SB)/8, $0x0000000000000000
DATA spread<>+8(SB)/8, $0x0000000100000001
DATA spread<>+16(SB)/8, $0x0000000200000002
DATA spread<>+24(SB)/8, $0x0000000300000003
DATA spread<>+32(SB)/8, $0x0000000400000004
DATA spread<>+40(SB)/8, $0x0000000500000005
DATA spread<>+48(SB)/8, $0x0000000600000006
DATA spread<>+56(SB)/8, $0x0000000700000007
DATA spread<>+64(SB)/8, $0x0000000800000008
DATA spread<>+72(SB)/8, $0x0000000900000009
DATA spread<>+80(SB)/8, $0x0000000a0000000a
DATA spread<>+88(SB)/8, $0x0000000b0000000b
DATA spread<>+96(SB)/8, $0x0000000c0000000c
DATA spread<>+104(SB)/8, $0x0000000d0000000d
DATA spread<>+112(SB)/8, $0x0000000e0000000e
DATA spread<>+120(SB)/8, $0x0000000f0000000f
GLOBL spread<>(SB), RODATA|NOPTR, $128
DATA shifts<>+0(SB)/8, $0x0000000400000000
DATA shifts<>+8(SB)/8, $0x0000000400000000
DATA shifts<>+16(SB)/8, $0x0000000400000000
DATA shifts<>+24(SB)/8, $0x0000000400000000
DATA shifts<>+32(SB)/8, $0x0000000400000000
DATA shifts<>+40(SB)/8, $0x0000000400000000
DATA shifts<>+48(SB)/8, $0x0000000400000000
DATA shifts<>+56(SB)/8, $0x0000000400000000
GLOBL shifts<>(SB), RODATA|NOPTR, $64

// Q8GROUP(lo, hi, scale, acc): the 32 int8 codes at lo and hi (16 each)
// times their float32 scale at scale, as Q4GROUP.
#define Q8GROUP(lo, hi, scale, acc) \
	VPMOVSXBD lo, Z5 \
	VPMOVSXBD hi, Z6 \
	VCVTDQ2PS Z5, Z5 \
	VCVTDQ2PS Z6, Z6 \
	VMULPS.BCST scale, Z5, Z5 \
	VMULPS.BCST scale, Z6, Z6 \
	VMULPS Z20, Z5, Z5 \
	VMULPS Z21, Z6, Z6 \
	VADDPS Z5, acc, acc \
	VADDPS Z6, acc, acc

// func dot4Q8AVX512(w *byte, ldw int, s *float32, lds int, n int, x *float32, out *[4]float32)
//
// quant's q8: n code bytes per row (32 a group), the scales as dot4Q4's.
TEXT ·dot4Q8AVX512(SB), NOSPLIT, $0-56
	ROWS4
	MOVQ DX, CX

loopDotQ8:
	PREFETCHT0 (BX)
	PREFETCHT0 64(BX)
	VMOVUPS (DI)(AX*4), Z20
	VMOVUPS 64(DI)(AX*4), Z21
	Q8GROUP((SI)(AX*1), 16(SI)(AX*1), (CX), Z0)
	Q8GROUP((R8)(AX*1), 16(R8)(AX*1), (R11), Z1)
	Q8GROUP((R9)(AX*1), 16(R9)(AX*1), (R12), Z2)
	Q8GROUP((R10)(AX*1), 16(R10)(AX*1), (R13), Z3)
	ADDQ $32, AX
	ADDQ $4, CX
	ADDQ $4, R11
	ADDQ $4, R12
	ADDQ $4, R13
	ADDQ $128, BX
	CMPQ AX, n+32(FP)
	JLT loopDotQ8
	SUM4
	RET

// Q8_0GROUP(lo, hi, scale, acc): as Q8GROUP with an f16 scale.
#define Q8_0GROUP(lo, hi, scale, acc) \
	VPMOVSXBD lo, Z5 \
	VPMOVSXBD hi, Z6 \
	VCVTDQ2PS Z5, Z5 \
	VCVTDQ2PS Z6, Z6 \
	SCALE(scale) \
	VMULPS Z4, Z5, Z5 \
	VMULPS Z4, Z6, Z6 \
	VMULPS Z20, Z5, Z5 \
	VMULPS Z21, Z6, Z6 \
	VADDPS Z5, acc, acc \
	VADDPS Z6, acc, acc

// Q4_0BLOCK(p, q, acc): the Q4_0 block with its f16 d at p and its 16
// bytes at q (column j in the low nibble of byte j, j+16 in its high
// one), times x's Z20 and Z21 into acc, its values looked up in the
// nibbles Z31 times d as Q4GROUP's.
#define Q4_0BLOCK(p, q, acc) \
	VPMOVZXBD q, Z5 \
	VPSRLD $4, Z5, Z6 \
	SCALE(p) \
	VMULPS Z4, Z31, Z9 \
	VPERMPS Z9, Z5, Z5 \
	VPERMPS Z9, Z6, Z6 \
	VMULPS Z20, Z5, Z5 \
	VMULPS Z21, Z6, Z6 \
	VADDPS Z5, acc, acc \
	VADDPS Z6, acc, acc

// func dot4Q4_0AVX512(w *byte, ldw int, s *byte, lds int, n int, x *float32, out *[4]float32)
//
// ggml's Q4_0: n blocks of 18 bytes per row; s and lds are unused.
TEXT ·dot4Q4_0AVX512(SB), NOSPLIT, $0-56
	ROWS4
	VMOVUPS nibbles<>(SB), Z31

loopDotQ4_0:
	PREFETCHT0 (BX)
	PREFETCHT0 64(BX)
	VMOVUPS (DI), Z20
	VMOVUPS 64(DI), Z21
	Q4_0BLOCK((SI)(AX*1), 2(SI)(AX*1), Z0)
	Q4_0BLOCK((R8)(AX*1), 2(R8)(AX*1), Z1)
	Q4_0BLOCK((R9)(AX*1), 2(R9)(AX*1), Z2)
	Q4_0BLOCK((R10)(AX*1), 2(R10)(AX*1), Z3)
	ADDQ $18, AX
	ADDQ $128, DI
	ADDQ $72, BX
	DECQ CX
	JNZ loopDotQ4_0
	SUM4
	RET

// func dot4Q8_0AVX512(w *byte, ldw int, s *byte, lds int, n int, x *float32, out *[4]float32)
//
// ggml's Q8_0: n blocks of 34 bytes per row; s and lds are unused.
TEXT ·dot4Q8_0AVX512(SB), NOSPLIT, $0-56
	ROWS4

loopDotQ8_0:
	PREFETCHT0 (BX)
	PREFETCHT0 64(BX)
	PREFETCHT0 128(BX)
	VMOVUPS (DI), Z20
	VMOVUPS 64(DI), Z21
	Q8_0GROUP(2(SI)(AX*1), 18(SI)(AX*1), (SI)(AX*1), Z0)
	Q8_0GROUP(2(R8)(AX*1), 18(R8)(AX*1), (R8)(AX*1), Z1)
	Q8_0GROUP(2(R9)(AX*1), 18(R9)(AX*1), (R9)(AX*1), Z2)
	Q8_0GROUP(2(R10)(AX*1), 18(R10)(AX*1), (R10)(AX*1), Z3)
	ADDQ $34, AX
	ADDQ $128, DI
	ADDQ $136, BX
	DECQ CX
	JNZ loopDotQ8_0
	SUM4
	RET

// BF16CHUNK(p, acc): 16 bf16 values at p times x's Z20 into acc.
#define BF16CHUNK(p, acc) \
	VPMOVZXWD p, Z5 \
	VPSLLD $16, Z5, Z5 \
	VMULPS Z20, Z5, Z5 \
	VADDPS Z5, acc, acc

// func dot4BF16AVX512(w *byte, ldw int, s *byte, lds int, n int, x *float32, out *[4]float32)
//
// n chunks of 16 bf16 values per row; s and lds are unused.
TEXT ·dot4BF16AVX512(SB), NOSPLIT, $0-56
	ROWS4

loopDotBF16:
	PREFETCHT0 (BX)
	PREFETCHT0 64(BX)
	VMOVUPS (DI)(AX*2), Z20
	BF16CHUNK((SI)(AX*1), Z0)
	BF16CHUNK((R8)(AX*1), Z1)
	BF16CHUNK((R9)(AX*1), Z2)
	BF16CHUNK((R10)(AX*1), Z3)
	ADDQ $32, AX
	ADDQ $128, BX
	DECQ CX
	JNZ loopDotBF16
	SUM4
	RET

// func axpyAVX512(out *float32, n int, p *float32, m int, v *float32, ldv int)
//
// out[i] += p[j]·v[j·ldv + i] (rounded product, rounded sum) for j < m
// in order, i < n, 16
// values of out at a time (the last masked).
TEXT ·axpyAVX512(SB), NOSPLIT, $0-48
	MOVQ out+0(FP), DI
	MOVQ n+8(FP), CX
	MOVQ ldv+40(FP), BX
	SHLQ $2, BX
	MOVQ v+32(FP), R10

chunkAxpy:
	MOVL $-1, DX
	CMPQ CX, $16
	JGE fullAxpy
	MOVL $1, DX
	SHLL CX, DX
	DECL DX

fullAxpy:
	KMOVW DX, K1
	VMOVUPS.Z (DI), K1, Z0
	MOVQ p+16(FP), SI
	MOVQ m+24(FP), R8
	MOVQ R10, R9

loopAxpy:
	VBROADCASTSS (SI), Z1
	VMOVUPS.Z (R9), K1, Z2
	VMULPS Z2, Z1, Z2
	VADDPS Z2, Z0, Z0
	ADDQ $4, SI
	ADDQ BX, R9
	DECQ R8
	JNZ loopAxpy
	VMOVUPS Z0, K1, (DI)
	ADDQ $64, DI
	ADDQ $64, R10
	SUBQ $16, CX
	JG chunkAxpy
	VZEROUPPER
	RET

// The kernels of 8-bit activations (a8.go's order): four rows of quant's
// q4 or q8 or ggml's Q4_0 or Q8_0 times one token's rounded activations.
// The integer block sums S_b come from VPDPBUSD (unsigned bytes times
// signed bytes, four products summed into each dword, exact), on unsigned
// weights u: 4-bit codes' nibbles (code + 8) or 8-bit codes + 128 (the
// sign bit flipped), so that S_b = Σ u_j·q_j − c·Σ q_j with c = 8 or 128
// and Σ q_j precomputed per block (a8Acts.sum). Blocks go in chunks of
// 16, the order's lanes: a chunk's S_b end in one Z register, block b in
// dword b, converted, multiplied by t_b = float32(s_b·dx_b) and added to
// the row's lanes (a multiply and an add, not fused). The activations
// (a8Acts) have zeros up to a whole chunk; the codes and scales past a
// row's last block are masked off their loads (they may lie past the
// piece), and the lanes past it off the add.
//
// Registers: SI, R8, R9, R10 the four rows' codes, DX, R11, R12, R13
// their scales (the same pointers for ggml's blocks), DI the
// activations, R14 Σq, AX dx, BX the masks (a8Masks, a8BlockMasks: a
// whole chunk's, then the last one's, the code loads' then at 16(BX) or
// 128(BX) the chunk's blocks, K2), CX the chunks left; Z0..Z3 the rows'
// lanes, Z4..Z19 four partial sums per row (Z4+4r+i: blocks 4i..4i+3 of
// the chunk, one per 128-bit lane, four dwords each), Z28 the weights'
// constant, Z29 transposed<>, Z30 c·Σq of the chunk (for ggml, while
// the chunk loads, VPERMB's indices of its scales, gathered per row in
// Z20..Z23), Z31 ggml's VPERMT2B indices, Z27 the row's t_b, Z24..Z26
// temporaries.

// A8LAST(size) switches BX to the last chunk's masks before it.
#define A8LAST(size) \
	CMPQ CX, $1 \
	JNE 2(PC) \
	ADDQ $size, BX

// A8BLOCKS(b0, b1, b2, b3, acc): the chunk's partial sums b0..b3 of one
// row summed to S_b in b0 (a 4×4 transpose of dwords within each 128-bit
// lane leaves block 4j+l in dword 4l+j; transposed<> puts it back in
// dword 4j+l), times t_b in Z27 into acc: the order's step 3. Z24: a
// temporary.
#define A8BLOCKS(b0, b1, b2, b3, acc) \
	VPUNPCKLDQ b1, b0, Z24 \
	VPUNPCKHDQ b1, b0, b1 \
	VPADDD b1, Z24, b0 \
	VPUNPCKLDQ b3, b2, Z24 \
	VPUNPCKHDQ b3, b2, b3 \
	VPADDD b3, Z24, b2 \
	VPUNPCKLQDQ b2, b0, Z24 \
	VPUNPCKHQDQ b2, b0, b2 \
	VPADDD b2, Z24, b0 \
	VPERMD b0, Z29, b0 \
	VPSUBD Z30, b0, b0 \
	VCVTDQ2PS b0, b0 \
	VMULPS Z27, b0, b0 \
	VADDPS b0, acc, K2, acc

// A8SCALES(p): Z27 = t_b = float32(s_b·dx_b) of a quant row's 16 f16
// scales at p; A8HALVES(y) of a ggml row's, which the loads gathered in
// y.
#define A8SCALES(p) \
	VMOVDQU16.Z (p), K2, Y27 \
	VCVTPH2PS Y27, Z27 \
	VMULPS (AX), Z27, Z27

#define A8HALVES(y) \
	VCVTPH2PS y, Z27 \
	VMULPS (AX), Z27, Z27

// A8CHUNK(m) ends a chunk: the four rows' blocks into their lanes, K2
// the blocks' mask at m(BX).
#define A8CHUNK(m) \
	KMOVW m(BX), K2 \
	A8SCALES(DX) \
	A8BLOCKS(Z4, Z5, Z6, Z7, Z0) \
	A8SCALES(R11) \
	A8BLOCKS(Z8, Z9, Z10, Z11, Z1) \
	A8SCALES(R12) \
	A8BLOCKS(Z12, Z13, Z14, Z15, Z2) \
	A8SCALES(R13) \
	A8BLOCKS(Z16, Z17, Z18, Z19, Z3)

#define A8CHUNKGGML \
	KMOVW 128(BX), K2 \
	A8HALVES(Y20) \
	A8BLOCKS(Z4, Z5, Z6, Z7, Z0) \
	A8HALVES(Y21) \
	A8BLOCKS(Z8, Z9, Z10, Z11, Z1) \
	A8HALVES(Y22) \
	A8BLOCKS(Z12, Z13, Z14, Z15, Z2) \
	A8HALVES(Y23) \
	A8BLOCKS(Z16, Z17, Z18, Z19, Z3)

// A8NEXT moves the pointers to the next chunk (n: code bytes per row, s:
// scale bytes) and loops.
#define A8NEXT(n, s, loop) \
	ADDQ $n, SI \
	ADDQ $n, R8 \
	ADDQ $n, R9 \
	ADDQ $n, R10 \
	ADDQ $s, DX \
	ADDQ $s, R11 \
	ADDQ $s, R12 \
	ADDQ $s, R13 \
	ADDQ $512, DI \
	ADDQ $64, R14 \
	ADDQ $64, AX \
	DECQ CX \
	JNZ loop

// A8NIBBLES(aoff, hoff, b): the 64 code bytes in Z24 (four blocks of 16)
// split into low and high nibbles (Z28 = 0x0f bytes) times the
// activations at aoff(DI) and hoff(DI) into b.
#define A8NIBBLES(aoff, hoff, b) \
	VPSRLD $4, Z24, Z25 \
	VPANDD Z28, Z24, Z24 \
	VPANDD Z28, Z25, Z25 \
	VPXORD b, b, b \
	VPDPBUSD aoff(DI), Z24, b \
	VPDPBUSD hoff(DI), Z25, b

// A8Q4(off, aoff, hoff, row, b): quant q4's 64 code bytes at off(row)
// (blocks 4i..4i+3 of the chunk, masked by K1).
#define A8Q4(off, aoff, hoff, row, b) \
	VMOVDQU32.Z off(row), K1, Z24 \
	A8NIBBLES(aoff, hoff, b)

#define A8Q4LOAD(m, off, aoff, hoff, b0, b1, b2, b3) \
	KMOVW m(BX), K1 \
	A8Q4(off, aoff, hoff, SI, b0) \
	A8Q4(off, aoff, hoff, R8, b1) \
	A8Q4(off, aoff, hoff, R9, b2) \
	A8Q4(off, aoff, hoff, R10, b3)

// func a8Q4AVX512(codes *byte, ldc int, scales *byte, lds int, chunks int, acts *int8, sums *int32, dx *float32, masks *[2][16]uint16, out *[4]float32)
//
// quant's q4: per block 16 code bytes (column 2i in byte i's low nibble,
// 2i+1 in its high one, value nibble − 8), rows ldc bytes apart; c = 8.
// The activations (a8Acts.nib) hold per 4 blocks the even columns, 16
// per block, then the odd ones.
TEXT ·a8Q4AVX512(SB), NOSPLIT, $0-80
	A8ROWS4
	VPBROADCASTB nibbleMask<>(SB), Z28

loopA8Q4:
	A8PREFETCH(A8LINESQ4)
	A8SCALESPREFETCH
	A8LAST(32)
	VPSLLD $3, (R14), Z30
	A8Q4LOAD(0, 0, 0, 64, Z4, Z8, Z12, Z16)
	A8Q4LOAD(2, 64, 128, 192, Z5, Z9, Z13, Z17)
	A8Q4LOAD(4, 128, 256, 320, Z6, Z10, Z14, Z18)
	A8Q4LOAD(6, 192, 384, 448, Z7, Z11, Z15, Z19)
	A8CHUNK(16)
	A8NEXT(256, 32, loopA8Q4)
	A8SUM
	RET

// A8BYTES(aoff, aoff2, b): the unsigned codes of blocks 4i, 4i+1 in Z24
// and 4i+2, 4i+3 in Z25 times the activations at aoff(DI) and aoff2(DI)
// into b: a product's blocks come in dwords 0..7 and 8..15, and
// VSHUFI32X4 gathers the first halves and the second halves of the four
// blocks, one per 128-bit lane.
#define A8BYTES(aoff, aoff2, b) \
	VPXORD Z26, Z26, Z26 \
	VPXORD Z27, Z27, Z27 \
	VPDPBUSD aoff(DI), Z24, Z26 \
	VPDPBUSD aoff2(DI), Z25, Z27 \
	VSHUFI32X4 $0x88, Z27, Z26, Z24 \
	VSHUFI32X4 $0xdd, Z27, Z26, Z25 \
	VPADDD Z25, Z24, b

// A8Q8(off, off2, row, b): quant q8's 128 code bytes at off(row) and
// off2(row) (masked by K1 and K3), the sign bit flipped (Z28 = 0x80
// bytes).
#define A8Q8(off, off2, row, b) \
	VPXORD.Z off(row), Z28, K1, Z24 \
	VPXORD.Z off2(row), Z28, K3, Z25 \
	A8BYTES(off, off2, b)

#define A8Q8LOAD(m, m2, off, off2, b0, b1, b2, b3) \
	KMOVW m(BX), K1 \
	KMOVW m2(BX), K3 \
	A8Q8(off, off2, SI, b0) \
	A8Q8(off, off2, R8, b1) \
	A8Q8(off, off2, R9, b2) \
	A8Q8(off, off2, R10, b3)

// func a8Q8AVX512(codes *byte, ldc int, scales *byte, lds int, chunks int, acts *int8, sums *int32, dx *float32, masks *[2][16]uint16, out *[4]float32)
//
// quant's q8: per block 32 code bytes (two's complement), rows ldc bytes
// apart; c = 128. The activations are a8Acts.q.
TEXT ·a8Q8AVX512(SB), NOSPLIT, $0-80
	A8ROWS4
	VPBROADCASTB signBit<>(SB), Z28

loopA8Q8:
	A8PREFETCH(A8LINESQ8)
	A8SCALESPREFETCH
	A8LAST(32)
	VPSLLD $7, (R14), Z30
	A8Q8LOAD(0, 2, 0, 64, Z4, Z8, Z12, Z16)
	A8Q8LOAD(4, 6, 128, 192, Z5, Z9, Z13, Z17)
	A8Q8LOAD(8, 10, 256, 320, Z6, Z10, Z14, Z18)
	A8Q8LOAD(12, 14, 384, 448, Z7, Z11, Z15, Z19)
	A8CHUNK(16)
	A8NEXT(512, 32, loopA8Q8)
	A8SUM
	RET

// A8PACK(off, off2, row, w, t, k, k2, m, s): ggml blocks at off(row),
// 64 bytes masked by k and the next ones at off2(row) by k2; VPERMB (Z30)
// takes their f16 scales into the bytes of s that m selects, VPERMT2B
// (Z31) their codes into w (t: the second table).
#define A8PACK(off, off2, row, w, t, k, k2, m, s) \
	VMOVDQU8.Z off(row), k, w \
	VMOVDQU8.Z off2(row), k2, t \
	VPERMB w, Z30, m, s \
	VPERMT2B t, Z31, w

// A8Q4_0(off, off2, aoff, hoff, row, b, s): Q4_0's four blocks of 18
// bytes at off(row).
#define A8Q4_0(off, off2, aoff, hoff, row, b, s) \
	A8PACK(off, off2, row, Z24, Z25, K1, K3, K6, s) \
	A8NIBBLES(aoff, hoff, b)

#define A8Q4_0LOAD(m, m2, ms, off, off2, aoff, hoff, b0, b1, b2, b3) \
	KMOVQ m(BX), K1 \
	KMOVQ m2(BX), K3 \
	KMOVQ ms(BX), K6 \
	A8Q4_0(off, off2, aoff, hoff, SI, b0, Z20) \
	A8Q4_0(off, off2, aoff, hoff, R8, b1, Z21) \
	A8Q4_0(off, off2, aoff, hoff, R9, b2, Z22) \
	A8Q4_0(off, off2, aoff, hoff, R10, b3, Z23)

// func a8Q4_0AVX512(codes *byte, ldc int, scales *byte, lds int, chunks int, acts *int8, sums *int32, dx *float32, masks *[2][32]uint64, out *[4]float32)
//
// ggml's Q4_0: blocks of 18 bytes, an f16 d then 16 bytes holding column
// j in byte j's low nibble and column j+16 in its high one, rows ldc
// bytes apart (scales = codes, lds = ldc); c = 8. Four blocks come from
// 72 bytes: VPERMT2B packs their codes (unpack18<>), VPERMB their scales
// (scales18<>) into the row's Z20..Z23. The activations (a8Acts.halves)
// hold per 4 blocks their first 16 columns, then their last 16. masks
// (a8BlockMasks): per 4 blocks the byte masks of the first 64 bytes and
// the next 8, and at 136 the scales' bytes in Z20..Z23.
TEXT ·a8Q4_0AVX512(SB), NOSPLIT, $0-80
	A8ROWS4
	VPBROADCASTB nibbleMask<>(SB), Z28
	VMOVDQU64 unpack18<>(SB), Z31

loopA8Q4_0:
	A8PREFETCH(A8LINESQ4_0)
	A8LAST(256)
	VMOVDQU64 scales18<>(SB), Z30
	A8Q4_0LOAD(0, 8, 136, 0, 64, 0, 64, Z4, Z8, Z12, Z16)
	A8Q4_0LOAD(16, 24, 144, 72, 136, 128, 192, Z5, Z9, Z13, Z17)
	A8Q4_0LOAD(32, 40, 152, 144, 208, 256, 320, Z6, Z10, Z14, Z18)
	A8Q4_0LOAD(48, 56, 160, 216, 280, 384, 448, Z7, Z11, Z15, Z19)
	VPSLLD $3, (R14), Z30
	A8CHUNKGGML
	A8NEXT(288, 288, loopA8Q4_0)
	A8SUM
	RET

// A8Q8_0(off, off2, aoff, aoff2, row, b, s): Q8_0's four blocks of 34
// bytes, two at off(row) and two at off2(row), their codes' sign bits
// flipped.
#define A8Q8_0(off, off2, aoff, aoff2, row, b, s) \
	A8PACK(off, off+64, row, Z24, Z25, K1, K3, K6, s) \
	A8PACK(off2, off2+64, row, Z25, Z26, K4, K5, K7, s) \
	VPXORD Z28, Z24, Z24 \
	VPXORD Z28, Z25, Z25 \
	A8BYTES(aoff, aoff2, b)

#define A8Q8_0LOAD(m, ms, off, off2, aoff, aoff2, b0, b1, b2, b3) \
	KMOVQ m(BX), K1 \
	KMOVQ m+8(BX), K3 \
	KMOVQ m+16(BX), K4 \
	KMOVQ m+24(BX), K5 \
	KMOVQ ms(BX), K6 \
	KMOVQ ms+8(BX), K7 \
	A8Q8_0(off, off2, aoff, aoff2, SI, b0, Z20) \
	A8Q8_0(off, off2, aoff, aoff2, R8, b1, Z21) \
	A8Q8_0(off, off2, aoff, aoff2, R9, b2, Z22) \
	A8Q8_0(off, off2, aoff, aoff2, R10, b3, Z23)

// func a8Q8_0AVX512(codes *byte, ldc int, scales *byte, lds int, chunks int, acts *int8, sums *int32, dx *float32, masks *[2][32]uint64, out *[4]float32)
//
// ggml's Q8_0: blocks of 34 bytes, an f16 d then 32 int8 codes, rows ldc
// bytes apart (scales = codes, lds = ldc); c = 128. Two blocks come from
// 68 bytes: VPERMT2B packs their codes (unpack34<>), VPERMB their scales
// (scales34<>). The activations are a8Acts.q. masks (a8BlockMasks): per
// 2 blocks the byte masks of the first 64 bytes and the next 4, and at
// 136 the scales' bytes in Z20..Z23.
TEXT ·a8Q8_0AVX512(SB), NOSPLIT, $0-80
	A8ROWS4
	VPBROADCASTB signBit<>(SB), Z28
	VMOVDQU64 unpack34<>(SB), Z31

loopA8Q8_0:
	A8PREFETCH(A8LINESQ8_0)
	A8LAST(256)
	VMOVDQU64 scales34<>(SB), Z30
	A8Q8_0LOAD(0, 136, 0, 68, 0, 64, Z4, Z8, Z12, Z16)
	A8Q8_0LOAD(32, 152, 136, 204, 128, 192, Z5, Z9, Z13, Z17)
	A8Q8_0LOAD(64, 168, 272, 340, 256, 320, Z6, Z10, Z14, Z18)
	A8Q8_0LOAD(96, 184, 408, 476, 384, 448, Z7, Z11, Z15, Z19)
	VPSLLD $7, (R14), Z30
	A8CHUNKGGML
	A8NEXT(544, 544, loopA8Q8_0)
	A8SUM
	RET

DATA nibbleMask<>+0(SB)/1, $0x0f
GLOBL nibbleMask<>(SB), RODATA|NOPTR, $1
DATA signBit<>+0(SB)/1, $0x80
GLOBL signBit<>(SB), RODATA|NOPTR, $1

// transposed<>: VPERMD's indices that take block 4j+l from dword 4l+j.
DATA transposed<>+0(SB)/4, $0
DATA transposed<>+4(SB)/4, $4
DATA transposed<>+8(SB)/4, $8
DATA transposed<>+12(SB)/4, $12
DATA transposed<>+16(SB)/4, $1
DATA transposed<>+20(SB)/4, $5
DATA transposed<>+24(SB)/4, $9
DATA transposed<>+28(SB)/4, $13
DATA transposed<>+32(SB)/4, $2
DATA transposed<>+36(SB)/4, $6
DATA transposed<>+40(SB)/4, $10
DATA transposed<>+44(SB)/4, $14
DATA transposed<>+48(SB)/4, $3
DATA transposed<>+52(SB)/4, $7
DATA transposed<>+56(SB)/4, $11
DATA transposed<>+60(SB)/4, $15
GLOBL transposed<>(SB), RODATA|NOPTR, $64

// unpack18<> and unpack34<>: VPERMT2B's indices that take byte i of
// the packed codes from a ggml block of 18 (34) bytes: block i/16 (i/32)
// at 2 + its offset.
DATA unpack18<>+0(SB)/8, $0x0908070605040302
DATA unpack18<>+8(SB)/8, $0x11100f0e0d0c0b0a
DATA unpack18<>+16(SB)/8, $0x1b1a191817161514
DATA unpack18<>+24(SB)/8, $0x232221201f1e1d1c
DATA unpack18<>+32(SB)/8, $0x2d2c2b2a29282726
DATA unpack18<>+40(SB)/8, $0x3534333231302f2e
DATA unpack18<>+48(SB)/8, $0x3f3e3d3c3b3a3938
DATA unpack18<>+56(SB)/8, $0x4746454443424140
GLOBL unpack18<>(SB), RODATA|NOPTR, $64
DATA unpack34<>+0(SB)/8, $0x0908070605040302
DATA unpack34<>+8(SB)/8, $0x11100f0e0d0c0b0a
DATA unpack34<>+16(SB)/8, $0x1918171615141312
DATA unpack34<>+24(SB)/8, $0x21201f1e1d1c1b1a
DATA unpack34<>+32(SB)/8, $0x2b2a292827262524
DATA unpack34<>+40(SB)/8, $0x333231302f2e2d2c
DATA unpack34<>+48(SB)/8, $0x3b3a393837363534
DATA unpack34<>+56(SB)/8, $0x434241403f3e3d3c
GLOBL unpack34<>(SB), RODATA|NOPTR, $64

// scales18<> and scales34<>: VPERMB's indices that take the f16 scales
// of 4 blocks of 18 bytes (2 of 34) into 8 (4) bytes, repeated.
DATA scales18<>+0(SB)/8, $0x3736252413120100
DATA scales18<>+8(SB)/8, $0x3736252413120100
DATA scales18<>+16(SB)/8, $0x3736252413120100
DATA scales18<>+24(SB)/8, $0x3736252413120100
DATA scales18<>+32(SB)/8, $0x3736252413120100
DATA scales18<>+40(SB)/8, $0x3736252413120100
DATA scales18<>+48(SB)/8, $0x3736252413120100
DATA scales18<>+56(SB)/8, $0x3736252413120100
GLOBL scales18<>(SB), RODATA|NOPTR, $64
DATA scales34<>+0(SB)/8, $0x2322010023220100
DATA scales34<>+8(SB)/8, $0x2322010023220100
DATA scales34<>+16(SB)/8, $0x2322010023220100
DATA scales34<>+24(SB)/8, $0x2322010023220100
DATA scales34<>+32(SB)/8, $0x2322010023220100
DATA scales34<>+40(SB)/8, $0x2322010023220100
DATA scales34<>+48(SB)/8, $0x2322010023220100
DATA scales34<>+56(SB)/8, $0x2322010023220100
GLOBL scales34<>(SB), RODATA|NOPTR, $64

// func quantizeActsAVX512(x *float32, blocks int, q *int8, dx *float32)
//
// a8.go's step 1 per block of 32 values of x: amax = max |x_j| (a max is
// exact, so the order of the reduction does not matter); a block with an
// infinite or NaN value (VCMPPS not-less-equal MaxFloat32, unordered)
// gets dx = NaN and q = 0; a zero one, or one whose 127/amax overflows,
// dx = 0 and q = 0; any other dx = amax/127 and q_j = x_j·(127/amax)
// rounded to float32, then to the nearest integer, ties to even
// (VCVTPS2DQ in MXCSR's default rounding), at most 127 in magnitude.
TEXT ·quantizeActsAVX512(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ blocks+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ dx+24(FP), DX
	VPBROADCASTD absMask<>(SB), Z30
	VBROADCASTSS maxFloat32<>(SB), Z31
	MOVL $0x42fe0000, AX // 127
	VMOVD AX, X29
	TESTQ CX, CX
	JZ doneQuantize

loopQuantize:
	VANDPS (SI), Z30, Z0
	VANDPS 64(SI), Z30, Z1
	VCMPPS $6, Z31, Z0, K1
	VCMPPS $6, Z31, Z1, K2
	KORTESTW K1, K2
	JNZ nanQuantize
	VMAXPS Z1, Z0, Z2
	VEXTRACTF64X4 $1, Z2, Y3
	VMAXPS Y3, Y2, Y2
	VEXTRACTF32X4 $1, Y2, X3
	VMAXPS X3, X2, X2
	VPERMILPS $0x0E, X2, X3
	VMAXPS X3, X2, X2
	VMOVSHDUP X2, X3
	VMAXSS X3, X2, X2 // amax
	VXORPS X4, X4, X4
	VUCOMISS X4, X2
	JEQ zeroQuantize
	VDIVSS X2, X29, X5 // 127/amax
	VUCOMISS X31, X5
	JHI zeroQuantize // infinite: the block counts as zeros
	VBROADCASTSS X5, Z5
	VDIVSS X29, X2, X6 // amax/127
	VCVTPS2PH $0, X6, X7 // rounded to f16, ties to even, as a Q8_0 block keeps it
	VCVTPH2PS X7, X6
	VMOVSS X6, (DX)
	VMULPS (SI), Z5, Z0
	VMULPS 64(SI), Z5, Z1
	VCVTPS2DQ Z0, Z0
	VCVTPS2DQ Z1, Z1
	VPMOVSDB Z0, (DI)
	VPMOVSDB Z1, 16(DI)
	JMP nextQuantize

nanQuantize:
	MOVL $0x7fc00000, (DX)
	JMP clearQuantize

zeroQuantize:
	MOVL $0, (DX)

clearQuantize:
	VPXORD Y0, Y0, Y0
	VMOVDQU Y0, (DI)

nextQuantize:
	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $4, DX
	DECQ CX
	JNZ loopQuantize

doneQuantize:
	VZEROUPPER
	RET

DATA absMask<>+0(SB)/4, $0x7fffffff
GLOBL absMask<>(SB), RODATA|NOPTR, $4
DATA maxFloat32<>+0(SB)/4, $0x7f7fffff
GLOBL maxFloat32<>(SB), RODATA|NOPTR, $4

// A8PACK1(q, o, s): one block's 32 rounded activations at q(SI) laid
// out for the kernels at o(DI) (nib: even columns, then 64 bytes on the
// odd ones: VPSHUFB, evenOdd<> in Y31, splits each 16 into 8 even and 8
// odd, and VPERMQ orders the four eights) and o(R8) (halves: columns
// 0..15, then 64 bytes on 16..31), and Σq_j at s(DX): VPSADBW sums the
// bytes with the sign bit flipped (q + 128), less 32·128.
#define A8PACK1(q, o, s) \
	VMOVDQU q(SI), Y0 \
	VPSHUFB Y31, Y0, Y1 \
	VPERMQ $0xd8, Y1, Y1 \
	VMOVDQU X1, o(DI) \
	VEXTRACTI32X4 $1, Y1, o+64(DI) \
	VMOVDQU X0, o(R8) \
	VEXTRACTI32X4 $1, Y0, o+64(R8) \
	VPXORD Y30, Y0, Y2 \
	VPSADBW Y29, Y2, Y2 \
	VEXTRACTI32X4 $1, Y2, X3 \
	VPADDQ X3, X2, X2 \
	VPSHUFD $0x0e, X2, X3 \
	VPADDQ X3, X2, X2 \
	VMOVD X2, AX \
	SUBL $4096, AX \
	MOVL AX, s(DX)

// func packA8AVX512(q *int8, groups int, nib, halves *int8, sum *int32)
//
// packA8Acts's layouts of 4·groups blocks of rounded activations q.
TEXT ·packA8AVX512(SB), NOSPLIT, $0-40
	MOVQ q+0(FP), SI
	MOVQ groups+8(FP), CX
	MOVQ nib+16(FP), DI
	MOVQ halves+24(FP), R8
	MOVQ sum+32(FP), DX
	VMOVDQU64 evenOdd<>(SB), Y31
	VPBROADCASTB signBit<>(SB), Y30
	VPXORD Y29, Y29, Y29
	TESTQ CX, CX
	JZ donePack

loopPack:
	A8PACK1(0, 0, 0)
	A8PACK1(32, 16, 4)
	A8PACK1(64, 32, 8)
	A8PACK1(96, 48, 12)
	ADDQ $128, SI
	ADDQ $128, DI
	ADDQ $128, R8
	ADDQ $16, DX
	DECQ CX
	JNZ loopPack

donePack:
	VZEROUPPER
	RET

// evenOdd<>: VPSHUFB's indices that take the even bytes of each 16,
// then the odd ones.
DATA evenOdd<>+0(SB)/8, $0x0e0c0a0806040200
DATA evenOdd<>+8(SB)/8, $0x0f0d0b0907050301
DATA evenOdd<>+16(SB)/8, $0x0e0c0a0806040200
DATA evenOdd<>+24(SB)/8, $0x0f0d0b0907050301
GLOBL evenOdd<>(SB), RODATA|NOPTR, $32

// The prefill kernel of 8-bit activations: two rows of quant's q4 times n
// tokens, their codes loaded and unpacked once per chunk for all of them
// (the one-token kernels unpack them again for every token), each load
// of a token's activations used for both rows. The unpacking puts each
// block's S_b in one dword, so that a token's VPDPBUSDs end in S_b
// directly, with no transpose of sums per token: the chunk's 4 loads of 64 code bytes
// (block 4j+l in 128-bit lane l of load j) go through a 4×4 transpose of
// dwords within each lane (A8TRANSPOSE), after which register i holds
// dword i of every block, block 4j+l in dword 4l+j; the activations were
// laid out the same way (a8TransposeAVX512), and so were the tokens'
// dx and c·Σq (a8Q4Batch). The lanes are then the order's lanes permuted
// the same way (lane 4l+j is lane 4j+l; transposed<> undoes it, an
// involution): each lane gets the same sums in the same order as the
// one-token kernels', so the bits are theirs.

// A8TRANSPOSE(r0, r1, r2, r3, t0, t1, t2, t3): r_i lane l dword j
// becomes r_j's lane l dword i; t0..t3 temporaries.
#define A8TRANSPOSE(r0, r1, r2, r3, t0, t1, t2, t3) \
	VPUNPCKLDQ r1, r0, t0 \
	VPUNPCKHDQ r1, r0, t1 \
	VPUNPCKLDQ r3, r2, t2 \
	VPUNPCKHDQ r3, r2, t3 \
	VPUNPCKLQDQ t2, t0, r0 \
	VPUNPCKHQDQ t2, t0, r1 \
	VPUNPCKLQDQ t3, t1, r2 \
	VPUNPCKHQDQ t3, t1, r3

// func a8TransposeAVX512(src *int8, chunks int, dst *int8, ldd, step, second int)
//
// Activations laid out for a8Q4TokensAVX512 (step 128, second 64:
// a8Acts.nib, per chunk of 16 blocks 512 bytes, per 4 blocks j the 64
// bytes that meet low nibbles at 128j, the high ones' at 128j+64) or
// a8Q8TokensAVX512 (step 64, second 256: a8Acts.q): per chunk, at
// dst + ldd·c, the four registers at src + step·i transposed
// (A8TRANSPOSE), then those at src + second + step·i.
TEXT ·a8TransposeAVX512(SB), NOSPLIT, $0-48
	MOVQ src+0(FP), SI
	MOVQ chunks+8(FP), CX
	MOVQ dst+16(FP), DI
	MOVQ ldd+24(FP), DX
	MOVQ step+32(FP), R8
	MOVQ second+40(FP), R11
	LEAQ (R8)(R8*2), R10
	TESTQ CX, CX
	JZ doneA8Transpose

loopA8Transpose:
	LEAQ (SI)(R11*1), R9
	VMOVDQU32 (SI), Z0
	VMOVDQU32 (SI)(R8*1), Z1
	VMOVDQU32 (SI)(R8*2), Z2
	VMOVDQU32 (SI)(R10*1), Z3
	VMOVDQU32 (R9), Z4
	VMOVDQU32 (R9)(R8*1), Z5
	VMOVDQU32 (R9)(R8*2), Z6
	VMOVDQU32 (R9)(R10*1), Z7
	A8TRANSPOSE(Z0, Z1, Z2, Z3, Z8, Z9, Z10, Z11)
	A8TRANSPOSE(Z4, Z5, Z6, Z7, Z12, Z13, Z14, Z15)
	VMOVDQU32 Z0, 0(DI)
	VMOVDQU32 Z1, 64(DI)
	VMOVDQU32 Z2, 128(DI)
	VMOVDQU32 Z3, 192(DI)
	VMOVDQU32 Z4, 256(DI)
	VMOVDQU32 Z5, 320(DI)
	VMOVDQU32 Z6, 384(DI)
	VMOVDQU32 Z7, 448(DI)
	ADDQ $512, SI
	ADDQ DX, DI
	DECQ CX
	JNZ loopA8Transpose

doneA8Transpose:
	VZEROUPPER
	RET

// A8Q4UNPACK(row, lo0, lo1, lo2, lo3, hi0, hi1, hi2, hi3): the chunk's
// 256 code bytes of a row at (SI)(row*1), masked per 64 by the masks at
// 0..6(BX), transposed (Z0..Z3, temporaries Z24..Z27) and split into
// low nibbles lo0..lo3 and high ones hi0..hi3.
#define A8Q4UNPACK(row, lo0, lo1, lo2, lo3, hi0, hi1, hi2, hi3) \
	KMOVW 0(BX), K1 \
	VMOVDQU32.Z 0(SI)(row*1), K1, Z0 \
	KMOVW 2(BX), K1 \
	VMOVDQU32.Z 64(SI)(row*1), K1, Z1 \
	KMOVW 4(BX), K1 \
	VMOVDQU32.Z 128(SI)(row*1), K1, Z2 \
	KMOVW 6(BX), K1 \
	VMOVDQU32.Z 192(SI)(row*1), K1, Z3 \
	A8TRANSPOSE(Z0, Z1, Z2, Z3, Z24, Z25, Z26, Z27) \
	VPSRLD $4, Z0, hi0 \
	VPSRLD $4, Z1, hi1 \
	VPSRLD $4, Z2, hi2 \
	VPSRLD $4, Z3, hi3 \
	VPANDD Z28, Z0, lo0 \
	VPANDD Z28, Z1, lo1 \
	VPANDD Z28, Z2, lo2 \
	VPANDD Z28, Z3, lo3 \
	VPANDD Z28, hi0, hi0 \
	VPANDD Z28, hi1, hi1 \
	VPANDD Z28, hi2, hi2 \
	VPANDD Z28, hi3, hi3

// A8NEXTROWS(lines) prefetches into L1 the chunk's code bytes of the
// next two rows (2·ldc and 3·ldc bytes on: the next call's), lines
// macro naming the 64-byte lines from R13, and for quant's rows
// (A8NEXTSCALES) their scales: the hardware prefetchers alone leave a
// prefill kernel, which takes each row once per batch of tokens,
// waiting on rows that come from memory.
#define A8NEXTROWS(lines) \
	LEAQ (SI)(R8*2), R13 \
	lines \
	ADDQ R8, R13 \
	lines

#define A8NEXTSCALES \
	LEAQ (DX)(R9*2), R13 \
	PREFETCHT0 (R13) \
	PREFETCHT0 (R13)(R9*1)

#define A8LINES4 \
	PREFETCHT0 0(R13) \
	PREFETCHT0 64(R13) \
	PREFETCHT0 128(R13) \
	PREFETCHT0 192(R13)

#define A8LINES6 \
	A8LINES4 \
	PREFETCHT0 256(R13) \
	PREFETCHT0 320(R13)

#define A8LINES8 \
	A8LINES6 \
	PREFETCHT0 384(R13) \
	PREFETCHT0 448(R13)

#define A8LINES10 \
	A8LINES8 \
	PREFETCHT0 512(R13) \
	PREFETCHT0 576(R13)

// A8DOT(off, i, j, a, b): the token's activations at off(DI) times the
// two rows' codes Zi and Zj into a and b.
#define A8DOT(off, i, j, a, b) \
	VMOVDQU32 off(DI), Z24 \
	VPDPBUSD Z24, i, a \
	VPDPBUSD Z24, j, b

// A8LANES(t, s, off): a row's S_b in s times t_b in t (a multiply, not
// fused) added into its lanes at off(R11) (K3: the chunk's blocks).
#define A8LANES(t, s, off) \
	VMULPS t, s, s \
	VMOVUPS off(R11), Z26 \
	VADDPS s, Z26, K3, Z26 \
	VMOVUPS Z26, off(R11)

// A8TOKEN ends a token's chunk: its S_b (less c·Σq) of the two rows,
// in Z22 and Z23, into their lanes; the pointers on to the next token.
#define A8TOKEN \
	VMOVDQU32 (R14), Z24 \
	VPSUBD Z24, Z22, Z22 \
	VPSUBD Z24, Z23, Z23 \
	VCVTDQ2PS Z22, Z22 \
	VCVTDQ2PS Z23, Z23 \
	VMOVUPS (AX), Z24 \
	VMULPS Z24, Z20, Z25 \
	VMULPS Z24, Z21, Z27 \
	A8LANES(Z25, Z22, 0) \
	A8LANES(Z27, Z23, 64) \
	ADDQ $512, DI \
	ADDQ $64, R14 \
	ADDQ $64, AX \
	ADDQ $128, R11 \
	DECQ R10

// A8ROWSCALES: the two rows' 16 f16 scales at (DX) and (DX)(R9*1)
// (K2: the chunk's blocks) widened and permuted by Z30 into Z20 and
// Z21; K3 the chunk's blocks in the permuted lanes.
#define A8ROWSCALES \
	KMOVW 16(BX), K2 \
	VMOVDQU16.Z (DX), K2, Y20 \
	VCVTPH2PS Y20, Z20 \
	VPERMD Z20, Z30, Z20 \
	VMOVDQU16.Z (DX)(R9*1), K2, Y21 \
	VCVTPH2PS Y21, Z21 \
	VPERMD Z21, Z30, Z21 \
	KMOVW 18(BX), K3

// A8ZERO clears R10 tokens' lanes from R11, and R12.
#define A8ZERO(loop) \
	VPXORD Z0, Z0, Z0 \
loop: \
	VMOVUPS Z0, 0(R11) \
	VMOVUPS Z0, 64(R11) \
	ADDQ $128, R11 \
	DECQ R10 \
	JNZ loop \
	XORQ R12, R12

// A8TOKENSUMS(loop) stores R10 tokens' tree sums of their lanes from
// R11, the lanes unpermuted by Z29: token t's of row 0 at DI, of row 1
// at DI+4, DI on by R12 bytes per token.
#define A8TOKENSUMS(loop) \
loop: \
	VMOVUPS 0(R11), Z0 \
	VPERMD Z0, Z29, Z0 \
	REDUCE(Z0, Y0, X0, 0) \
	VMOVUPS 64(R11), Z1 \
	VPERMD Z1, Z29, Z1 \
	REDUCE(Z1, Y1, X1, 4) \
	ADDQ $128, R11 \
	ADDQ R12, DI \
	DECQ R10 \
	JNZ loop \
	VZEROUPPER

// func a8Q4TokensAVX512(codes *byte, ldc int, scales *byte, lds int, chunks int, acts *int8, sums *int32, dx *float32, n int, masks unsafe.Pointer, lanes *float32, out *float32, ldo int)
//
// out[ldo·t] = w_0 · x_t and out[ldo·t+1] = w_1 · x_t (without the
// bias; ldo in float32s) for two rows of quant's q4 (per block 16 code bytes and an f16 scale,
// c = 8; codes ldc and scales lds bytes apart, 0 for one row twice) and
// n ≥ 1 tokens t: each act load serves both rows. Per chunk, for token t
// at 512t(acts) its transposed activations (a8TransposeAVX512), at
// 64t(sums) c·Σq and at 64t(dx) dx of its 16 blocks in the permuted
// order; acts, sums and dx go on by 512n, 64n and 64n per chunk. masks
// (a8Masks): the code loads' at 0..6 (by 2), the scales' at 16, the
// lanes' (permuted) at 18; a whole chunk's, then 32 bytes on the last
// one's. lanes: scratch of 32n float32, token t's permuted lanes of row
// 0 at 128t, of row 1 at 128t+64.
//
// Registers: SI codes, R8 ldc, DX scales, R9 lds, CX chunks left, DI,
// R14, AX token t's activations, c·Σq and dx, BX masks, R10 tokens left,
// R11 token t's lanes, R12 0 (row 0's offset; at the end ldo bytes); Z4..Z11 row 0's nibbles
// (transposed; low, then high), Z12..Z19 row 1's, Z20 and Z21 their
// scales (permuted), Z22 and Z23 a token's S_b of each, Z25 and Z27 its
// t_b, Z24 and Z26 temporaries, Z28 0x0f bytes, Z29 and Z30
// transposed<> (the permutation is its own inverse).
TEXT ·a8Q4TokensAVX512(SB), NOSPLIT, $0-104
	MOVQ codes+0(FP), SI
	MOVQ ldc+8(FP), R8
	MOVQ scales+16(FP), DX
	MOVQ lds+24(FP), R9
	MOVQ chunks+32(FP), CX
	MOVQ acts+40(FP), DI
	MOVQ sums+48(FP), R14
	MOVQ dx+56(FP), AX
	MOVQ masks+72(FP), BX
	VMOVDQU32 transposed<>(SB), Z29
	VMOVDQU32 Z29, Z30
	VPBROADCASTB nibbleMask<>(SB), Z28
	MOVQ n+64(FP), R10
	MOVQ lanes+80(FP), R11
	A8ZERO(zeroA8Q4Tokens)

loopA8Q4Tokens:
	A8LAST(32)
	A8Q4UNPACK(R12, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11)
	A8Q4UNPACK(R8, Z12, Z13, Z14, Z15, Z16, Z17, Z18, Z19)
	A8NEXTROWS(A8LINES4)
	A8NEXTSCALES
	A8ROWSCALES
	MOVQ n+64(FP), R10
	MOVQ lanes+80(FP), R11

tokenA8Q4Tokens:
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	A8DOT(0, Z4, Z12, Z22, Z23)
	A8DOT(64, Z5, Z13, Z22, Z23)
	A8DOT(128, Z6, Z14, Z22, Z23)
	A8DOT(192, Z7, Z15, Z22, Z23)
	A8DOT(256, Z8, Z16, Z22, Z23)
	A8DOT(320, Z9, Z17, Z22, Z23)
	A8DOT(384, Z10, Z18, Z22, Z23)
	A8DOT(448, Z11, Z19, Z22, Z23)
	A8TOKEN
	JNZ tokenA8Q4Tokens

	ADDQ $256, SI
	ADDQ $32, DX
	DECQ CX
	JNZ loopA8Q4Tokens

	MOVQ n+64(FP), R10
	MOVQ lanes+80(FP), R11
	MOVQ out+88(FP), DI
	MOVQ ldo+96(FP), R12
	SHLQ $2, R12
	A8TOKENSUMS(sumA8Q4Tokens)
	RET

// A8Q4_0GROUP(m, ms, off, row, r, s): Q4_0's four blocks of 18 bytes at
// off(SI)(row*1) (72 bytes: 64 masked by the mask at m(BX), the rest by
// m+8(BX)), their codes packed into r as quant's q4's (VPERMT2B, Z31:
// unpack18<>) and their f16 scales into s's bytes that ms(BX) selects
// (VPERMB, Z30: scales18<>); Z24 a temporary.
#define A8Q4_0GROUP(m, ms, off, row, r, s) \
	KMOVQ m(BX), K1 \
	KMOVQ m+8(BX), K3 \
	KMOVQ ms(BX), K6 \
	VMOVDQU8.Z off(SI)(row*1), K1, r \
	VMOVDQU8.Z off+64(SI)(row*1), K3, Z24 \
	VPERMB r, Z30, K6, s \
	VPERMT2B Z24, Z31, r

// A8Q4_0UNPACK(row, s, lo0, …, hi3): a row's chunk of 16 Q4_0 blocks,
// their scales into s, their codes transposed and split as
// A8Q4UNPACK's.
#define A8Q4_0UNPACK(row, s, lo0, lo1, lo2, lo3, hi0, hi1, hi2, hi3) \
	A8Q4_0GROUP(0, 136, 0, row, Z0, s) \
	A8Q4_0GROUP(16, 144, 72, row, Z1, s) \
	A8Q4_0GROUP(32, 152, 144, row, Z2, s) \
	A8Q4_0GROUP(48, 160, 216, row, Z3, s) \
	A8TRANSPOSE(Z0, Z1, Z2, Z3, Z24, Z25, Z26, Z27) \
	VPSRLD $4, Z0, hi0 \
	VPSRLD $4, Z1, hi1 \
	VPSRLD $4, Z2, hi2 \
	VPSRLD $4, Z3, hi3 \
	VPANDD Z28, Z0, lo0 \
	VPANDD Z28, Z1, lo1 \
	VPANDD Z28, Z2, lo2 \
	VPANDD Z28, Z3, lo3 \
	VPANDD Z28, hi0, hi0 \
	VPANDD Z28, hi1, hi1 \
	VPANDD Z28, hi2, hi2 \
	VPANDD Z28, hi3, hi3

// func a8Q4_0TokensAVX512(codes *byte, ldc int, scales *byte, lds int, chunks int, acts *int8, sums *int32, dx *float32, n int, masks unsafe.Pointer, lanes *float32, out *float32, ldo int)
//
// a8Q4TokensAVX512 for ggml's Q4_0 (blocks of 18 bytes, an f16 d then
// 16 bytes holding column j in byte j's low nibble and j+16 in its high
// one; c = 8), rows ldc bytes apart (scales and lds unused): each group
// of 4 blocks repacked as a8Q4_0AVX512 does, then as q4's codes. The
// activations are a8Acts.halves transposed; masks (a8BlockMasks, *[2][32]
// uint64): per 4 blocks the byte masks of the first 64 bytes and the
// next 8, at 136 the scales' bytes, at 200 the chunk's blocks in the
// permuted lanes; a whole chunk's, then 256 bytes on the last one's. Z30
// scales18<>, Z31 unpack18<>.
TEXT ·a8Q4_0TokensAVX512(SB), NOSPLIT, $0-104
	MOVQ codes+0(FP), SI
	MOVQ ldc+8(FP), R8
	MOVQ chunks+32(FP), CX
	MOVQ acts+40(FP), DI
	MOVQ sums+48(FP), R14
	MOVQ dx+56(FP), AX
	MOVQ masks+72(FP), BX
	VMOVDQU32 transposed<>(SB), Z29
	VMOVDQU64 scales18<>(SB), Z30
	VMOVDQU64 unpack18<>(SB), Z31
	VPBROADCASTB nibbleMask<>(SB), Z28
	MOVQ n+64(FP), R10
	MOVQ lanes+80(FP), R11
	A8ZERO(zeroA8Q4_0Tokens)

loopA8Q4_0Tokens:
	A8LAST(256)
	A8Q4_0UNPACK(R12, Z20, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11)
	A8Q4_0UNPACK(R8, Z21, Z12, Z13, Z14, Z15, Z16, Z17, Z18, Z19)
	A8NEXTROWS(A8LINES6)
	VCVTPH2PS Y20, Z20
	VPERMD Z20, Z29, Z20
	VCVTPH2PS Y21, Z21
	VPERMD Z21, Z29, Z21
	KMOVW 200(BX), K3
	MOVQ n+64(FP), R10
	MOVQ lanes+80(FP), R11

tokenA8Q4_0Tokens:
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	A8DOT(0, Z4, Z12, Z22, Z23)
	A8DOT(64, Z5, Z13, Z22, Z23)
	A8DOT(128, Z6, Z14, Z22, Z23)
	A8DOT(192, Z7, Z15, Z22, Z23)
	A8DOT(256, Z8, Z16, Z22, Z23)
	A8DOT(320, Z9, Z17, Z22, Z23)
	A8DOT(384, Z10, Z18, Z22, Z23)
	A8DOT(448, Z11, Z19, Z22, Z23)
	A8TOKEN
	JNZ tokenA8Q4_0Tokens

	ADDQ $288, SI
	DECQ CX
	JNZ loopA8Q4_0Tokens

	MOVQ n+64(FP), R10
	MOVQ lanes+80(FP), R11
	MOVQ out+88(FP), DI
	MOVQ ldo+96(FP), R12
	SHLQ $2, R12
	A8TOKENSUMS(sumA8Q4_0Tokens)
	RET

// A8Q8UNPACK(row, r0, …, r7): the chunk's 512 code bytes of a row at
// (SI)(row*1) (blocks 2i and 2i+1 in the 64 at 64i), masked per 64 by
// the masks at 0..14(BX), the sign bits flipped (Z28), r0..r3
// transposed (A8TRANSPOSE, temporaries Z24..Z27) and r4..r7.
#define A8Q8UNPACK(row, r0, r1, r2, r3, r4, r5, r6, r7) \
	KMOVW 0(BX), K1 \
	VPXORD.Z 0(SI)(row*1), Z28, K1, r0 \
	KMOVW 2(BX), K1 \
	VPXORD.Z 64(SI)(row*1), Z28, K1, r1 \
	KMOVW 4(BX), K1 \
	VPXORD.Z 128(SI)(row*1), Z28, K1, r2 \
	KMOVW 6(BX), K1 \
	VPXORD.Z 192(SI)(row*1), Z28, K1, r3 \
	KMOVW 8(BX), K1 \
	VPXORD.Z 256(SI)(row*1), Z28, K1, r4 \
	KMOVW 10(BX), K1 \
	VPXORD.Z 320(SI)(row*1), Z28, K1, r5 \
	KMOVW 12(BX), K1 \
	VPXORD.Z 384(SI)(row*1), Z28, K1, r6 \
	KMOVW 14(BX), K1 \
	VPXORD.Z 448(SI)(row*1), Z28, K1, r7 \
	A8TRANSPOSE(r0, r1, r2, r3, Z24, Z25, Z26, Z27) \
	A8TRANSPOSE(r4, r5, r6, r7, Z24, Z25, Z26, Z27)

// A8HALVES8(a, b, s): a row's sums of blocks 0..7 in a and 8..15 in b,
// each block's in two 128-bit lanes (its first 16 and last 16 columns),
// added into s: lane 0 of s gets blocks 0, 2, 4, 6, lane 1 blocks 1, 3,
// 5, 7, lanes 2 and 3 blocks 8.. and 9.. so (a8Q8Perm).
#define A8HALVES8(a, b, s) \
	VSHUFI32X4 $0x88, b, a, s \
	VSHUFI32X4 $0xdd, b, a, b \
	VPADDD b, s, s

// func a8Q8TokensAVX512(codes *byte, ldc int, scales *byte, lds int, chunks int, acts *int8, sums *int32, dx *float32, n int, masks unsafe.Pointer, lanes *float32, out *float32, ldo int)
//
// a8Q4TokensAVX512 for quant's q8: per block 32 code bytes (two's
// complement), c = 128. A chunk's 8 loads of 64 code bytes (blocks 2i
// and 2i+1) go through two transposes, of loads 0..3 and of 4..7, after
// which a token's 4 VPDPBUSDs on each leave every block's sum in two
// dwords, which A8HALVES8 adds: block a8Q8Perm(p) in lane p. Z30 holds
// that permutation's indices (a8Q8Perm<>), Z29 its inverse's
// (a8Q8Unperm<>); the activations are a8Acts.q transposed the same way.
// Z0..Z3 a token's four sums (rows 0, 0, 1, 1); masks at 0..14 (by 2)
// for the code loads.
TEXT ·a8Q8TokensAVX512(SB), NOSPLIT, $0-104
	MOVQ codes+0(FP), SI
	MOVQ ldc+8(FP), R8
	MOVQ scales+16(FP), DX
	MOVQ lds+24(FP), R9
	MOVQ chunks+32(FP), CX
	MOVQ acts+40(FP), DI
	MOVQ sums+48(FP), R14
	MOVQ dx+56(FP), AX
	MOVQ masks+72(FP), BX
	VMOVDQU32 a8Q8Unperm<>(SB), Z29
	VMOVDQU32 a8Q8Perm<>(SB), Z30
	VPBROADCASTB signBit<>(SB), Z28
	MOVQ n+64(FP), R10
	MOVQ lanes+80(FP), R11
	A8ZERO(zeroA8Q8Tokens)

loopA8Q8Tokens:
	A8LAST(32)
	A8Q8UNPACK(R12, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11)
	A8Q8UNPACK(R8, Z12, Z13, Z14, Z15, Z16, Z17, Z18, Z19)
	A8NEXTROWS(A8LINES8)
	A8NEXTSCALES
	A8ROWSCALES
	MOVQ n+64(FP), R10
	MOVQ lanes+80(FP), R11

tokenA8Q8Tokens:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	A8DOT(0, Z4, Z12, Z0, Z2)
	A8DOT(64, Z5, Z13, Z0, Z2)
	A8DOT(128, Z6, Z14, Z0, Z2)
	A8DOT(192, Z7, Z15, Z0, Z2)
	A8DOT(256, Z8, Z16, Z1, Z3)
	A8DOT(320, Z9, Z17, Z1, Z3)
	A8DOT(384, Z10, Z18, Z1, Z3)
	A8DOT(448, Z11, Z19, Z1, Z3)
	A8HALVES8(Z0, Z1, Z22)
	A8HALVES8(Z2, Z3, Z23)
	A8TOKEN
	JNZ tokenA8Q8Tokens

	ADDQ $512, SI
	ADDQ $32, DX
	DECQ CX
	JNZ loopA8Q8Tokens

	MOVQ n+64(FP), R10
	MOVQ lanes+80(FP), R11
	MOVQ out+88(FP), DI
	MOVQ ldo+96(FP), R12
	SHLQ $2, R12
	A8TOKENSUMS(sumA8Q8Tokens)
	RET

// A8Q8_0GROUP(m, ms, off, row, r, s): Q8_0's two blocks of 34 bytes at
// off(SI)(row*1) (68 bytes: 64 masked by the mask at m(BX), the rest by
// m+8(BX)), their codes packed into r as quant's q8's (VPERMT2B, Z31:
// unpack34<>), the sign bits flipped (Z28), and their f16 scales into
// s's bytes that ms(BX) selects (VPERMB, Z30: scales34<>); Z24 a
// temporary.
#define A8Q8_0GROUP(m, ms, off, row, r, s) \
	KMOVQ m(BX), K1 \
	KMOVQ m+8(BX), K3 \
	KMOVQ ms(BX), K6 \
	VMOVDQU8.Z off(SI)(row*1), K1, r \
	VMOVDQU8.Z off+64(SI)(row*1), K3, Z24 \
	VPERMB r, Z30, K6, s \
	VPERMT2B Z24, Z31, r \
	VPXORD Z28, r, r

// A8Q8_0UNPACK(row, s, r0, …, r7): a row's chunk of 16 Q8_0 blocks, their
// scales into s, their codes as A8Q8UNPACK's.
#define A8Q8_0UNPACK(row, s, r0, r1, r2, r3, r4, r5, r6, r7) \
	A8Q8_0GROUP(0, 136, 0, row, r0, s) \
	A8Q8_0GROUP(16, 144, 68, row, r1, s) \
	A8Q8_0GROUP(32, 152, 136, row, r2, s) \
	A8Q8_0GROUP(48, 160, 204, row, r3, s) \
	A8Q8_0GROUP(64, 168, 272, row, r4, s) \
	A8Q8_0GROUP(80, 176, 340, row, r5, s) \
	A8Q8_0GROUP(96, 184, 408, row, r6, s) \
	A8Q8_0GROUP(112, 192, 476, row, r7, s) \
	A8TRANSPOSE(r0, r1, r2, r3, Z24, Z25, Z26, Z27) \
	A8TRANSPOSE(r4, r5, r6, r7, Z24, Z25, Z26, Z27)

// func a8Q8_0TokensAVX512(codes *byte, ldc int, scales *byte, lds int, chunks int, acts *int8, sums *int32, dx *float32, n int, masks unsafe.Pointer, lanes *float32, out *float32, ldo int)
//
// a8Q8TokensAVX512 for ggml's Q8_0 (blocks of 34 bytes, an f16 d then
// 32 int8 codes; c = 128), rows ldc bytes apart (scales and lds
// unused): each pair of blocks repacked as a8Q8_0AVX512 does, then as
// q8's codes. masks (a8BlockMasks, *[2][32]uint64): per 2 blocks the
// byte masks of the first 64 bytes and the next 4, at 136 the scales'
// bytes, at 200 the chunk's blocks in the permuted lanes; a whole
// chunk's, then 256 bytes on the last one's. Z30 scales34<>, Z31
// unpack34<>.
TEXT ·a8Q8_0TokensAVX512(SB), NOSPLIT, $0-104
	MOVQ codes+0(FP), SI
	MOVQ ldc+8(FP), R8
	MOVQ chunks+32(FP), CX
	MOVQ acts+40(FP), DI
	MOVQ sums+48(FP), R14
	MOVQ dx+56(FP), AX
	MOVQ masks+72(FP), BX
	VMOVDQU32 a8Q8Unperm<>(SB), Z29
	VMOVDQU64 scales34<>(SB), Z30
	VMOVDQU64 unpack34<>(SB), Z31
	VPBROADCASTB signBit<>(SB), Z28
	MOVQ n+64(FP), R10
	MOVQ lanes+80(FP), R11
	A8ZERO(zeroA8Q8_0Tokens)

loopA8Q8_0Tokens:
	A8LAST(256)
	A8Q8_0UNPACK(R12, Z20, Z4, Z5, Z6, Z7, Z8, Z9, Z10, Z11)
	A8Q8_0UNPACK(R8, Z21, Z12, Z13, Z14, Z15, Z16, Z17, Z18, Z19)
	A8NEXTROWS(A8LINES10)
	VMOVDQU32 a8Q8Perm<>(SB), Z24
	VCVTPH2PS Y20, Z20
	VPERMD Z20, Z24, Z20
	VCVTPH2PS Y21, Z21
	VPERMD Z21, Z24, Z21
	KMOVW 200(BX), K3
	MOVQ n+64(FP), R10
	MOVQ lanes+80(FP), R11

tokenA8Q8_0Tokens:
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	A8DOT(0, Z4, Z12, Z0, Z2)
	A8DOT(64, Z5, Z13, Z0, Z2)
	A8DOT(128, Z6, Z14, Z0, Z2)
	A8DOT(192, Z7, Z15, Z0, Z2)
	A8DOT(256, Z8, Z16, Z1, Z3)
	A8DOT(320, Z9, Z17, Z1, Z3)
	A8DOT(384, Z10, Z18, Z1, Z3)
	A8DOT(448, Z11, Z19, Z1, Z3)
	A8HALVES8(Z0, Z1, Z22)
	A8HALVES8(Z2, Z3, Z23)
	A8TOKEN
	JNZ tokenA8Q8_0Tokens

	ADDQ $544, SI
	DECQ CX
	JNZ loopA8Q8_0Tokens

	MOVQ n+64(FP), R10
	MOVQ lanes+80(FP), R11
	MOVQ out+88(FP), DI
	MOVQ ldo+96(FP), R12
	SHLQ $2, R12
	A8TOKENSUMS(sumA8Q8_0Tokens)
	RET

// a8Q8Perm<>: the block in each lane of a8Q8TokensAVX512 (a8Q8Perm);
// a8Q8Unperm<>: the lane of each block.
DATA a8Q8Perm<>+0(SB)/4, $0
DATA a8Q8Perm<>+4(SB)/4, $2
DATA a8Q8Perm<>+8(SB)/4, $4
DATA a8Q8Perm<>+12(SB)/4, $6
DATA a8Q8Perm<>+16(SB)/4, $1
DATA a8Q8Perm<>+20(SB)/4, $3
DATA a8Q8Perm<>+24(SB)/4, $5
DATA a8Q8Perm<>+28(SB)/4, $7
DATA a8Q8Perm<>+32(SB)/4, $8
DATA a8Q8Perm<>+36(SB)/4, $10
DATA a8Q8Perm<>+40(SB)/4, $12
DATA a8Q8Perm<>+44(SB)/4, $14
DATA a8Q8Perm<>+48(SB)/4, $9
DATA a8Q8Perm<>+52(SB)/4, $11
DATA a8Q8Perm<>+56(SB)/4, $13
DATA a8Q8Perm<>+60(SB)/4, $15
GLOBL a8Q8Perm<>(SB), RODATA|NOPTR, $64
DATA a8Q8Unperm<>+0(SB)/4, $0
DATA a8Q8Unperm<>+4(SB)/4, $4
DATA a8Q8Unperm<>+8(SB)/4, $1
DATA a8Q8Unperm<>+12(SB)/4, $5
DATA a8Q8Unperm<>+16(SB)/4, $2
DATA a8Q8Unperm<>+20(SB)/4, $6
DATA a8Q8Unperm<>+24(SB)/4, $3
DATA a8Q8Unperm<>+28(SB)/4, $7
DATA a8Q8Unperm<>+32(SB)/4, $8
DATA a8Q8Unperm<>+36(SB)/4, $12
DATA a8Q8Unperm<>+40(SB)/4, $9
DATA a8Q8Unperm<>+44(SB)/4, $13
DATA a8Q8Unperm<>+48(SB)/4, $10
DATA a8Q8Unperm<>+52(SB)/4, $14
DATA a8Q8Unperm<>+56(SB)/4, $11
DATA a8Q8Unperm<>+60(SB)/4, $15
GLOBL a8Q8Unperm<>(SB), RODATA|NOPTR, $64
