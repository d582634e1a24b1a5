package exl3

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func TestParseFormat(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Format
		err  string
	}{
		{in: "exl3-k4", want: Format{4, MCG}},
		{in: "exl3-k6-mcg", want: Format{6, MCG}},
		{in: "exl3-k1-3inst", want: Format{1, Inst3}},
		{in: "exl3-k8-mul1", want: Format{8, MUL1}},
		{in: "exl3-k9", err: `exl3: format "exl3-k9": "9" bits per weight: want 1 to 8`},
		{in: "exl3-k0-mcg", err: `exl3: format "exl3-k0-mcg": "0" bits per weight: want 1 to 8`},
		{in: "exl3-k4-mul2", err: `exl3: format "exl3-k4-mul2": codebook "mul2": want 3inst, mcg or mul1`},
		{in: "q4", err: `exl3: format "q4": want exl3-kK or exl3-kK-CODEBOOK (K 1 to 8; CODEBOOK 3inst, mcg or mul1)`},
	} {
		got, err := ParseFormat(c.in)
		if fmt.Sprint(err) != c.err && (err != nil || c.err != "") {
			t.Errorf("ParseFormat(%q): error %v, want %s", c.in, err, c.err)
		}
		if err == nil && got != c.want {
			t.Errorf("ParseFormat(%q) = %v, want %v", c.in, got, c.want)
		}
		if err == nil {
			if back, _ := ParseFormat(got.String()); back != got {
				t.Errorf("%v reads back as %v", got, back)
			}
		}
	}
}

// DecodeColumns gives Inner's values bit for bit, for every codebook and
// every K, on any band of whole tiles' columns.
func TestDecodeColumnsIsInner(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, cb := range []Codebook{Inst3, MCG, MUL1} {
		for k := 1; k <= 8; k++ {
			l := randomLayer(rng, 256, 384, k, cb)
			inner, err := l.Inner()
			if err != nil {
				t.Fatal(err)
			}
			f := Format{k, cb}
			trellis := l.Blob()[:f.TrellisBytes(l.In, l.Out)]
			for _, band := range [][2]int{{0, l.Out}, {48, 64}, {368, 384}} {
				dst := make([]float32, (band[1]-band[0])*l.In)
				f.DecodeColumns(trellis, l.In, l.Out, band[0], band[1], dst)
				for c := band[0]; c < band[1]; c++ {
					for r := range l.In {
						want := float32(f16(inner[r*l.Out+c]))
						if got := dst[(c-band[0])*l.In+r]; math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("%v: Ŵ[%d][%d] = %g, Inner has %g", f, r, c, got, want)
						}
					}
				}
			}
		}
	}
}

// A blob holds the three tensors back to back, padded, and reads back.
func TestBlob(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	l := randomLayer(rng, 256, 128, 5, MUL1)
	f := Format{5, MUL1}
	// A 200×100 layer pads to 256×128.
	b := l.Blob()
	if int64(len(b)) != f.Bytes(200, 100) {
		t.Fatalf("blob of %d bytes, Bytes says %d", len(b), f.Bytes(200, 100))
	}
	back, err := FromBlob(b, 200, 100, f)
	if err != nil {
		t.Fatal(err)
	}
	if sum(back.Trellis) != sum(l.Trellis) || sum(back.Suh) != sum(l.Suh) || sum(back.Svh) != sum(l.Svh) || back.In != 256 || back.Out != 128 {
		t.Error("the blob reads back as another layer")
	}
	suh, svh := f.Scales(b, 200, 100)
	if len(suh) != 256 || len(svh) != 128 || suh[3] != float32(f16(l.Suh[3])) || svh[127] != float32(f16(l.Svh[127])) {
		t.Error("Scales are not suh and svh widened")
	}
	if _, err := FromBlob(b[1:], 200, 100, f); err == nil {
		t.Error("a short blob was taken")
	}
}

// Hadamard32 is the float64 transform to float32 rounding, and its own
// inverse to within it.
func TestHadamard32(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	x := make([]float32, 256)
	x64 := make([]float64, 256)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
		x64[i] = float64(x[i])
	}
	orig := append([]float32(nil), x...)
	Hadamard32(x)
	hadamard(x64)
	for i := range x {
		if math.Abs(float64(x[i])-x64[i]) > 1e-5 {
			t.Fatalf("[%d] = %g, float64 gives %g", i, x[i], x64[i])
		}
	}
	Hadamard32(x)
	for i := range x {
		if math.Abs(float64(x[i]-orig[i])) > 1e-5 {
			t.Fatalf("H·H·x [%d] = %g, want %g", i, x[i], orig[i])
		}
	}
}
