package exp64

// Block is how many tokens of a row KLSums sums plainly, in Lanes partial
// sums, before it hands the block's sums over; the caller adds the blocks
// with compensation.
const (
	Block = 64
	Lanes = 8
)

// KLSumsGo is, for each block b of Block tokens of a reference row x and
// a test row y (the last block may be shorter), with u = x − maxX and
// w = y − maxY in float64:
//
//	out[4b]   = Σ e^u
//	out[4b+1] = Σ e^w
//	out[4b+2] = Σ e^u·(u − w)
//	out[4b+3] = Σ (y − x − meanD)²
//
// which give a softmax's normalisers, the KL divergence and the variance
// of d = y − x. Token j of a block goes to lane j mod 8, and the lanes are
// added as ((0+4)+(2+6))+((1+5)+(3+7)): the order the AVX-512 kernel adds
// in, so that both give the same bits. out needs 4 per block.
func KLSumsGo(x, y []float32, maxX, maxY, meanD float64, out []float64) {
	for b := 0; b*Block < len(x); b++ {
		var acc [4][Lanes]float64
		lo := b * Block
		for j, xv := range x[lo:min(lo+Block, len(x))] {
			yv := y[lo+j]
			u, w := float64(xv)-maxX, float64(yv)-maxY
			eu := Exp(u)
			l := j % Lanes
			acc[0][l] += eu
			acc[1][l] += Exp(w)
			acc[2][l] += float64(eu * (u - w))
			d := float64(yv) - float64(xv) - meanD
			acc[3][l] += float64(d * d)
		}
		for k, a := range acc {
			out[4*b+k] = ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
		}
	}
}

// KLSums is KLSumsGo, in assembly where the CPU has it.
var KLSums = KLSumsGo
