package exl3

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/x448/float16"

	"logitscope/internal/format/safetensors"
)

// golden reads testdata/golden.txt (testdata/golden.py, a transcription
// of exllamav3's decoding in Python): key → sha256.
func golden(t *testing.T) map[string]string {
	t.Helper()
	f, err := os.Open("testdata/golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	g := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) > 0 && f[0] != "#" {
			g[strings.Join(f[:len(f)-1], " ")] = f[len(f)-1]
		}
	}
	return g
}

func sum(w []uint16) string {
	b := make([]byte, 2*len(w))
	for i, x := range w {
		binary.LittleEndian.PutUint16(b[2*i:], x)
	}
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Every state of every codebook decodes to the transcription's fp16 bits.
func TestCodebooksMatchTheTranscription(t *testing.T) {
	g := golden(t)
	for _, cb := range []Codebook{Inst3, MCG, MUL1} {
		w := make([]uint16, 1<<16)
		for s := range w {
			w[s] = cb.Decode(uint16(s))
		}
		if got, want := sum(w), g["codebook "+cb.String()]; got != want {
			t.Errorf("%s: sha256 %s, the transcription's %s", cb, got, want)
		}
	}
}

func TestCodebookValues(t *testing.T) {
	for _, c := range []struct {
		cb   Codebook
		s    uint16
		want uint16
	}{
		{Inst3, 0, 0x3A25}, {Inst3, 1, 0xBB5B}, {Inst3, 2, 0x3B74}, {Inst3, 0x1234, 0xC066}, {Inst3, 0xFFFF, 0xB110},
		{MCG, 0, 0x3F60}, {MCG, 1, 0x304E}, {MCG, 0x1234, 0x3E0F}, {MCG, 0xFFFF, 0x3ACD},
		{MUL1, 0, 0xC2E8}, {MUL1, 1, 0x3921}, {MUL1, 0x1234, 0xB89E}, {MUL1, 0xFFFF, 0xB936},
	} {
		if got := c.cb.Decode(c.s); got != c.want {
			t.Errorf("%s(%#04x) = %#04x, want %#04x", c.cb, c.s, got, c.want)
		}
	}
	// The encoder scales weights by 3INST's standard deviation over all
	// states (exllamav3's codebook_scale, 1.24371088).
	var s1, s2 float64
	for s := range 1 << 16 {
		v := f16(Inst3.Decode(uint16(s)))
		s1, s2 = s1+v, s2+v*v
	}
	n := float64(1 << 16)
	if sd := math.Sqrt(s2/n - (s1/n)*(s1/n)); math.Abs(sd-1.24371088) > 1e-6 {
		t.Errorf("3INST's standard deviation %.8f, want 1.24371088", sd)
	}
}

// A tile of every K and codebook decodes to the transcription's weights.
func TestDecodeTileMatchesTheTranscription(t *testing.T) {
	g := golden(t)
	for k := 1; k <= 8; k++ {
		tile := make([]uint16, 16*k)
		for j := range tile {
			tile[j] = uint16((j+1)*40503 + k*7919)
		}
		for _, cb := range []Codebook{Inst3, MCG, MUL1} {
			w, err := DecodeTile(tile, k, cb)
			if err != nil {
				t.Fatal(err)
			}
			key := fmt.Sprintf("tile %d %s", k, cb)
			if got, want := sum(w[:]), g[key]; got != want {
				t.Errorf("%s: sha256 %s, the transcription's %s", key, got, want)
			}
		}
	}
}

// Position visits every element of the tile once.
func TestPositionIsAPermutation(t *testing.T) {
	seen := map[[2]int]bool{}
	for p := range TileWeights {
		r, c := Position(p)
		if r < 0 || r > 15 || c < 0 || c > 15 || seen[[2]int{r, c}] {
			t.Fatalf("position %d: (%d, %d)", p, r, c)
		}
		seen[[2]int{r, c}] = true
	}
	if r, c := Position(7); r != 9 || c != 8 {
		t.Errorf("position 7 is (%d, %d), want (9, 8)", r, c)
	}
}

// Any tile's states pack back into the same tile: the stream is all the
// states hold.
func TestPackIsStatesInverse(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for k := 1; k <= 8; k++ {
		for range 20 {
			tile := make([]uint16, 16*k)
			for j := range tile {
				tile[j] = uint16(rng.Uint32())
			}
			s, err := States(tile, k)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Pack(s, k)
			if err != nil {
				t.Fatal(err)
			}
			for j := range tile {
				if back[j] != tile[j] {
					t.Fatalf("k %d: word %d packs back as %#04x, was %#04x", k, j, back[j], tile[j])
				}
			}
			// Each state holds the one before it shifted by k bits.
			for p := 1; p < TileWeights; p++ {
				if s[p]>>k != s[p-1]&(1<<(16-k)-1) {
					t.Fatalf("k %d: state %d %#04x does not follow %#04x", k, p, s[p], s[p-1])
				}
			}
			if s[0]>>k != s[TileWeights-1]&(1<<(16-k)-1) {
				t.Fatalf("k %d: the path does not bite its tail", k)
			}
		}
	}
}

func TestTileErrors(t *testing.T) {
	for _, c := range []struct {
		k, words int
		want     string
	}{
		{0, 0, "0 bits per weight"},
		{9, 144, "9 bits per weight"},
		{4, 63, "a tile of 4 bits per weight is 64 int16 words, got 63"},
	} {
		if _, err := DecodeTile(make([]uint16, c.words), c.k, Inst3); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("k %d, %d words: %v, want %q", c.k, c.words, err, c.want)
		}
	}
	if _, err := Pack([TileWeights]uint16{}, 0); err == nil {
		t.Error("Pack took 0 bits per weight")
	}
}

