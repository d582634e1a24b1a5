package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLossyUTF8(t *testing.T) {
	const r = "\uFFFD"
	tests := []struct {
		in, want string
	}{
		{"", ""},
		{"plain ascii", "plain ascii"},
		{"é中😀", "é中😀"},
		{"\uFFFD", "\uFFFD"}, // a real U+FFFD is valid
		// Unicode's own example (Table 3-8): F1 80 80 and E1 80 are
		// truncated sequences, one U+FFFD each; C2 alone is one more.
		{"a\xF1\x80\x80\xE1\x80\xC2b\x80c\x80\xBFd", "a" + r + r + r + "b" + r + "c" + r + r + "d"},
		{"\xC0\xAF", r + r},                       // overlong lead bytes are never valid
		{"\xE0\x80\xAF", r + r + r},               // E0 needs A0..BF next
		{"\xED\xA0\x80", r + r + r},               // surrogates: ED needs 80..9F next
		{"\xF4\x90\x80\x80", r + r + r + r},       // above U+10FFFF
		{"\xF5\x80", r + r},                       // F5..FF never start a sequence
		{"\xF0\x9F\x98", r},                       // a truncated emoji is one subpart
		{"\xF0\x9F\x98x", r + "x"},                //
		{"\xF0\x9F\x98\xF0\x9F\x98\x80", r + "😀"}, //
		{"\xE2\x82", r},
		{"\xE2\x82\xAC", "€"},
		{"\x80\x80\x80", r + r + r}, // each stray continuation byte
		{"\xFF\xFE", r + r},
		{"x\xC3", "x" + r},
	}
	for _, tt := range tests {
		got := lossyUTF8([]byte(tt.in))
		if got != tt.want {
			t.Errorf("lossyUTF8(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("lossyUTF8(%q) is not valid UTF-8", tt.in)
		}
	}
	// Why not strings.ToValidUTF8: it merges a run of bad bytes.
	if strings.ToValidUTF8("\x80\x80", r) == lossyUTF8([]byte("\x80\x80")) {
		t.Error("strings.ToValidUTF8 unexpectedly agrees with from_utf8_lossy")
	}
}

func FuzzLossyUTF8(f *testing.F) {
	f.Add([]byte("a\xF1\x80\x80\xE1\x80\xC2b"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := lossyUTF8(b)
		if !utf8.ValidString(got) {
			t.Fatalf("lossyUTF8(%q) = %q is not valid", b, got)
		}
		if utf8.Valid(b) && got != string(b) {
			t.Fatalf("lossyUTF8 changed valid input %q", b)
		}
		// Each replacement stands for 1 to 3 input bytes.
		n := strings.Count(got, "\uFFFD") - strings.Count(string(b), "\uFFFD")
		if n < 0 || len(got)-3*n > len(b) {
			t.Fatalf("lossyUTF8(%q) = %q: odd length", b, got)
		}
	})
}
