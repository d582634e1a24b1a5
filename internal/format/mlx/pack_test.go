package mlx

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// extractBits transcribes MLX's extract_bits (mlx/backend/cpu/quantized.cpp)
// for one pack: the masks and shifts as MLX writes them.
func extractBits(in []byte, bits int) []int {
	w := func(i int) int { return int(in[i]) }
	switch bits {
	case 3:
		return []int{
			w(0) & 0x7, (w(0) & 0x38) >> 3, ((w(0) & 0xc0) >> 6) + ((w(1) & 0x1) << 2), (w(1) & 0xe) >> 1,
			(w(1) & 0x70) >> 4, ((w(1) & 0x80) >> 7) + ((w(2) & 0x3) << 1), (w(2) & 0x1c) >> 2, (w(2) & 0xe0) >> 5,
		}
	case 5:
		return []int{
			w(0) & 0x1f, ((w(0) & 0xe0) >> 5) + ((w(1) & 0x3) << 3), (w(1) & 0x7c) >> 2, ((w(1) & 0x80) >> 7) + ((w(2) & 0xf) << 1),
			((w(2) & 0xf0) >> 4) + ((w(3) & 0x1) << 4), (w(3) & 0x3e) >> 1, ((w(3) & 0xc0) >> 6) + ((w(4) & 0x7) << 2), (w(4) & 0xf8) >> 3,
		}
	case 6:
		return []int{
			w(0) & 0x3f, ((w(0) >> 6) & 0x03) + ((w(1) & 0x0f) << 2), ((w(1) >> 4) & 0x0f) + ((w(2) & 0x03) << 4), (w(2) >> 2) & 0x3f,
		}
	}
	// 2, 4 and 8 bits: 32/bits codes in a little-endian uint32, the first
	// in the low bits (MLX's qdot shifts and masks).
	word := binary.LittleEndian.Uint32(in)
	var out []int
	for k := range 32 / bits {
		out = append(out, int(word>>(k*bits))&(1<<bits-1))
	}
	return out
}

// TestUnpackMatchesMLX checks unpack, on random rows, against the
// transcription of MLX's own unpacking, pack by pack.
func TestUnpackMatchesMLX(t *testing.T) {
	packs := map[int][2]int{2: {16, 4}, 3: {8, 3}, 4: {8, 4}, 5: {8, 5}, 6: {4, 3}, 8: {4, 4}} // codes, bytes
	rng := rand.New(rand.NewPCG(1, 2))
	for bits, p := range packs {
		row := make([]byte, 120) // whole packs for every width: 120 = 2·lcm(3, 4, 5)
		for i := range row {
			row[i] = byte(rng.IntN(256))
		}
		n := len(row) / p[1] * p[0]
		to := 8
		if bits <= 4 {
			to = 4
		}
		got := make([]byte, (n*to+7)/8)
		unpack(row, bits, got, to, n)
		for c := range n {
			want := extractBits(row[c/p[0]*p[1]:], bits)[c%p[0]]
			var q int
			if to == 4 {
				q = int(got[c/2]>>(4*(c%2))) & 15
			} else {
				q = int(got[c])
			}
			if q != want {
				t.Fatalf("%d-bit code %d = %d, MLX's extract_bits gives %d", bits, c, q, want)
			}
		}
		// pack is unpack's inverse.
		codes := make([]byte, n)
		for c := range codes {
			codes[c] = byte(extractBits(row[c/p[0]*p[1]:], bits)[c%p[0]])
		}
		if back := pack(nil, codes, bits); string(back) != string(row[:n*bits/8]) {
			t.Errorf("%d-bit: pack(unpack(row)) differs from row", bits)
		}
	}
}