// toF16 rounds as x448/float16 does wherever float32 holds the value
// (every fp16 bit pattern, and values between them).
func TestToF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for h := range 1 << 16 {
		v := f16(uint16(h))
		if math.IsNaN(v) {
			continue
		}
		if got := toF16(v); got != uint16(h) && !(v == 0 && got&0x7FFF == 0) {
			t.Fatalf("toF16(f16(%#04x)) = %#04x", h, got)
		}
		x := float32(v) * (1 + float32(rng.Float64()-0.5)/512)
		if got, want := toF16(float64(x)), float16.Fromfloat32(x).Bits(); got != want {
			t.Fatalf("toF16(%g) = %#04x, float16 says %#04x", x, got, want)
		}
	}
}

func FuzzDecodeTile(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4}, 4, 0)
	f.Fuzz(func(t *testing.T, data []byte, k, cb int) {
		tile := make([]uint16, len(data)/2)
		for i := range tile {
			tile[i] = binary.LittleEndian.Uint16(data[2*i:])
		}
		w, err := DecodeTile(tile, k, Codebook(cb%3))
		if err == nil && (k < 1 || k > 8 || len(tile) != 16*k) {
			t.Fatalf("k %d, %d words decoded", k, len(tile))
		}
		for _, x := range w {
			if err == nil && x&0x7C00 == 0x7C00 {
				t.Fatalf("a codebook decoded to %#04x", x)
			}
		}
	})
}

// randomLayer is a layer of random tiles and sign×scale vectors.
func randomLayer(rng *rand.Rand, in, out, k int, cb Codebook) Layer {
	l := Layer{In: in, Out: out, K: k, Codebook: cb, Trellis: make([]uint16, in/16*out/16*16*k), Suh: make([]uint16, in), Svh: make([]uint16, out)}
	for i := range l.Trellis {
		l.Trellis[i] = uint16(rng.Uint32())
	}
	for i := range l.Suh {
		l.Suh[i] = toF16((rng.Float64() + 0.5) * float64(1-2*rng.IntN(2)) * 0.01)
	}
	for i := range l.Svh {
		l.Svh[i] = toF16((rng.Float64() + 0.5) * float64(1-2*rng.IntN(2)))
	}
	return l
}

