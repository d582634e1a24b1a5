// Package exl3test makes EXL3 layers for the engines' tests.
package exl3test

import (
	"math/rand/v2"

	"github.com/x448/float16"

	"logitscope/internal/format/exl3"
)

// Random is a random EXL3 layer of format f for nIn inputs and nOut
// outputs: random words are as good a trellis as any, and much faster to
// make than an encoding. suh scales the codebook's weights (deviation
// about 1) to a trained model's size, svh is about ±1.
func Random(rng *rand.Rand, nIn, nOut int, f exl3.Format) exl3.Layer {
	l := exl3.Layer{In: exl3.Pad(nIn), Out: exl3.Pad(nOut), K: f.K, Codebook: f.Codebook}
	l.Trellis = make([]uint16, f.TrellisBytes(nIn, nOut)/2)
	for i := range l.Trellis {
		l.Trellis[i] = uint16(rng.Uint32())
	}
	scales := func(n int, size float32) []uint16 {
		s := make([]uint16, n)
		for i := range s {
			s[i] = float16.Fromfloat32(size * float32(rng.Float64()+0.5) * float32(1-2*rng.IntN(2))).Bits()
		}
		return s
	}
	l.Suh, l.Svh = scales(l.In, 0.02), scales(l.Out, 1)
	return l
}
