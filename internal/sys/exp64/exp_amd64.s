#include "textflag.h"

// Exp (exp.go) on eight float64 lanes, the same operations in the same
// order, no product fused: the same bits as the Go.

// EXP64: Z12 = e^Z1, lane by lane. K1..K4: the special cases (above
// the overflow bound or +∞; below the underflow bound or −∞; NaN; |x|
// under 2⁻²⁸); Z3..Z11, Z13, Z14: temporaries; Z5 k, Z7 hi, Z8 lo, Z9 r,
// Z10 t.
#define EXP64 \
	VCMPPD.BCST $0x1e, expOverflow<>(SB), Z1, K1 \
	VCMPPD.BCST $0x11, expUnderflow<>(SB), Z1, K2 \
	VCMPPD $0x03, Z1, Z1, K3 \
	VPANDQ.BCST expAbs<>(SB), Z1, Z3 \
	VCMPPD.BCST $0x11, expNearZero<>(SB), Z3, K4 \
	VPANDQ.BCST expSign<>(SB), Z1, Z4 \
	VPORQ.BCST expHalf<>(SB), Z4, Z4 \
	VMULPD.BCST expLog2e<>(SB), Z1, Z3 \
	VADDPD Z4, Z3, Z3 \
	VCVTTPD2QQ Z3, Z5 \
	VCVTQQ2PD Z5, Z6 \
	VMULPD.BCST expLn2Hi<>(SB), Z6, Z7 \
	VSUBPD Z7, Z1, Z7 \
	VMULPD.BCST expLn2Lo<>(SB), Z6, Z8 \
	VSUBPD Z8, Z7, Z9 \
	VMULPD Z9, Z9, Z10 \
	VMULPD.BCST expP5<>(SB), Z10, Z11 \
	VADDPD.BCST expP4<>(SB), Z11, Z11 \
	VMULPD Z11, Z10, Z11 \
	VADDPD.BCST expP3<>(SB), Z11, Z11 \
	VMULPD Z11, Z10, Z11 \
	VADDPD.BCST expP2<>(SB), Z11, Z11 \
	VMULPD Z11, Z10, Z11 \
	VADDPD.BCST expP1<>(SB), Z11, Z11 \
	VMULPD Z11, Z10, Z11 \
	VSUBPD Z11, Z9, Z11 \
	VMULPD Z11, Z9, Z12 \
	VBROADCASTSD expTwo<>(SB), Z13 \
	VSUBPD Z11, Z13, Z13 \
	VDIVPD Z13, Z12, Z12 \
	VSUBPD Z12, Z8, Z12 \
	VSUBPD Z7, Z12, Z12 \
	VBROADCASTSD expOne<>(SB), Z13 \
	VSUBPD Z12, Z13, Z12 \
	VPSRAQ $1, Z5, Z13 \
	VPSUBQ Z13, Z5, Z14 \
	VPADDQ.BCST expBias<>(SB), Z13, Z13 \
	VPSLLQ $52, Z13, Z13 \
	VPADDQ.BCST expBias<>(SB), Z14, Z14 \
	VPSLLQ $52, Z14, Z14 \
	VMULPD Z13, Z12, Z12 \
	VMULPD Z14, Z12, Z12 \
	VADDPD.BCST expOne<>(SB), Z1, K4, Z12 \
	VBROADCASTSD expInf<>(SB), Z13 \
	VMOVAPD Z13, K1, Z12 \
	VPXORQ Z13, Z13, Z13 \
	VMOVAPD Z13, K2, Z12 \
	VMOVAPD Z1, K3, Z12

// KLREDUCE stores ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)) of the lanes of
// Z (whose low half is Y) at off(DX), KLSumsGo's order.
#define KLREDUCE(Z, Y, off) \
	VEXTRACTF64X4 $1, Z, Y28 \
	VADDPD Y28, Y, Y28 \
	VEXTRACTF64X2 $1, Y28, X29 \
	VADDPD X29, X28, X29 \
	VPERMILPD $1, X29, X30 \
	VADDSD X30, X29, X29 \
	VMOVSD X29, off(DX)

