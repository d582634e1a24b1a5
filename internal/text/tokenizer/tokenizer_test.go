package tokenizer

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// small.json is a hand-made byte-level BPE: ids 0..255 are the bytes, a few
// merges build "hello", "Ġworld", "cafÃ©" and friends, 276..279 are a hole,
// and 280..287 are added tokens with every flag. small_legacy_merges.json is
// the same with merges as "a b" strings.
func smallTokenizer(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := Load("testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// tokens spells ids as token strings, to keep the tables readable.
func tokens(tok *Tokenizer, ids []int) []string {
	out := []string{}
	for _, id := range ids {
		s, ok := tok.Token(id)
		if !ok {
			s = "?"
		}
		out = append(out, s)
	}
	return out
}

func TestEncodeSmall(t *testing.T) {
	legacy, err := Load("testdata/small_legacy_merges.json")
	if err != nil {
		t.Fatal(err)
	}
	tok := smallTokenizer(t)
	tests := []struct {
		in   string
		want []string
	}{
		{"", []string{}},
		{"hello world", []string{"hello", "Ġworld"}},
		{"aaa", []string{"aa", "a"}},        // equal ranks: leftmost first
		{"aaaaa", []string{"aaaa", "a"}},    // aa aa a, then aaaa
		{"abc", []string{"a", "bc"}},        // b c outranks a b
		{"café", []string{"cafÃ©"}},         // Ã© merges first, then c a f
		{"cafe\u0301", []string{"cafÃ©"}},   // NFC first
		{"it's", []string{"i", "t", "'s"}},  // contraction split off
		{"  x", []string{"Ġ", "Ġ", "x"}},    // merges stay inside a piece
		{"   \n", []string{"ĠĠ", "Ġ", "Ċ"}}, // one piece: \s*[\r\n]+
		{"12", []string{"1", "2"}},          // \p{N} is one digit a piece
		{"\xff", []string{"ÿ"}},             // invalid UTF-8 keeps its byte
		{"<|im_start|>user<|im_end|>", []string{"<|im_start|>", "u", "s", "e", "r", "<|im_end|>"}},
		{"<|im_start|>x", []string{"<|im_start|>x"}}, // longest added token wins
		{"<|im_start|>xx", []string{"<|im_start|>x", "x"}},
		{"<|im_start", []string{"<", "|", "i", "m", "_", "s", "t", "a", "r", "t"}},
		{"<think>hello", []string{"<think>", "hello"}},
		{"a [MASK] b", []string{"a", "[MASK]", "b"}}, // lstrip and rstrip eat the spaces
		{"a\t [MASK]", []string{"a", "[MASK]"}},
		{"<sw> x", []string{"<sw>", "Ġ", "x"}},
		{"x<sw>", []string{"x", "<", "s", "w", ">"}}, // single_word: not inside a word
		{"café!", []string{"cafe\u0301!"}},           // normalized token, matched after NFC
		{"cafe\u0301!", []string{"cafe\u0301!"}},
	}
	for _, tt := range tests {
		for _, tk := range []*Tokenizer{tok, legacy} {
			if got := tokens(tk, tk.Encode(tt.in)); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Encode(%q) = %q, want %q", tt.in, got, tt.want)
			}
		}
	}
}

func TestDecodeSmall(t *testing.T) {
	tok := smallTokenizer(t)
	tests := []struct {
		ids         []int
		skipSpecial bool
		want        string
	}{
		{nil, false, ""},
		{[]int{'h', 'i'}, false, "hi"},
		{[]int{0xC3, 0xA9}, false, "é"},
		{[]int{0xC3}, false, "\uFFFD"}, // half a character
		{[]int{0xC3, 'x', 0xA9}, false, "\uFFFDx\uFFFD"},
		{[]int{-1, 276, 279, 1 << 30, 'h'}, false, "h"}, // unknown ids are skipped
		{[]int{281, 'h', 282, 283}, false, "<|im_start|>h<|im_end|><think>"},
		{[]int{281, 'h', 282, 283}, true, "h<think>"}, // <think> is not special
		{[]int{284, 286}, true, "cafe\u0301!"},
	}
	for _, tt := range tests {
		if got := tok.Decode(tt.ids, tt.skipSpecial); got != tt.want {
			t.Errorf("Decode(%v, %v) = %q, want %q", tt.ids, tt.skipSpecial, got, tt.want)
		}
	}
}

func TestLookups(t *testing.T) {
	tok := smallTokenizer(t)
	if got := tok.VocabSize(); got != 288 {
		t.Errorf("VocabSize = %d, want 288", got)
	}
	for s, want := range map[string]int{"Ġworld": 265, "<|im_end|>": 282, "a": 'a', "Ġ": ' '} {
		if id, ok := tok.TokenID(s); !ok || id != want {
			t.Errorf("TokenID(%q) = %d, %v; want %d", s, id, ok, want)
		}
	}
	if _, ok := tok.TokenID("nope"); ok {
		t.Error(`TokenID("nope") found a token`)
	}
	if _, ok := tok.Token(277); ok {
		t.Error("Token(277) found a token in the hole")
	}
	if !tok.IsSpecial(280) || tok.IsSpecial(283) || tok.IsSpecial(-1) || tok.IsSpecial(5000) {
		t.Error("IsSpecial is wrong")
	}
}

func TestChatML(t *testing.T) {
	got := ChatML([]Message{{"system", "S"}, {"user", "U\nV"}}, false)
	if want := "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU\nV<|im_end|>\n"; got != want {
		t.Errorf("ChatML = %q, want %q", got, want)
	}
	if got := ChatML(nil, true); got != "<|im_start|>assistant\n" {
		t.Errorf("ChatML(nil, true) = %q", got)
	}
}

// TestConcurrentEncode shares one tokenizer (and its word cache) between
// goroutines; run with -race to check.
func TestConcurrentEncode(t *testing.T) {
	tok := smallTokenizer(t)
	want := tok.Encode("hello world aaa café")
	done := make(chan bool)
	for range 4 {
		go func() {
			ok := true
			for range 200 {
				ok = ok && reflect.DeepEqual(tok.Encode("hello world aaa café"), want)
			}
			done <- ok
		}()
	}
	for range 4 {
		if !<-done {
			t.Error("concurrent Encode gave a different result")
		}
	}
}

// TestMergeHeapMatchesQuadratic checks the two merge loops against each
// other on words long and short, repetitive and not.
func TestMergeHeapMatchesQuadratic(t *testing.T) {
	tok := smallTokenizer(t)
	words := []string{"a", "aa", "aaa", "aaaaaaa", "abcabcabc", "hellohello", "  ", "cafécafé", "hhheeelllooo"}
	for _, w := range words {
		syms := func() []int32 {
			s := make([]int32, len(w))
			for i := range len(w) {
				s[i] = tok.model.byteID[w[i]]
			}
			return s
		}
		q := tok.model.mergeQuadratic(syms())
		h := tok.model.mergeHeap(syms())
		if !reflect.DeepEqual(q, h) {
			t.Errorf("%q: quadratic %v, heap %v", w, q, h)
		}
	}
	long := strings.Repeat("aab", 100) + strings.Repeat("a", 101)
	ids := tok.Encode(long)
	if got := tok.Decode(ids, false); got != long {
		t.Errorf("long word does not round-trip: %q", got)
	}
	if n := len(ids); n != 100*2+26 { // (aa b) per repeat; 101 a = 25 aaaa + a
		t.Errorf("long word: %d ids, want %d: %q", n, 100*2+26, tokens(tok, ids))
	}
}

func TestSmallFilesAgree(t *testing.T) {
	// The two merge encodings must describe the same tokenizer.
	a, _ := os.ReadFile("testdata/small.json")
	b, _ := os.ReadFile("testdata/small_legacy_merges.json")
	var ma, mb map[string]any
	if json.Unmarshal(a, &ma) != nil || json.Unmarshal(b, &mb) != nil {
		t.Fatal("testdata does not parse")
	}
	delete(ma["model"].(map[string]any), "merges")
	delete(mb["model"].(map[string]any), "merges")
	if !reflect.DeepEqual(ma, mb) {
		t.Error("small.json and small_legacy_merges.json differ beyond merges")
	}
}

// Merges gives tokenizer.json's merges back in their order, Split names
// the Qwen2 split, and the ChatML tokens are added.
func TestExportFacts(t *testing.T) {
	raw, err := os.ReadFile("testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Model struct{ Merges [][2]string }
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, m := range doc.Model.Merges {
		want = append(want, m[0]+" "+m[1])
	}
	tok, err := Load("testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Merges(); !slices.Equal(got, want) || len(got) == 0 {
		t.Fatalf("merges %q, want tokenizer.json's %q", got, want)
	}
	id, _ := tok.TokenID("<|im_start|>")
	if !tok.ByteLevel() || tok.Split() != "qwen2" || !tok.IsAdded(id) || tok.IsAdded(0) {
		t.Fatalf("ByteLevel %v, Split %q, IsAdded(<|im_start|>) %v, IsAdded(0) %v", tok.ByteLevel(), tok.Split(), tok.IsAdded(id), tok.IsAdded(0))
	}
}
