package tokenizer

import (
	"encoding/json"
	"fmt"
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

// FuzzConfig builds tokenizer.json files from parts the fuzzer picks (every
// supported normalizer, pre-tokenizer, model option, added-token flag,
// post-processor and decoder, in random sequences) with a regex it writes,
// and runs text through them. Parse must either refuse the file with a
// one-line error naming it or give a tokenizer whose Encode, EncodeWith,
// EncodePair and Decode return (no panic, no hang) ids that name tokens.
func FuzzConfig(f *testing.F) {
	f.Add(uint64(0), `\s+(?!\S)|\p{L}+`, "Hello wörld 123 <|x|> ▁▁ \xff")
	f.Add(uint64(0x9e3779b97f4a7c15), `(?i:'s|'t)| ?\p{N}{1,3}|\s+`, "it's  12345\n\n ʼn x")
	f.Add(uint64(42), ``, "a  b")
	f.Add(uint64(7), `a*`, "baab<s>")
	f.Add(uint64(1<<63|12345), `[^\s]+(?=\s)`, "\t x y \u3000z")
	base, err := os.ReadFile("testdata/small.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, choice uint64, pattern, text string) {
		data := fuzzTokenizerJSON(t, base, choice, pattern, text)
		tok, err := Parse(data, "fuzz.json")
		if err != nil {
			if msg := err.Error(); strings.ContainsAny(msg, "\r\n") || !strings.Contains(msg, "fuzz.json") {
				t.Fatalf("bad error %q", msg)
			}
			return
		}
		on := EncodeOptions{AddSpecialTokens: true}
		for _, ids := range [][]int{tok.Encode(text), tok.EncodeWith(text, on), tok.EncodePair(text, pattern, on)} {
			for _, id := range ids {
				if _, ok := tok.Token(id); !ok {
					t.Fatalf("unknown id %d in %v", id, ids)
				}
			}
			tok.Decode(ids, false)
			tok.Decode(ids, true)
		}
	})
}

// fuzzTokenizerJSON is small.json (a byte-level vocabulary with merges) plus
// byte-fallback tokens, ▁ and <unk>, with its parts replaced by choices.
func fuzzTokenizerJSON(t *testing.T, base []byte, choice uint64, pattern, text string) []byte {
	var doc map[string]any
	if err := json.Unmarshal(base, &doc); err != nil {
		t.Fatal(err)
	}
	state := choice
	pick := func(n int) int { // splitmix64, so every choice bit counts
		state += 0x9e3779b97f4a7c15
		z := state
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return int((z ^ z>>31) % uint64(n))
	}
	flag := func() bool { return pick(2) == 1 }
	regex := map[string]any{"Regex": pattern}
	str := func(s string) map[string]any { return map[string]any{"String": s} }
	normalizer := func() any {
		switch pick(9) {
		case 0:
			return nil
		case 1:
			return map[string]any{"type": []string{"NFC", "NFD", "NFKC", "NFKD"}[pick(4)]}
		case 2:
			return map[string]any{"type": "Lowercase"}
		case 3:
			return map[string]any{"type": "Strip", "strip_left": flag(), "strip_right": flag()}
		case 4:
			return map[string]any{"type": "Prepend", "prepend": "▁"}
		case 5:
			return map[string]any{"type": "Replace", "pattern": str(" "), "content": "▁"}
		case 6:
			return map[string]any{"type": "Replace", "pattern": regex, "content": []string{"", "x", "▁"}[pick(3)]}
		}
		return map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": str(" "), "content": "▁"},
		}}
	}
	behaviors := []string{"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"}
	preTokenizer := func() any {
		switch pick(6) {
		case 0:
			return map[string]any{"type": "Split", "pattern": regex, "behavior": behaviors[pick(5)], "invert": flag()}
		case 1:
			return map[string]any{"type": "Split", "pattern": str([]string{" ", "", "▁", "ab"}[pick(4)]), "behavior": behaviors[pick(5)], "invert": flag()}
		case 2:
			return map[string]any{"type": "ByteLevel", "add_prefix_space": flag(), "use_regex": flag()}
		case 3:
			return map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": []string{"always", "first", "never"}[pick(3)], "split": flag()}
		case 4:
			return map[string]any{"type": "Digits", "individual_digits": flag()}
		}
		return map[string]any{"type": "Split", "pattern": str(qwen2Pattern), "behavior": "Isolated", "invert": false}
	}
	doc["normalizer"] = normalizer()
	if n := pick(4); n == 0 {
		doc["pre_tokenizer"] = nil
	} else {
		var seq []any
		for range n {
			seq = append(seq, preTokenizer())
		}
		doc["pre_tokenizer"] = map[string]any{"type": "Sequence", "pretokenizers": seq}
	}

	model := doc["model"].(map[string]any)
	vocab := model["vocab"].(map[string]any)
	next := 288 // after small.json's ids
	add := func(s string) int {
		if id, ok := vocab[s]; ok {
			return int(id.(float64))
		}
		vocab[s] = float64(next)
		next++
		return next - 1
	}
	for b := range 256 {
		add(fmt.Sprintf("<0x%02X>", b))
	}
	add("▁")
	add("<unk>")
	bos := add("<s>")
	model["byte_fallback"] = flag()
	model["fuse_unk"] = flag()
	model["ignore_merges"] = flag()
	if flag() {
		model["unk_token"] = "<unk>"
	}

	contents := []string{"<s>", "<|im_start|>", "▁▁", "\n\n", " ", "ab", "é"}
	if text != "" {
		i := pick(len(text))
		contents = append(contents, text[i:min(len(text), i+1+pick(4))])
	}
	var addedTokens []any
	for range pick(4) {
		content := contents[pick(len(contents))]
		addedTokens = append(addedTokens, map[string]any{
			"id": add(content), "content": content, "special": flag(), "normalized": flag(),
			"lstrip": flag(), "rstrip": flag(), "single_word": flag(),
		})
	}
	doc["added_tokens"] = addedTokens

	template := map[string]any{
		"type": "TemplateProcessing",
		"single": []any{
			map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}},
			map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
		},
		"pair": []any{
			map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
			map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 1}},
			map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 1}},
		},
		"special_tokens": map[string]any{"<s>": map[string]any{"id": "<s>", "ids": []int{bos}, "tokens": []string{"<s>"}}},
	}
	doc["post_processor"] = []any{nil, map[string]any{"type": "ByteLevel"}, template,
		map[string]any{"type": "Sequence", "processors": []any{map[string]any{"type": "ByteLevel"}, template}}}[pick(4)]

	decoders := []any{
		map[string]any{"type": "ByteLevel"},
		map[string]any{"type": "Metaspace", "replacement": "▁", "prepend_scheme": []string{"always", "first", "never"}[pick(3)]},
		map[string]any{"type": "Replace", "pattern": str("▁"), "content": " "},
		map[string]any{"type": "Replace", "pattern": regex, "content": "-"},
		map[string]any{"type": "ByteFallback"},
		map[string]any{"type": "Fuse"},
		map[string]any{"type": "Strip", "content": " ", "start": pick(3), "stop": pick(3)},
	}
	switch n := pick(4); n {
	case 0:
		doc["decoder"] = nil
	case 1:
		doc["decoder"] = decoders[pick(len(decoders))]
	default:
		var seq []any
		for range n + 1 {
			seq = append(seq, decoders[pick(len(decoders))])
		}
		doc["decoder"] = map[string]any{"type": "Sequence", "decoders": seq}
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
