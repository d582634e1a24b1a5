package exp64

import "golang.org/x/sys/cpu"

//go:noescape
func siluMulAVX512(x, u *float32, n int, out *float32)

//go:noescape
func expShiftAVX512(x *float32, sub float32, n int, out *float64)

func init() {
	// F and VL for the kernels, DQ for the conversions between float64
	// and int64 lanes.
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512DQ {
		SiluMul, Shift, Asm = siluMulAsm, shiftAsm, true
	}
}

func siluMulAsm(out, g, u []float32) {
	n := len(out) / 8 * 8
	if n > 0 {
		_, _ = g[n-1], u[n-1]
		siluMulAVX512(&g[0], &u[0], n, &out[0])
	}
	SiluMulGo(out[n:], g[n:], u[n:])
}

func shiftAsm(out []float64, x []float32, sub float32) {
	n := len(x) / 8 * 8
	if n > 0 {
		_ = out[n-1]
		expShiftAVX512(&x[0], sub, n, &out[0])
	}
	ShiftGo(out[n:], x[n:], sub)
}
