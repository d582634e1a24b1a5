package tokenizer

import (
	"os"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// FuzzParse feeds arbitrary bytes to Parse: it must return an error or a
// working tokenizer, never panic.
func FuzzParse(f *testing.F) {
	for _, p := range []string{"testdata/small.json", "testdata/small_legacy_merges.json"} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},"pre_tokenizer":{"type":"Sequence","pretokenizers":[]}}`))
	f.Add([]byte(`{"added_tokens":[{"id":3,"content":"x"}],"model":{"vocab":{"a":2}}}`))
	f.Add([]byte(`null`))
	f.Add(mutate(f, func(d map[string]any) { obj(d["added_tokens"].([]any)[0])["id"] = 97 }))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := Parse(data, "fuzz.json")
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\r\n") || !strings.Contains(msg, "fuzz.json") {
				t.Fatalf("bad error %q", msg)
			}
			return
		}
		// Each id names one string, whichever table lists it.
		for s, id := range tok.vocab {
			if got, _ := tok.Token(id); got != s {
				t.Fatalf("model.vocab gives id %d to %q, but Token(%d) = %q", id, s, id, got)
			}
		}
		for s, id := range tok.added.byContent {
			if got, _ := tok.Token(id); got != s {
				t.Fatalf("added_tokens give id %d to %q, but Token(%d) = %q", id, s, id, got)
			}
		}
		ids := tok.Encode("hello <|im_start|> wörld 123 \xff")
		for _, id := range ids {
			if id < 0 || id >= tok.VocabSize() {
				t.Fatalf("id %d outside [0, %d)", id, tok.VocabSize())
			}
		}
		tok.Decode(append(ids, -1, 1<<40), true)
	})
}

// FuzzEncode checks, on the small tokenizer, that Encode never panics,
// yields ids in range and, for valid UTF-8, decodes back to the NFC text.
func FuzzEncode(f *testing.F) {
	tok := smallTokenizer(f)
	for _, s := range []string{"hello world", "it's  \n\n x", "<|im_start|>x<|im_end|>", "a [MASK] b",
		"café!", "cafe\u0301", "x<sw> <sw>", "aaaaaaa", "\xff\xfe", "😀👍🏽", "<think>\u0338"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		for _, id := range ids {
			if _, ok := tok.Token(id); !ok {
				t.Fatalf("Encode(%q) gave unknown id %d", s, id)
			}
		}
		got := tok.Decode(ids, false)
		if !utf8.ValidString(s) {
			return
		}
		if want := expectedRoundTrip(tok, s); got != want {
			t.Fatalf("Decode(Encode(%q)) = %q, want %q", s, got, want)
		}
	})
}

// expectedRoundTrip is NFC(s), except where added tokens intervene, as in
// Hugging Face: text is normalized piecewise between raw added tokens (so
// "<think>" then U+0338 does not compose into "≯"), whitespace stripped by
// lstrip/rstrip tokens is gone, and a normalized added token decodes to its
// content as written in the file.
func expectedRoundTrip(tok *Tokenizer, s string) string {
	var b strings.Builder
	tok.added.split(s, false, func(seg string, _, id int) {
		if id >= 0 {
			b.WriteString(tok.idToken[id])
			return
		}
		tok.added.split(norm.NFC.String(seg), true, func(seg string, _, id int) {
			if id >= 0 {
				b.WriteString(tok.idToken[id])
			} else {
				b.WriteString(seg)
			}
		})
	})
	return b.String()
}