// func siluMulAVX512(x, u *float32, n int, out *float32)
//
// out[i] = float32(v / (1 + e^−v)) · u[i] with v = float64(x[i]), for n
// a multiple of 8: silu (exp.go) times u, eight at a time.
TEXT ·siluMulAVX512(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ u+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ out+24(FP), DX

loopSilu:
	VCVTPS2PD (SI), Z0
	VPXORQ.BCST expSign<>(SB), Z0, Z1
	EXP64
	VADDPD.BCST expOne<>(SB), Z12, Z12
	VDIVPD Z12, Z0, Z12
	VCVTPD2PS Z12, Y12
	VMULPS (DI), Y12, Y12
	VMOVUPS Y12, (DX)
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, DX
	SUBQ $8, CX
	JNZ loopSilu
	VZEROUPPER
	RET

// func expShiftAVX512(x *float32, sub float32, n int, out *float64)
//
// out[i] = e^float64(x[i] − sub) (the difference in float32), for n a
// multiple of 8: softmax's exponentials.
TEXT ·expShiftAVX512(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	VBROADCASTSS sub+8(FP), Y15
	MOVQ n+16(FP), CX
	MOVQ out+24(FP), DX

loopExp:
	VMOVUPS (SI), Y0
	VSUBPS Y15, Y0, Y0
	VCVTPS2PD Y0, Z1
	EXP64
	VMOVUPD Z12, (DX)
	ADDQ $32, SI
	ADDQ $64, DX
	SUBQ $8, CX
	JNZ loopExp
	VZEROUPPER
	RET

// func klSumsAVX512(x, y *float32, blocks int, c *[3]float64, out *float64)
//
// KLSumsGo (klsums.go) on blocks whole blocks of 64 tokens, c = {maxX,
// maxY, meanD}: lane l of Z16..Z19 holds the sums of tokens l, l+8, … of
// the block, added at the end in the Go's order.
TEXT ·klSumsAVX512(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ blocks+16(FP), CX
	MOVQ c+24(FP), AX
	MOVQ out+32(FP), DX
	VBROADCASTSD 0(AX), Z24
	VBROADCASTSD 8(AX), Z25
	VBROADCASTSD 16(AX), Z26

loopBlock:
	VPXORQ Z16, Z16, Z16
	VPXORQ Z17, Z17, Z17
	VPXORQ Z18, Z18, Z18
	VPXORQ Z19, Z19, Z19
	MOVQ $8, BX

loopLanes:
	VCVTPS2PD (SI), Z20
	VCVTPS2PD (DI), Z21
	VSUBPD Z24, Z20, Z22
	VSUBPD Z25, Z21, Z23
	VMOVAPD Z22, Z1
	EXP64
	VMOVAPD Z12, Z15
	VADDPD Z12, Z16, Z16
	VMOVAPD Z23, Z1
	EXP64
	VADDPD Z12, Z17, Z17
	VSUBPD Z23, Z22, Z27
	VMULPD Z27, Z15, Z27
	VADDPD Z27, Z18, Z18
	VSUBPD Z20, Z21, Z27
	VSUBPD Z26, Z27, Z27
	VMULPD Z27, Z27, Z27
	VADDPD Z27, Z19, Z19
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ BX
	JNZ loopLanes

	KLREDUCE(Z16, Y16, 0)
	KLREDUCE(Z17, Y17, 8)
	KLREDUCE(Z18, Y18, 16)
	KLREDUCE(Z19, Y19, 24)
	ADDQ $32, DX
	DECQ CX
	JNZ loopBlock
	VZEROUPPER
	RET

// exp64's constants (exp.go), as float64 bits.
DATA expOverflow<>+0(SB)/8, $7.09782712893383973096e02
GLOBL expOverflow<>(SB), RODATA|NOPTR, $8
DATA expUnderflow<>+0(SB)/8, $-7.45133219101941108420e02
GLOBL expUnderflow<>(SB), RODATA|NOPTR, $8
DATA expNearZero<>+0(SB)/8, $0x3e30000000000000
GLOBL expNearZero<>(SB), RODATA|NOPTR, $8
DATA expAbs<>+0(SB)/8, $0x7fffffffffffffff
GLOBL expAbs<>(SB), RODATA|NOPTR, $8
DATA expSign<>+0(SB)/8, $0x8000000000000000
GLOBL expSign<>(SB), RODATA|NOPTR, $8
DATA expHalf<>+0(SB)/8, $0.5
GLOBL expHalf<>(SB), RODATA|NOPTR, $8
DATA expLog2e<>+0(SB)/8, $1.44269504088896338700e00
GLOBL expLog2e<>(SB), RODATA|NOPTR, $8
DATA expLn2Hi<>+0(SB)/8, $6.93147180369123816490e-01
GLOBL expLn2Hi<>(SB), RODATA|NOPTR, $8
DATA expLn2Lo<>+0(SB)/8, $1.90821492927058770002e-10
GLOBL expLn2Lo<>(SB), RODATA|NOPTR, $8
DATA expP1<>+0(SB)/8, $1.66666666666666657415e-01
GLOBL expP1<>(SB), RODATA|NOPTR, $8
DATA expP2<>+0(SB)/8, $-2.77777777770155933842e-03
GLOBL expP2<>(SB), RODATA|NOPTR, $8
DATA expP3<>+0(SB)/8, $6.61375632143793436117e-05
GLOBL expP3<>(SB), RODATA|NOPTR, $8
DATA expP4<>+0(SB)/8, $-1.65339022054652515390e-06
GLOBL expP4<>(SB), RODATA|NOPTR, $8
DATA expP5<>+0(SB)/8, $4.13813679705723846039e-08
GLOBL expP5<>(SB), RODATA|NOPTR, $8
DATA expTwo<>+0(SB)/8, $2.0
GLOBL expTwo<>(SB), RODATA|NOPTR, $8
DATA expOne<>+0(SB)/8, $1.0
GLOBL expOne<>(SB), RODATA|NOPTR, $8
DATA expInf<>+0(SB)/8, $0x7ff0000000000000
GLOBL expInf<>(SB), RODATA|NOPTR, $8
DATA expBias<>+0(SB)/8, $1023
GLOBL expBias<>(SB), RODATA|NOPTR, $8
