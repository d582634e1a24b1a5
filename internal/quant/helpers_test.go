package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/x448/float16"
)

// refEncode is a deliberately naive, independent encoder used to check the
// real one: it quantizes with the formulas of the package doc and then places
// every bit of every code at the position the doc gives, one bit at a time.
func refEncode(t testing.TB, s Scheme, w []float32, rows, cols int) []uint32 {
	t.Helper()
	bits, qmax := s.Bits(), float64(s.QMax())
	g := (cols + 31) / 32
	sw := (g + 1) / 2
	words := make([]uint32, rows*g*bits+rows*sw)
	scaleBase := rows * g * bits
	setBit := func(word, bit int) { words[word] |= 1 << bit }
	for r := range rows {
		for gi := range g {
			var x [32]float64 // zero padding
			amax := 0.0
			for j := range 32 {
				if c := gi*32 + j; c < cols {
					x[j] = float64(w[r*cols+c])
					amax = math.Max(amax, math.Abs(x[j]))
				}
			}
			var h uint16
			if amax > 0 {
				h = float16.Fromfloat32(float32(amax) / float32(qmax)).Bits()
				if h >= 0x7C00 {
					h = 0x7BFF
				}
				if h < 0x0400 {
					h = 0x0400
				}
			}
			if gi%2 == 0 {
				words[scaleBase+r*sw+gi/2] |= uint32(h)
			} else {
				words[scaleBase+r*sw+gi/2] |= uint32(h) << 16
			}
			sc := float64(float16.Frombits(h).Float32())
			base := (r*g + gi) * bits
			for j := range 32 {
				q := 0.0
				if sc != 0 {
					q = math.Max(-qmax, math.Min(qmax, math.Round(x[j]/sc)))
				}
				var u uint32
				switch s {
				case Q8:
					u = uint32(uint8(int8(q)))
				case Q6:
					u = uint32(q + 32)
				case Q4:
					u = uint32(q + 8)
				}
				for b := range bits {
					if u>>b&1 == 0 {
						continue
					}
					switch {
					case s == Q8:
						setBit(base+j/4, 8*(j%4)+b)
					case b < 4: // q4, and the low nibble of q6
						setBit(base+j/8, 4*(j%8)+b)
					default: // q6 high bits
						setBit(base+4+j/16, 2*(j%16)+b-4)
					}
				}
			}
		}
	}
	return words
}

func toWords(blob []byte) []uint32 {
	w := make([]uint32, len(blob)/4)
	for i := range w {
		w[i] = binary.LittleEndian.Uint32(blob[4*i:])
	}
	return w
}

// scaleAt reads group g of row r's scale straight from the words, as the shader would.
func scaleAt(l Layout, words []uint32, r, g int) float32 {
	w := words[l.Rows*l.QuantWordsPerRow+r*l.ScaleWordsPerRow+g/2]
	return float16.Frombits(uint16(w >> (16 * (g % 2)))).Float32()
}

// checkBound asserts the documented error bound for every element and
// returns sum((x-deq)^2) and sum(x^2).
func checkBound(t testing.TB, l Layout, w, deq []float32, blob []byte) (errSq, sigSq float64) {
	t.Helper()
	words := toWords(blob)
	qmax := float64(l.Scheme.QMax())
	bad := 0
	for r := range l.Rows {
		for c := range l.Cols {
			i := r*l.Cols + c
			x, d := float64(w[i]), float64(deq[i])
			s := float64(scaleAt(l, words, r, c/32))
			// Exact in float64: x, d and s are all float32 values.
			bound := math.Max(s/2, math.Abs(x)-qmax*s)
			if e := math.Abs(x - d); e > bound {
				if bad++; bad <= 5 {
					t.Errorf("%s (%d, %d): x=%g deq=%g |err|=%g > bound %g (s=%g)", l.Scheme, r, c, x, d, e, bound, s)
				}
			}
			errSq += (x - d) * (x - d)
			sigSq += x * x
		}
	}
	return errSq, sigSq
}

// weights draws N(0, 0.02) like an LLM projection, with about 0.5% outliers
// 10-50x larger, since real checkpoints have them and they stress the scale.
func weights(seed uint64, n int) []float32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	w := make([]float32, n)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.02)
		if rng.IntN(200) == 0 {
			w[i] *= float32(10 + rng.IntN(40))
		}
	}
	return w
}

func roundTrip(t testing.TB, s Scheme, w []float32, rows, cols int) ([]byte, []float32) {
	t.Helper()
	blob, err := Quantize(s, w, rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	deq := make([]float32, len(w))
	if err := Dequantize(s, blob, rows, cols, deq); err != nil {
		t.Fatal(err)
	}
	return blob, deq
}
