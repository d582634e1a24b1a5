package quant

import (
	"math"
	"strings"
	"testing"
)

// TestRoundTrip checks the documented bound on every element and that the
// noise falls as bits rise.
func TestRoundTrip(t *testing.T) {
	const rows, cols = 64, 1000 // 1000 = 31 groups + 8: padding and odd G
	w := weights(1, rows*cols)
	// NMSE ceilings are ~2x what this data gives (measured 1.3e-4, 2.1e-3,
	// 1.3e-2); they catch a scheme silently degrading towards the next one.
	ceil := map[Scheme]float64{Q8: 3e-4, Q6: 5e-3, Q4: 3e-2}
	nmse := map[Scheme]float64{}
	for _, s := range Schemes {
		l, _ := NewLayout(s, rows, cols)
		blob, deq := roundTrip(t, s, w, rows, cols)
		e, sig := checkBound(t, l, w, deq, blob)
		nmse[s] = e / sig
		t.Logf("%s NMSE %.3g", s, nmse[s])
		if nmse[s] > ceil[s] {
			t.Errorf("%s NMSE %.3g above %.3g", s, nmse[s], ceil[s])
		}
	}
	if !(nmse[Q8] < nmse[Q6] && nmse[Q6] < nmse[Q4]) {
		t.Errorf("NMSE not ordered q8 < q6 < q4: %v", nmse)
	}
}

func TestEdgeCases(t *testing.T) {
	group := func(f func(j int) float32) []float32 {
		w := make([]float32, 32)
		for j := range w {
			w[j] = f(j)
		}
		return w
	}
	tests := []struct {
		name  string
		w     []float32
		scale uint16 // expected f16 scale bits for every scheme, 0 = don't check
		check func(t *testing.T, s Scheme, w, deq []float32)
	}{
		{
			name: "all zero", w: make([]float32, 32),
			check: func(t *testing.T, s Scheme, w, deq []float32) {
				for j, d := range deq {
					if math.Float32bits(d) != 0 {
						t.Errorf("deq[%d] = %g, want +0", j, d)
					}
				}
			},
		},
		{
			name: "negative zero", w: group(func(int) float32 { return float32(math.Copysign(0, -1)) }),
		},
		{
			// One huge value takes the group's scale; it survives within s/2
			// while the small ones flush to zero.
			name: "one huge value", w: group(func(j int) float32 {
				if j == 5 {
					return 1e4
				}
				return 1e-3
			}),
			check: func(t *testing.T, s Scheme, w, deq []float32) {
				if deq[0] != 0 || math.Abs(float64(deq[5])-1e4) > 1e4/float64(s.QMax())/2*1.001 {
					t.Errorf("deq[0]=%g deq[5]=%g", deq[0], deq[5])
				}
			},
		},
		{
			// Scale overflow: amax/qmax > 65504 for every scheme, so the scale
			// saturates and the largest values clamp to qmax*65504.
			name: "scale overflow", scale: 0x7BFF, w: group(func(j int) float32 { return float32(j-16) * 1e8 }),
			check: func(t *testing.T, s Scheme, w, deq []float32) {
				if want := -float32(s.QMax()) * 65504; deq[0] != want {
					t.Errorf("deq[0] = %g, want -qmax*65504 = %g", deq[0], want)
				}
			},
		},
		{
			name: "max float32", scale: 0x7BFF, w: group(func(j int) float32 { return math.MaxFloat32 * float32(j%2*2-1) }),
		},
		{
			// amax/qmax below the f16 normal range: the scale is held at
			// 2^-14 rather than going subnormal.
			name: "tiny values", scale: 0x0400, w: group(func(j int) float32 { return float32(j) * 1e-9 }),
		},
		{
			name: "smallest subnormal float32", scale: 0x0400, w: group(func(j int) float32 { return math.SmallestNonzeroFloat32 }),
		},
	}
	for _, tt := range tests {
		for _, s := range Schemes {
			t.Run(tt.name+"/"+string(s), func(t *testing.T) {
				l, _ := NewLayout(s, 1, len(tt.w))
				blob, deq := roundTrip(t, s, tt.w, 1, len(tt.w))
				checkBound(t, l, tt.w, deq, blob)
				if tt.scale != 0 {
					if got := uint16(toWords(blob)[l.QuantWordsPerRow]); got != tt.scale {
						t.Errorf("scale bits %#04x, want %#04x", got, tt.scale)
					}
				}
				if tt.check != nil {
					tt.check(t, s, tt.w, deq)
				}
				// Rounding half away from zero is odd-symmetric, so the
				// side amax comes from does not matter: -x decodes to -deq.
				neg := make([]float32, len(tt.w))
				for i, v := range tt.w {
					neg[i] = -v
				}
				_, negDeq := roundTrip(t, s, neg, 1, len(neg))
				for i := range deq {
					if negDeq[i] != -deq[i] {
						t.Errorf("deq(-x)[%d] = %g, want %g", i, negDeq[i], -deq[i])
					}
				}
			})
		}
	}
}

