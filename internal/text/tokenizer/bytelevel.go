package tokenizer

import "unicode/utf8"

// byteRune is GPT-2's bytes_to_unicode table: printable Latin-1 bytes stand
// for themselves and the others are moved to U+0100 onwards, so that every
// byte has a visible, non-space character in the vocabulary.
var byteRune [256]rune

// runeByte inverts byteRune; runeByteOK marks the runes that have a byte.
var (
	runeByte   [324]byte
	runeByteOK [324]bool
)

func init() {
	n := rune(0)
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteRune[b] = rune(b)
		} else {
			byteRune[b] = 256 + n
			n++
		}
		runeByte[byteRune[b]] = byte(b)
		runeByteOK[byteRune[b]] = true
	}
}

// byteLevel maps raw bytes to their byte-level string, the form vocabulary
// entries are stored in.
func byteLevel(s string) string {
	buf := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		buf = utf8.AppendRune(buf, byteRune[s[i]])
	}
	return string(buf)
}

// appendTokenBytes appends the bytes a token stands for. Like Hugging Face's
// ByteLevel decoder, a token with any character outside the byte alphabet
// (an added token such as "<|im_start|> " with a real space) is emitted as
// its own UTF-8 text.
func appendTokenBytes(buf []byte, tok string) []byte {
	start := len(buf)
	for _, r := range tok {
		if r < 0 || int(r) >= len(runeByteOK) || !runeByteOK[r] {
			return append(buf[:start], tok...)
		}
		buf = append(buf, runeByte[r])
	}
	return buf
}