// Inner places tile (tk, tn) at rows 16tk… and columns 16tn…, Exact is
// diag(suh)·H·Ŵ·H·diag(svh) and Dense is it to within its fp16 roundings.
func TestLayerDense(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	l := randomLayer(rng, 256, 128, 3, MCG)
	inner, err := l.Inner()
	if err != nil {
		t.Fatal(err)
	}
	per := 16 * l.K
	tile, _ := DecodeTile(l.Trellis[(1*(l.Out/16)+5)*per:][:per], l.K, l.Codebook) // tile (1, 5)
	for r := range 16 {
		for c := range 16 {
			if inner[(16+r)*l.Out+80+c] != tile[16*r+c] {
				t.Fatalf("Ŵ[%d][%d] is not tile (1, 5)'s [%d][%d]", 16+r, 80+c, r, c)
			}
		}
	}
	got, err := l.Dense()
	if err != nil {
		t.Fatal(err)
	}
	// In float64 throughout: H·Ŵ·H by the definition of H, then scaled.
	h := func(i, j int) float64 {
		if i/128 != j/128 {
			return 0
		}
		s := 1.0
		for x := i % 128 & (j % 128); x != 0; x &= x - 1 {
			s = -s
		}
		return s / math.Sqrt(128)
	}
	hw := make([]float64, l.In*l.Out)
	for r := range l.In {
		for c := range l.Out {
			for j := r / 128 * 128; j < r/128*128+128; j++ {
				hw[r*l.Out+c] += h(r, j) * f16(inner[j*l.Out+c])
			}
		}
	}
	// Errors against the matrix's RMS: a Hadamard sums 128 terms, so an
	// element near 0 carries the roundings of terms of the RMS's size.
	exact := make([]float64, l.In*l.Out)
	var rms float64
	for r := range l.In {
		for c := range l.Out {
			var v float64
			for j := c / 128 * 128; j < c/128*128+128; j++ {
				v += hw[r*l.Out+j] * h(j, c)
			}
			exact[r*l.Out+c] = v * f16(l.Suh[r]) * f16(l.Svh[c])
			rms += exact[r*l.Out+c] * exact[r*l.Out+c]
		}
	}
	rms = math.Sqrt(rms / float64(len(exact)))
	exact2, err := l.Exact()
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range exact {
		if math.Abs(exact2[i]-v) > 1e-12*rms {
			t.Fatalf("Exact()[%d] = %g, the definition gives %g", i, exact2[i], v)
		}
	}
	var worst float64
	for i, v := range exact {
		worst = max(worst, math.Abs(float64(got[i])-v)/rms)
	}
	t.Logf("Dense against the exact product: worst error %.3g of the RMS", worst)
	if worst > 16*0x1p-11 { // three fp16 roundings of elements up to a few times the RMS
		t.Errorf("Dense is %.3g of the RMS off the exact product: more than its fp16 roundings", worst)
	}
	for _, bad := range []Layer{{In: 100, Out: 128, K: 2}, {In: 128, Out: 128, K: 2, Trellis: make([]uint16, 10)}} {
		if _, err := bad.Dense(); err == nil {
			t.Errorf("%d×%d with %d words was taken", bad.In, bad.Out, len(bad.Trellis))
		}
	}
	l.Svh = l.Svh[:1]
	if _, err := l.Dense(); err == nil || !strings.Contains(err.Error(), "svh of 1") {
		t.Errorf("a short svh: %v", err)
	}
}

