package tokenizer

import "unicode/utf8"

// lossyUTF8 converts b to a string the way Rust's String::from_utf8_lossy
// (and so Hugging Face's ByteLevel decoder) does: each maximal subpart of an
// ill-formed sequence becomes one U+FFFD (Unicode §3.9, "U+FFFD Substitution
// of Maximal Subparts"). strings.ToValidUTF8 differs: it folds a whole run
// of bad bytes into one U+FFFD.
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size > 1 {
			out = append(out, b[i:i+size]...)
			i += size
			continue
		}
		out = append(out, "\uFFFD"...)
		i += maximalSubpart(b[i:])
	}
	return string(out)
}

// maximalSubpart returns the length (at least 1) of the longest prefix of b
// that starts a well-formed sequence but does not complete one. It is only
// called where b does not start with a valid sequence.
func maximalSubpart(b []byte) int {
	// The second byte's range depends on the lead (Table 3-7); later
	// continuation bytes are always 80..BF.
	lo, hi, need := byte(0x80), byte(0xBF), 0
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		lo, need = 0xA0, 2
	case c == 0xED:
		hi, need = 0x9F, 2
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		lo, need = 0x90, 3
	case c == 0xF4:
		hi, need = 0x8F, 3
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return 1 // C0, C1, F5..FF and stray continuation bytes
	}
	n := 1
	for ; n <= need && n < len(b); n++ {
		if b[n] < lo || b[n] > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return n
}
