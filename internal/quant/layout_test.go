package quant

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestParseScheme(t *testing.T) {
	for _, s := range []string{"q8", "q6", "q4"} {
		if got, err := ParseScheme(s); err != nil || string(got) != s {
			t.Errorf("ParseScheme(%q) = %q, %v", s, got, err)
		}
	}
	_, err := ParseScheme("q5")
	if err == nil || !strings.Contains(err.Error(), `"q5"`) || !strings.Contains(err.Error(), "q8, q6, q4") {
		t.Errorf("ParseScheme(q5) error %v should name the value and the valid ones", err)
	}
}

func TestNewLayout(t *testing.T) {
	tests := []struct {
		s                Scheme
		rows, cols       int
		groups, qw, sw   int
		rowBytes, nbytes int
	}{
		{Q8, 1, 32, 1, 8, 1, 36, 36},
		{Q4, 2, 40, 2, 8, 1, 36, 72},
		{Q6, 3, 70, 3, 18, 2, 80, 240},
		{Q4, 896, 896, 28, 112, 14, 504, 896 * 504},
		{Q8, 0, 64, 2, 16, 1, 68, 0},
	}
	for _, tt := range tests {
		l, err := NewLayout(tt.s, tt.rows, tt.cols)
		if err != nil {
			t.Fatal(err)
		}
		got := []int{l.Groups, l.QuantWordsPerRow, l.ScaleWordsPerRow, l.RowBytes(), l.Bytes()}
		want := []int{tt.groups, tt.qw, tt.sw, tt.rowBytes, tt.nbytes}
		if !slices.Equal(got, want) {
			t.Errorf("%s (%d, %d): groups, qw, sw, rowBytes, bytes = %v, want %v", tt.s, tt.rows, tt.cols, got, want)
		}
	}
	for _, bad := range [][2]int{{-1, 32}, {1, 0}} {
		if _, err := NewLayout(Q8, bad[0], bad[1]); err == nil {
			t.Errorf("NewLayout(%v) accepted a bad shape", bad)
		}
	}
	if _, err := NewLayout("q3", 1, 1); err == nil {
		t.Error("NewLayout accepted scheme q3")
	}
}

// TestGoldenWords pins the layout with words written out by hand. Every group
// is chosen so that its scale is exactly 1.0 (f16 0x3C00): amax == qmax.
func TestGoldenWords(t *testing.T) {
	seq := func(f func(j int) float32) []float32 {
		w := make([]float32, 32)
		for j := range w {
			w[j] = f(j)
		}
		return w
	}
	tests := []struct {
		name string
		s    Scheme
		w    []float32
		cols int
		want []uint32
	}{
		{
			// q = -127, 1, 2, ..., 31 -> bytes 0x81 0x01 0x02 ...
			name: "q8 one group", s: Q8, cols: 32,
			w: seq(func(j int) float32 {
				if j == 0 {
					return -127
				}
				return float32(j)
			}),
			want: []uint32{
				0x03020181, 0x07060504, 0x0B0A0908, 0x0F0E0D0C,
				0x13121110, 0x17161514, 0x1B1A1918, 0x1F1E1D1C,
				0x00003C00,
			},
		},
		{
			// q = j%15 - 7, so u = j%15 + 1
			name: "q4 one group", s: Q4, cols: 32,
			w:    seq(func(j int) float32 { return float32(j%15 - 7) }),
			want: []uint32{0x87654321, 0x1FEDCBA9, 0x98765432, 0x21FEDCBA, 0x00003C00},
		},
		{
			// q = -31, then j-16: u = 1, 17..47
			name: "q6 one group", s: Q6, cols: 32,
			w: seq(func(j int) float32 {
				if j == 0 {
					return -31
				}
				return float32(j - 16)
			}),
			want: []uint32{
				0x76543211, 0xFEDCBA98, 0x76543210, 0xFEDCBA98, // low nibbles
				0x55555554, 0xAAAAAAAA, // high 2 bits
				0x00003C00,
			},
		},
		{
			// 40 cols: group 1 has 8 real values and 24 zeros of padding
			// (u = 8 each). Group 1's amax is 14 -> scale 2.0 = 0x4000 in the high half.
			name: "q4 padded row", s: Q4, cols: 40,
			w: append(seq(func(j int) float32 { return float32(j%15 - 7) }),
				14, -14, 2, -2, 3, 0, 0, 0),
			want: []uint32{
				0x87654321, 0x1FEDCBA9, 0x98765432, 0x21FEDCBA,
				// codes 7,-7,1,-1,2(3/2=1.5 rounds away),0,0,0 -> u 15,1,9,7,10,8,8,8
				0x888A791F, 0x88888888, 0x88888888, 0x88888888,
				0x40003C00,
			},
		},
		{
			// 70 cols, odd G = 3: the second scale word has a zero high half.
			// Group 0 is all zero (scale 0). Group 1 is j-16 with 31.75 last:
			// amax 31.75 = 127*0.25 -> scale 0.25 (0x3400), q = 4j-64 and 127.
			// Group 2 has 6 values with amax 63.5 -> scale 0.5 (0x3800); its
			// 0.25, -0.25 and 0.75 are ties and round away from zero.
			name: "q8 odd groups", s: Q8, cols: 70,
			w: append(append(make([]float32, 32), seq(func(j int) float32 {
				if j == 31 {
					return 31.75
				}
				return float32(j - 16)
			})...), -63.5, 1, 0.25, -0.25, 0.75, 63.5),
			want: []uint32{
				0, 0, 0, 0, 0, 0, 0, 0,
				0xCCC8C4C0, 0xDCD8D4D0, 0xECE8E4E0, 0xFCF8F4F0,
				0x0C080400, 0x1C181410, 0x2C282420, 0x7F383430,
				// q = -127, 2, 1, -1, 2, 127
				0xFF010281, 0x00007F02, 0, 0, 0, 0, 0, 0,
				0x34000000, 0x00003800,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			blob, err := Quantize(tt.s, tt.w, 1, tt.cols)
			if err != nil {
				t.Fatal(err)
			}
			if got := toWords(blob); !slices.Equal(got, tt.want) {
				t.Errorf("words\n got %08X\nwant %08X", got, tt.want)
			}
			if ref := refEncode(t, tt.s, tt.w, 1, tt.cols); !slices.Equal(ref, tt.want) {
				t.Errorf("naive reference disagrees with the hand-written words\n ref %08X\nwant %08X", ref, tt.want)
			}
		})
	}
}