// writeLayer writes l under prefix as exllamav3 stores it, with extra
// tensors, and opens the file.
func writeLayer(t *testing.T, l Layer, prefix string, extra ...safetensors.Tensor) *safetensors.File {
	t.Helper()
	ts := append(l.Tensors(prefix)[:3:3], extra...) // the markers as the case gives them
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := safetensors.WriteFile(path, ts, nil); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// Older files pack suh and svh as sign bits, su and sv: the lowest bit
// first, set for −1.
func TestReadLayerPackedSigns(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	const p = "model.layers.1.self_attn.o_proj"
	l := randomLayer(rng, 128, 256, 3, MCG)
	packed := func(n int) ([]byte, []uint16) {
		b, want := make([]byte, n/8), make([]uint16, n)
		for i := range want {
			want[i] = 0x3C00
			if rng.IntN(2) == 1 {
				b[i/8] |= 1 << (i % 8)
				want[i] = 0xBC00
			}
		}
		return b, want
	}
	su, suh := packed(l.In)
	sv, svh := packed(l.Out)
	ts := append(l.Tensors(p)[:1:1], l.Tensors(p)[3:]...) // the trellis and the marker, no suh/svh
	ts = append(ts, safetensors.Tensor{Name: p + ".su", DType: safetensors.I16, Shape: []int{l.In / 16}, Data: su},
		safetensors.Tensor{Name: p + ".sv", DType: safetensors.I16, Shape: []int{l.Out / 16}, Data: sv})
	path := filepath.Join(t.TempDir(), "model.safetensors")
	if err := safetensors.WriteFile(path, ts, nil); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := ReadLayer(f, p)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Suh, suh) || !slices.Equal(got.Svh, svh) || !slices.Equal(got.Trellis, l.Trellis) || got.Codebook != MCG {
		t.Error("the packed signs did not unpack to ±1 in order")
	}
}

func TestReadLayer(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const p = "model.layers.0.mlp.experts.3.down_proj"
	i32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	for _, c := range []struct {
		cb    Codebook
		extra []safetensors.Tensor
	}{
		{Inst3, nil},
		{MCG, []safetensors.Tensor{{Name: p + ".mcg", DType: safetensors.I32, Shape: []int{}, Data: i32(mcgMultiplier)}}},
		{MUL1, []safetensors.Tensor{{Name: p + ".mul1", DType: safetensors.I32, Shape: []int{}, Data: i32(mul1Multiplier)}}},
	} {
		want := randomLayer(rng, 128, 256, 4, c.cb)
		got, err := ReadLayer(writeLayer(t, want, p, c.extra...), p)
		if err != nil {
			t.Fatal(err)
		}
		if got.In != 128 || got.Out != 256 || got.K != 4 || got.Codebook != c.cb || !slices.Equal(got.Trellis, want.Trellis) ||
			!slices.Equal(got.Suh, want.Suh) || !slices.Equal(got.Svh, want.Svh) {
			t.Errorf("%s: read back %d×%d K %d %s", c.cb, got.In, got.Out, got.K, got.Codebook)
		}
	}
	l := randomLayer(rng, 128, 128, 2, Inst3)
	for _, c := range []struct {
		name string
		f    *safetensors.File
		want string
	}{
		{"no layer", writeLayer(t, l, "other"), "no " + p + ".trellis: not an EXL3 layer"},
		{"half-integer K", writeLayer(t, l, "other", safetensors.Tensor{Name: p + ".trellis", DType: safetensors.I16, Shape: []int{8, 8, 40}, Data: make([]byte, 2*64*40)}), "a half-integer bitrate"},
		{"no scales", writeLayer(t, l, "other", l.Tensors(p)[0]), "no " + p + ".suh nor " + p + ".su"},
		{"another multiplier", writeLayer(t, l, p, safetensors.Tensor{Name: p + ".mcg", DType: safetensors.I32, Shape: []int{}, Data: i32(12345)}), "mcg multiplier 0x00003039"},
		{"two codebooks", writeLayer(t, l, p, safetensors.Tensor{Name: p + ".mcg", DType: safetensors.I32, Shape: []int{}, Data: i32(mcgMultiplier)},
			safetensors.Tensor{Name: p + ".mul1", DType: safetensors.I32, Shape: []int{}, Data: i32(mul1Multiplier)}), "which codebook"},
		{"short suh", writeLayer(t, Layer{In: 128, Out: 128, K: 2, Trellis: l.Trellis, Suh: l.Suh[:64], Svh: l.Svh}, p), ".suh holds 64 values, want 128"},
		{"9 bits", writeLayer(t, Layer{In: 128, Out: 128, K: 9, Trellis: make([]uint16, 64*16*9), Suh: l.Suh, Svh: l.Svh}, p), "at 9 bits per weight"},
	} {
		if _, err := ReadLayer(c.f, p); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "model.safetensors") {
			t.Errorf("%s: %v, want an error naming the file and %q", c.name, err, c.want)
		}
	}
}

