package tokenizer

import (
	"fmt"
	"unicode/utf8"
)

// Piece is one token's text for people: Decode of the token alone where
// its bytes form UTF-8, but each byte of an ill-formed part written as
// <0xNN>, the name llama.cpp and Hugging Face give byte tokens. Decode
// turns every such byte into U+FFFD, so a byte-level vocabulary's 128
// upper bytes and its merges that end inside a character all read "�",
// and two different tokens look the same; Piece keeps them apart
// (" <0xE2><0x80>" is a space and the first two bytes of a character).
// Unknown ids are "".
func (t *Tokenizer) Piece(id int) string {
	tok, ok := t.Token(id)
	if !ok {
		return ""
	}
	if t.byteLevel {
		return bytePieces(appendTokenBytes(nil, tok))
	}
	// A byte-fallback vocabulary (SentencePiece's <0xNN> tokens): a byte
	// that is a character alone (ASCII) decodes as one; others keep
	// their name.
	if b, ok := fallbackByte(tok); ok && b >= utf8.RuneSelf {
		return fmt.Sprintf("<0x%02X>", b)
	}
	return t.Decode([]int{id}, false)
}

// bytePieces is b as text, each byte outside a well-formed UTF-8
// sequence written <0xNN>.
func bytePieces(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			out = fmt.Appendf(out, "<0x%02X>", b[i])
			i++
			continue
		}
		out = append(out, b[i:i+size]...)
		i += size
	}
	return string(out)
}