func TestNonFiniteInput(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		for _, s := range Schemes {
			w := weights(3, 3*50)
			w[1*50+37] = bad
			w[2*50+3] = bad // a later one must not be the one reported
			_, err := Quantize(s, w, 3, 50)
			if err == nil || !strings.Contains(err.Error(), "row 1, col 37") {
				t.Errorf("%s with %v: error %v, want one naming row 1, col 37", s, bad, err)
			}
		}
	}
}

func TestFirstBadPositionAcrossWorkers(t *testing.T) {
	// Many rows so that several goroutines run; the earliest must win.
	w := weights(4, 400*64)
	w[399*64] = float32(math.NaN())
	w[250*64+63] = float32(math.Inf(1))
	_, err := Quantize(Q4, w, 400, 64)
	if err == nil || !strings.Contains(err.Error(), "row 250, col 63") {
		t.Errorf("error %v, want one naming row 250, col 63", err)
	}
}

func TestArgumentErrors(t *testing.T) {
	blob, _ := Quantize(Q8, make([]float32, 64), 2, 32)
	dst := make([]float32, 64)
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"short weights", second(Quantize(Q8, make([]float32, 63), 2, 32)), "needs 64 weights, got 63"},
		{"bad scheme", second(Quantize("int8", nil, 1, 1)), `"int8"`},
		{"short blob", Dequantize(Q8, blob[:71], 2, 32, dst), "must be 72 bytes, got 71"},
		{"wrong scheme for blob", Dequantize(Q4, blob, 2, 32, dst), "must be 40 bytes, got 72"},
		{"short dst", Dequantize(Q8, blob, 2, 32, dst[:10]), "dst of 64, got 10"},
	}
	for _, tt := range tests {
		if tt.err == nil || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to contain %q", tt.name, tt.err, tt.want)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestDequantizeRow(t *testing.T) {
	const rows, cols = 5, 70
	w := weights(5, rows*cols)
	for _, s := range Schemes {
		l, _ := NewLayout(s, rows, cols)
		blob, deq := roundTrip(t, s, w, rows, cols)
		row := make([]float32, cols)
		for r := range rows {
			if err := l.DequantizeRow(blob, r, row); err != nil {
				t.Fatal(err)
			}
			for c, v := range row {
				if math.Float32bits(v) != math.Float32bits(deq[r*cols+c]) {
					t.Fatalf("%s row %d col %d: %g vs Dequantize %g", s, r, c, v, deq[r*cols+c])
				}
			}
		}
		if err := l.DequantizeRow(blob, rows, row); err == nil {
			t.Errorf("%s DequantizeRow accepted row %d of %d", s, rows, rows)
		}
	}
}

// TestCodesOutsideEncoderRange documents that decoding follows the formulas
// even for codes the encoder never writes, as the shader would.
func TestCodesOutsideEncoderRange(t *testing.T) {
	for _, tt := range []struct {
		s    Scheme
		want float32
	}{{Q8, -128}, {Q6, -32}, {Q4, -8}} {
		l, _ := NewLayout(tt.s, 1, 32)
		blob := make([]byte, l.Bytes())
		if tt.s == Q8 {
			blob[0] = 0x80
		}
		blob[l.QuantBytes()+1] = 0x3C // scale 1.0
		deq := make([]float32, 32)
		if err := Dequantize(tt.s, blob, 1, 32, deq); err != nil {
			t.Fatal(err)
		}
		if deq[0] != tt.want {
			t.Errorf("%s: code 0 decodes to %g, want %g", tt.s, deq[0], tt.want)
		}
	}
}