// The encoder's tile decodes to the weights it reports (its path bites
// its tail, so the packed stream holds it), and more bits fit the target
// better: Gaussian weights of the codebook's scale.
func TestEncodeTile(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	var w [TileWeights]float32
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 1.24)
	}
	for _, cb := range []Codebook{Inst3, MCG, MUL1} {
		scale := 1.24
		if cb == MUL1 {
			scale = 1.0
		}
		var x [TileWeights]float32
		for i := range w {
			x[i] = w[i] * float32(scale/1.24)
		}
		last := math.Inf(1)
		for _, k := range []int{1, 2, 4, 6, 8} {
			tile, sq, err := EncodeTile(&x, k, cb)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeTile(tile, k, cb)
			if err != nil {
				t.Fatal(err)
			}
			var check float64
			for i, h := range got {
				d := f16(h) - float64(x[i])
				check += d * d
			}
			if math.Abs(check-sq) > 1e-3*sq+1e-9 {
				t.Fatalf("%s k %d: the tile decodes to a squared error of %g, the encoder reported %g", cb, k, check, sq)
			}
			mse := sq / TileWeights / (scale * scale)
			t.Logf("%s k %d: relative MSE %.5f", cb, k, mse)
			if mse >= last {
				t.Errorf("%s k %d: relative MSE %.5f is no better than with fewer bits (%.5f)", cb, k, mse, last)
			}
			last = mse
		}
		if last > 0.001 {
			t.Errorf("%s at 8 bits: relative MSE %.5f", cb, last)
		}
	}
	if _, _, err := EncodeTile(&w, 9, Inst3); err == nil {
		t.Error("9 bits were taken")
	}
}

// A layer encoded and decoded again (Dense) is the weights it was made
// from, within the tiles' error: the rotations and scales undo exactly.
func TestEncodeLayer(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const in, out = 128, 128
	w := make([]float32, in*out)
	var norm float64
	for r := range in {
		scale := 0.01 * math.Exp(rng.NormFloat64()) // rows of unequal size
		for c := range out {
			w[r*out+c] = float32(rng.NormFloat64() * scale)
			norm += float64(w[r*out+c]) * float64(w[r*out+c])
		}
	}
	last := math.Inf(1)
	for _, k := range []int{2, 4} {
		l, err := EncodeLayer(w, in, out, k, MCG, 1)
		if err != nil {
			t.Fatal(err)
		}
		d, err := l.Dense()
		if err != nil {
			t.Fatal(err)
		}
		var e float64
		for i := range w {
			e += (float64(d[i]) - float64(w[i])) * (float64(d[i]) - float64(w[i]))
		}
		rel := math.Sqrt(e / norm)
		t.Logf("k %d: relative error %.4f", k, rel)
		if rel >= last || rel > 2*math.Pow(2, -float64(k)) {
			t.Errorf("k %d: relative error %.4f (fewer bits: %.4f)", k, rel, last)
		}
		last = rel
	}
	if _, err := EncodeLayer(w, 100, 128, 4, MCG, 1); err == nil {
		t.Error("a layer of 100 rows was taken")
	}
}
