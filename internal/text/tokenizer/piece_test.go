package tokenizer_test

import (
	"fmt"
	"testing"

	"logitscope/internal/text/tokenizer"
)

// Piece keeps apart what Decode of one token turns into the same U+FFFD:
// byte-level bytes that are no character alone, a byte-fallback
// vocabulary's <0xNN> tokens; whole characters, control bytes and words
// read as Decode reads them.
func TestPiece(t *testing.T) {
	byteLevel, err := tokenizer.Load("testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	// A SentencePiece-style vocabulary with byte fallback (Llama 2's,
	// Gemma's): <0xNN> tokens and ▁ for a space.
	fallback, err := tokenizer.Parse([]byte(`{"model": {"type": "BPE", "byte_fallback": true,
		"vocab": {"<unk>": 0, "<0x41>": 1, "<0xF1>": 2, "▁the": 3, "<0x0F>": 4}, "merges": []},
		"decoder": {"type": "Sequence", "decoders": [
			{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
			{"type": "ByteFallback"}, {"type": "Fuse"}]}}`), "fallback.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		tok  *tokenizer.Tokenizer
		id   int
		want string
	}{
		{"upper byte", byteLevel, 0xF1, "<0xF1>"},
		{"lead byte", byteLevel, 0xE2, "<0xE2>"},
		{"control byte", byteLevel, 0x0F, "\x0f"},
		{"ASCII byte", byteLevel, 'a', "a"},
		{"word with its space", byteLevel, 265, " world"},
		{"special token", byteLevel, 281, "<|im_start|>"},
		{"unknown id", byteLevel, 1 << 30, ""},
		{"fallback upper byte", fallback, 2, "<0xF1>"},
		{"fallback ASCII byte", fallback, 1, "A"},
		{"fallback control byte", fallback, 4, "\x0f"},
		{"fallback word", fallback, 3, " the"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.tok.Piece(tc.id); got != tc.want {
				t.Errorf("Piece(%d) = %q, want %q (Decode: %q)", tc.id, got, tc.want, tc.tok.Decode([]int{tc.id}, false))
			}
		})
	}
	// Different upper bytes decode alike, and stay apart as pieces.
	if byteLevel.Decode([]int{0xF1}, false) != byteLevel.Decode([]int{0xAD}, false) || byteLevel.Piece(0xF1) == byteLevel.Piece(0xAD) {
		t.Error("two upper bytes: Decode should merge them and Piece keep them apart")
	}
}

func ExampleTokenizer_Piece() {
	tok, err := tokenizer.Load("testdata/small.json")
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, id := range []int{0xE2, 0x82, 0xAC, 265} {
		fmt.Printf("%d %+q %q\n", id, tok.Decode([]int{id}, false), tok.Piece(id))
	}
	// Output:
	// 226 "\ufffd" "<0xE2>"
	// 130 "\ufffd" "<0x82>"
	// 172 "\ufffd" "<0xAC>"
	// 265 " world" " world"
}
