package quant

import (
	"encoding/binary"
	"math"
	"testing"
)

// FuzzRoundTrip feeds arbitrary float32 bit patterns and shapes. It must never
// panic; non-finite input must be an error; finite input must round-trip within
// the documented bound and match the naive encoder.
func FuzzRoundTrip(f *testing.F) {
	le := binary.LittleEndian
	seed := func(vals ...float32) []byte {
		b := make([]byte, 4*len(vals))
		for i, v := range vals {
			le.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b
	}
	f.Add(seed(1, -2, 3, 0.5), uint8(0), uint8(3))
	f.Add(seed(math.MaxFloat32, -math.MaxFloat32, 1e-45, 0), uint8(1), uint8(1))
	f.Add(seed(float32(math.NaN()), 1), uint8(2), uint8(0))
	f.Add(seed(float32(math.Inf(-1))), uint8(0), uint8(0))
	f.Add(seed(1e-30, 65504*127, 65520*31, 7), uint8(2), uint8(40))
	f.Fuzz(func(t *testing.T, data []byte, si, c uint8) {
		s := Schemes[int(si)%len(Schemes)]
		n := len(data) / 4
		cols := 1 + int(c)%80
		rows := n / cols
		if rows == 0 {
			return
		}
		w := make([]float32, rows*cols)
		finite := true
		for i := range w {
			w[i] = math.Float32frombits(le.Uint32(data[4*i:]))
			if math.IsNaN(float64(w[i])) || math.IsInf(float64(w[i]), 0) {
				finite = false
			}
		}
		blob, err := Quantize(s, w, rows, cols)
		if !finite {
			if err == nil {
				t.Fatal("non-finite input quantized without error")
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		l, _ := NewLayout(s, rows, cols)
		deq := make([]float32, len(w))
		if err := Dequantize(s, blob, rows, cols, deq); err != nil {
			t.Fatal(err)
		}
		checkBound(t, l, w, deq, blob)
		words := toWords(blob)
		ref := refEncode(t, s, w, rows, cols)
		for i := range ref {
			if words[i] != ref[i] {
				t.Fatalf("word %d: %08X, naive reference %08X", i, words[i], ref[i])
			}
		}
	})
}
