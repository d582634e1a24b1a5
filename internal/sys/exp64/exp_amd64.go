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
		SiluMul, Shift, KLSums, Asm = siluMulAsm, shiftAsm, klSumsAsm, true
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

//go:noescape
func klSumsAVX512(x, y *float32, blocks int, c *[3]float64, out *float64)

// klSumsAsm runs the whole blocks in assembly and the last, shorter one in
// Go.
func klSumsAsm(x, y []float32, maxX, maxY, meanD float64, out []float64) {
	n := len(x) / Block
	if n > 0 {
		_, _ = y[n*Block-1], out[4*n-1]
		klSumsAVX512(&x[0], &y[0], n, &[3]float64{maxX, maxY, meanD}, &out[0])
	}
	KLSumsGo(x[n*Block:], y[n*Block:len(x)], maxX, maxY, meanD, out[4*n:])
}