// TestMatchesNaiveReference checks the encoder against the bit-by-bit one on
// random shapes that cover padding, odd and even group counts.
func TestMatchesNaiveReference(t *testing.T) {
	for _, s := range Schemes {
		for _, shape := range [][2]int{{1, 1}, {2, 31}, {3, 33}, {5, 64}, {4, 70}, {7, 100}, {9, 129}} {
			rows, cols := shape[0], shape[1]
			w := weights(uint64(rows*1000+cols), rows*cols)
			blob, err := Quantize(s, w, rows, cols)
			if err != nil {
				t.Fatal(err)
			}
			if ref := refEncode(t, s, w, rows, cols); !slices.Equal(toWords(blob), ref) {
				t.Errorf("%s (%d, %d): encoder differs from the naive reference", s, rows, cols)
			}
		}
	}
}

// TestRowRange is the property the variant writer relies on to split big
// tensors: rows [a, b) quantized alone equal the matching slices of both
// regions of the whole blob.
func TestRowRange(t *testing.T) {
	const rows, cols = 11, 70
	w := weights(7, rows*cols)
	for _, s := range Schemes {
		l, _ := NewLayout(s, rows, cols)
		whole, err := Quantize(s, w, rows, cols)
		if err != nil {
			t.Fatal(err)
		}
		for _, ab := range [][2]int{{0, 11}, {0, 1}, {3, 8}, {10, 11}, {5, 5}} {
			a, b := ab[0], ab[1]
			part, err := Quantize(s, w[a*cols:b*cols], b-a, cols)
			if err != nil {
				t.Fatal(err)
			}
			qw, sw := 4*l.QuantWordsPerRow, 4*l.ScaleWordsPerRow
			wantQ := whole[a*qw : b*qw]
			wantS := whole[l.QuantBytes()+a*sw : l.QuantBytes()+b*sw]
			if !bytes.Equal(part[:(b-a)*qw], wantQ) || !bytes.Equal(part[(b-a)*qw:], wantS) {
				t.Errorf("%s rows [%d, %d): standalone blob differs from the whole tensor's", s, a, b)
			}
			sliced, err := l.SliceRows(whole, a, b)
			if err != nil || !bytes.Equal(sliced, part) {
				t.Errorf("%s SliceRows(%d, %d) differs from quantizing the rows alone (err %v)", s, a, b, err)
			}
		}
		if _, err := l.SliceRows(whole, 4, 12); err == nil {
			t.Errorf("%s SliceRows accepted rows [4, 12) of 11", s)
		}
	}
}
