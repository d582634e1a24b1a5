package tokenizer

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// The expectations marked "Rust" are the unit tests of Hugging Face's
// tokenizers crate (v0.22.2) for the same component; tokenizers.js, the
// oracle, lacks some of these options (Metaspace split, single_word) or
// implements them differently.

// collect runs pre-tokenizer stages on s and lists the pieces.
func collect(stages []preTokenizer, s string) []string {
	out := []string{}
	runStages(stages, s, true, func(p string, _ bool) { out = append(out, p) })
	return out
}

func mustPre(t *testing.T, js string) []preTokenizer {
	t.Helper()
	stages, err := parsePreTokenizer(json.RawMessage(js), "pre_tokenizer")
	if err != nil {
		t.Fatal(err)
	}
	return stages
}

func TestSplitBehaviors(t *testing.T) {
	// Rust: pre_tokenizers::split::tests::basic, a word regex inverted.
	const in = "How are you doing?"
	tests := []struct {
		behavior string
		want     []string
	}{
		{"Removed", []string{"How", "are", "you", "doing", "?"}},
		{"Isolated", []string{"How", " ", "are", " ", "you", " ", "doing", "?"}},
		{"MergedWithPrevious", []string{"How ", "are ", "you ", "doing", "?"}},
		{"MergedWithNext", []string{"How", " are", " you", " doing", "?"}},
		{"Contiguous", []string{"How", " ", "are", " ", "you", " ", "doing?"}},
	}
	for _, tt := range tests {
		pre := mustPre(t, `{"type":"Split","pattern":{"Regex":"\\w+|[^\\w\\s]+"},"behavior":"`+tt.behavior+`","invert":true}`)
		if got := collect(pre, in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.behavior, got, tt.want)
		}
	}
	// Rust: regex_string and invert, which must agree with each other.
	for _, js := range []string{
		`{"type":"Split","pattern":{"Regex":"\\s+"},"behavior":"Removed","invert":false}`,
		`{"type":"Split","pattern":{"String":" "},"behavior":"Removed","invert":false}`,
	} {
		if got, want := collect(mustPre(t, js), "Hey, man!"), []string{"Hey,", "man!"}; !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %q, want %q", js, got, want)
		}
	}
	a := collect(mustPre(t, `{"type":"Split","pattern":{"String":" "},"behavior":"Removed","invert":false}`), "Hello Hello Hello")
	b := collect(mustPre(t, `{"type":"Split","pattern":{"String":"Hello"},"behavior":"Removed","invert":true}`), "Hello Hello Hello")
	if !reflect.DeepEqual(a, b) || len(a) != 3 {
		t.Errorf("split on spaces %q and inverted split on words %q differ", a, b)
	}
}

func TestMetaspace(t *testing.T) {
	// Rust: pre_tokenizers::metaspace::tests.
	always := `{"type":"Metaspace","replacement":"▁","prepend_scheme":"always","split":true}`
	tests := []struct {
		stages []string
		in     string
		want   []string
	}{
		{[]string{always}, "Hey friend!", []string{"▁Hey", "▁friend!"}},
		{[]string{always}, "Hey   friend!", []string{"▁Hey", "▁", "▁", "▁friend!"}},
		{[]string{`{"type":"Metaspace","replacement":"▁","prepend_scheme":"never","split":false}`}, "a b", []string{"a▁b"}},
		// non_legacy_meta_space: after a split on <s>, "first" prepends
		// only to the piece at the start of the text; then a second
		// Metaspace always prepends and splits.
		{[]string{`{"type":"Split","pattern":{"String":"<s>"},"behavior":"Isolated","invert":false}`,
			`{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":false}`},
			"Hey my friend <s>how▁are you", []string{"▁Hey▁my▁friend▁", "<s>", "how▁are▁you"}},
		{[]string{`{"type":"Split","pattern":{"String":"<s>"},"behavior":"Isolated","invert":false}`,
			`{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":false}`, always},
			"Hey my friend <s>how▁are you", []string{"▁Hey", "▁my", "▁friend", "▁", "▁<s>", "▁how", "▁are", "▁you"}},
		{[]string{`{"type":"Split","pattern":{"String":"<s>"},"behavior":"Isolated","invert":false}`,
			`{"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":false}`},
			" Hey <s>how <s>are <s> you", []string{"▁Hey▁", "<s>", "how▁", "<s>", "are▁", "<s>", "▁you"}},
		// The old add_prefix_space true is prepend_scheme always.
		{[]string{`{"type":"Metaspace","replacement":"_","add_prefix_space":true}`}, "a b", []string{"_a", "_b"}},
	}
	for _, tt := range tests {
		var stages []preTokenizer
		for _, js := range tt.stages {
			stages = append(stages, mustPre(t, js)...)
		}
		if got := collect(stages, tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: %q, want %q", tt.in, got, tt.want)
		}
	}
	// Rust: serialization; add_prefix_space false needs prepend_scheme never.
	_, err := parsePreTokenizer(json.RawMessage(`{"type":"Metaspace","replacement":"_","add_prefix_space":false,"prepend_scheme":"always"}`), "p")
	if err == nil || !strings.Contains(err.Error(), "p.add_prefix_space") {
		t.Errorf("add_prefix_space false with always: %v", err)
	}
}

func TestDigitsAndByteLevel(t *testing.T) {
	tests := []struct {
		js, in string
		want   []string
	}{
		// Rust: pre_tokenizers::digits::tests.
		{`{"type":"Digits","individual_digits":false}`, "Hey 123 friend!", []string{"Hey ", "123", " friend!"}},
		{`{"type":"Digits","individual_digits":true}`, "Hey 123 friend!", []string{"Hey ", "1", "2", "3", " friend!"}},
		{`{"type":"Digits","individual_digits":false}`, "x١٢½y", []string{"x", "١٢½", "y"}}, // char::is_numeric
		// ByteLevel with GPT-2's regex and a prefix space, not last in the
		// sequence, so it writes byte-level characters.
		{`{"type":"Sequence","pretokenizers":[{"type":"ByteLevel","add_prefix_space":true,"use_regex":true},{"type":"Digits","individual_digits":true}]}`,
			"Hello  world's 42é", []string{"ĠHello", "Ġ", "Ġworld", "'s", "Ġ", "4", "2", "Ã©"}},
	}
	for _, tt := range tests {
		if got := collect(mustPre(t, tt.js), tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s on %q: %q, want %q", tt.js, tt.in, got, tt.want)
		}
	}
}

func TestNormalizers(t *testing.T) {
	tests := []struct {
		js, in, want string
	}{
		// Rust: normalizers::replace::tests.
		{`{"type":"Replace","pattern":{"String":"''"},"content":"\""}`, "This is a ''test''", `This is a "test"`},
		{`{"type":"Replace","pattern":{"Regex":"\\s+"},"content":" "}`, "This     is   a         test", "This is a test"},
		{`{"type":"Replace","pattern":{"String":""},"content":"-"}`, "ab", "-a-b-"}, // an empty regex matches everywhere
		// Rust: normalizers::prepend::tests; an empty piece stays empty.
		{`{"type":"Prepend","prepend":"▁"}`, "Hello", "▁Hello"},
		{`{"type":"Prepend","prepend":"▁"}`, "", ""},
		// char::to_lowercase one character at a time: no final sigma, İ
		// becomes two characters.
		{`{"type":"Lowercase"}`, "ΟΔΟΣ İstanbul ÀB", "οδοσ i\u0307stanbul àb"},
		{`{"type":"Lowercase"}`, "A\xffB", "a\xffb"},
		{`{"type":"Strip","strip_left":true,"strip_right":false}`, "\u2000\t x \n", "x \n"},
		{`{"type":"Strip","strip_left":true,"strip_right":true}`, "\ufeff x \u3000", "\ufeff x"}, // U+FEFF is not White_Space
		{`{"type":"NFKC"}`, "ﬁ①", "fi1"},
		{`{"type":"NFD"}`, "é", "e\u0301"},
		{`{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},{"type":"Replace","pattern":{"String":" "},"content":"▁"}]}`,
			"Hey you", "▁Hey▁you"},
	}
	for _, tt := range tests {
		n, err := parseNormalizer(json.RawMessage(tt.js), "normalizer")
		if err != nil {
			t.Fatalf("%s: %v", tt.js, err)
		}
		if got := n(tt.in); got != tt.want {
			t.Errorf("%s on %q: %q, want %q", tt.js, tt.in, got, tt.want)
		}
	}
}

// pieces of text split by added tokens as Encode does it, with the
// normalizer in between: the text pieces as normalized and the token ids.
type addedPiece struct {
	text string
	id   int
}

func splitAdded(tok *Tokenizer, s string) []addedPiece {
	var out []addedPiece
	tok.added.split(s, false, func(seg string, _, id int) {
		if id >= 0 {
			out = append(out, addedPiece{"", id})
			return
		}
		if tok.normalize != nil {
			seg = tok.normalize(seg)
		}
		tok.added.split(seg, true, func(sub string, _, id int) { out = append(out, addedPiece{sub, id}) })
	})
	return out
}

// synthetic builds a tokenizer.json: the vocabulary lists tokens in id
// order, and parts are added at the top level.
func synthetic(t *testing.T, vocab []string, merges [][2]string, parts map[string]any) *Tokenizer {
	t.Helper()
	v := map[string]int{}
	for i, s := range vocab {
		v[s] = i
	}
	m := []any{}
	for _, p := range merges {
		m = append(m, []string{p[0], p[1]})
	}
	doc := map[string]any{"model": map[string]any{"type": "BPE", "vocab": v, "merges": m}}
	for k, x := range parts {
		if k == "model" {
			for mk, mv := range x.(map[string]any) {
				doc["model"].(map[string]any)[mk] = mv
			}
			continue
		}
		doc[k] = x
	}
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := Parse(data, "synthetic.json")
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func added(id int, content string, opts ...string) map[string]any {
	a := map[string]any{"id": id, "content": content, "special": false}
	for _, o := range opts {
		a[o] = true
	}
	return a
}

func TestAddedTokenOptions(t *testing.T) {
	vocab := strings.Split("[CLS] [SEP] my name ony <mask> a", " ")
	// Rust: added_vocabulary::tests; the tokens are normalized (matched
	// in the lowercased text) except the special ones.
	tok := synthetic(t, vocab, nil, map[string]any{
		"normalizer": map[string]any{"type": "Lowercase"},
		"added_tokens": []any{
			added(0, "[CLS]", "special"), added(1, "[SEP]", "special"),
			added(2, "my", "lstrip", "rstrip"), added(3, "name"), added(4, "ony", "single_word"),
		},
	})
	got := splitAdded(tok, "[CLS] My name is Anthony [SEP]")
	want := []addedPiece{{"", 0}, {"", 2}, {"", 3}, {" is anthony ", -1}, {"", 1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("options_use_cases: %+v, want %+v", got, want)
	}

	mask := func(opts ...string) *Tokenizer {
		return synthetic(t, vocab, nil, map[string]any{
			"normalizer":   map[string]any{"type": "Lowercase"},
			"added_tokens": []any{added(5, "<mask>", opts...)},
		})
	}
	tests := []struct {
		tok  *Tokenizer
		in   string
		want []addedPiece
	}{
		{mask("single_word"), "<mask> My name <mask> A<mask> <mask>ony <mask>",
			[]addedPiece{{"", 5}, {" my name ", -1}, {"", 5}, {" a<mask> <mask>ony ", -1}, {"", 5}}},
		// Punctuation is not a word character, a combining mark is.
		{mask("single_word"), "<mask>, <mask>- ◌̰<mask>",
			[]addedPiece{{"", 5}, {", ", -1}, {"", 5}, {"- ◌̰<mask>", -1}}},
		// lstrip and rstrip take any White_Space, not more than once.
		{mask("single_word", "lstrip", "rstrip"), "Hi <mask> there\t<mask>\t<mask>\u2000",
			[]addedPiece{{"hi", -1}, {"", 5}, {"there", -1}, {"", 5}, {"", 5}}},
	}
	for _, tt := range tests {
		if got := splitAdded(tt.tok, tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func TestDecoders(t *testing.T) {
	tests := []struct {
		js   string
		in   []string
		want []string
	}{
		// Rust: decoders::strip, byte_fallback, metaspace and replace tests.
		{`{"type":"Strip","content":"H","start":1,"stop":0}`, []string{"Hey", " friend!", "HHH"}, []string{"ey", " friend!", "HH"}},
		{`{"type":"Strip","content":"y","start":0,"stop":1}`, []string{"Hey", " friend!"}, []string{"He", " friend!"}},
		{`{"type":"Strip","content":" ","start":3,"stop":3}`, []string{" ", "  a  "}, []string{"", "a"}},
		{`{"type":"ByteFallback"}`, []string{"Hey", "friend!"}, []string{"Hey", "friend!"}},
		{`{"type":"ByteFallback"}`, []string{"<0x61>"}, []string{"a"}},
		{`{"type":"ByteFallback"}`, []string{"<0xE5>"}, []string{"�"}},
		{`{"type":"ByteFallback"}`, []string{"<0xE5>", "<0x8f>"}, []string{"�", "�"}},
		{`{"type":"ByteFallback"}`, []string{"<0xE5>", "<0x8f>", "<0xab>", "a"}, []string{"叫", "a"}},
		{`{"type":"ByteFallback"}`, []string{"<0xE5>", "<0x8f>", "a"}, []string{"�", "�", "a"}},
		{`{"type":"ByteFallback"}`, []string{"<0x+F>", "<0x1g>", "<0x100>"}, []string{"\x0f", "<0x1g>", "<0x100>"}},
		{`{"type":"Metaspace","replacement":"▁","prepend_scheme":"always"}`, []string{"▁Hey", "▁friend!"}, []string{"Hey", " friend!"}},
		{`{"type":"Metaspace","replacement":"▁","prepend_scheme":"never"}`, []string{"▁Hey", "▁friend!"}, []string{" Hey", " friend!"}},
		{`{"type":"Metaspace","replacement":"▁","prepend_scheme":"first"}`, []string{"▁a▁b", "▁c"}, []string{"ab", " c"}},
		{`{"type":"Replace","pattern":{"String":"_"},"content":" "}`, []string{"hello", "_hello"}, []string{"hello", " hello"}},
		{`{"type":"Fuse"}`, []string{"a", "", "b"}, []string{"ab"}},
		{`{"type":"ByteLevel"}`, []string{"Ġh", "Ã", "©", "<s> x"}, []string{" hé<s> x"}},
		{`{"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]}`,
			[]string{"▁Hi", "<0xE5>", "<0x8f>", "<0xab>", "▁", "▁x"}, []string{"Hi叫  x"}},
	}
	for _, tt := range tests {
		d, err := parseDecoder(json.RawMessage(tt.js), "decoder")
		if err != nil {
			t.Fatalf("%s: %v", tt.js, err)
		}
		if got := d.chain(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s on %q: %q, want %q", tt.js, tt.in, got, tt.want)
		}
	}
}

func TestBPEOptions(t *testing.T) {
	// A character-level vocabulary: 0 <unk>, 1..3 a b c, 4 ab, then the
	// byte tokens of é (C3 A9); no byte token for ß (C3 9F) is missing C3,
	// so ß falls back to unk.
	vocab := []string{"<unk>", "a", "b", "c", "ab", "<0xC3>", "<0xA9>", "abc"}
	merges := [][2]string{{"a", "b"}, {"ab", "c"}}
	model := func(opts map[string]any) *Tokenizer {
		return synthetic(t, vocab, merges, map[string]any{"model": opts})
	}
	tests := []struct {
		name string
		tok  *Tokenizer
		in   string
		want []int
	}{
		{"no unk: dropped", model(map[string]any{}), "aßb", []int{4}},
		{"unk", model(map[string]any{"unk_token": "<unk>"}), "aßßb", []int{1, 0, 0, 2}},
		{"fuse_unk", model(map[string]any{"unk_token": "<unk>", "fuse_unk": true}), "aßßb", []int{1, 0, 2}},
		{"byte_fallback", model(map[string]any{"byte_fallback": true, "unk_token": "<unk>"}), "éab", []int{5, 6, 4}},
		// A pending unk is written at the next known character, after the
		// byte tokens of characters in between, as in Hugging Face.
		{"unk order", model(map[string]any{"byte_fallback": true, "unk_token": "<unk>"}), "ßéa", []int{5, 6, 0, 1}},
		{"merges", model(map[string]any{}), "abcab", []int{7, 4}},
		{"ignore_merges", model(map[string]any{"ignore_merges": true}), "abc", []int{7}},
		{"invalid UTF-8 falls back by byte", model(map[string]any{"byte_fallback": true}), "a\xc3", []int{1, 5}},
	}
	for _, tt := range tests {
		if got := tt.tok.Encode(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: Encode(%q) = %v, want %v", tt.name, tt.in, got, tt.want)
		}
	}
}

func TestTemplateProcessing(t *testing.T) {
	vocab := []string{"<s>", "</s>", "a", "b", "[SEP]"}
	tmpl := map[string]any{
		"type": "TemplateProcessing",
		"single": []any{
			map[string]any{"SpecialToken": map[string]any{"id": "<s>", "type_id": 0}},
			map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
			map[string]any{"SpecialToken": map[string]any{"id": "</s>", "type_id": 0}},
		},
		"pair": []any{
			map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}},
			map[string]any{"SpecialToken": map[string]any{"id": "[SEP]", "type_id": 0}},
			map[string]any{"Sequence": map[string]any{"id": "B", "type_id": 1}},
		},
		"special_tokens": map[string]any{
			"<s>":   map[string]any{"id": "<s>", "ids": []int{0}, "tokens": []string{"<s>"}},
			"</s>":  map[string]any{"id": "</s>", "ids": []int{1}, "tokens": []string{"</s>"}},
			"[SEP]": map[string]any{"id": "[SEP]", "ids": []int{4, 4}, "tokens": []string{"[SEP]", "[SEP]"}},
		},
	}
	tok := synthetic(t, vocab, nil, map[string]any{"post_processor": map[string]any{
		"type": "Sequence", "processors": []any{map[string]any{"type": "ByteLevel"}, tmpl},
	}})
	on := EncodeOptions{AddSpecialTokens: true}
	if got := tok.EncodeWith("ab", on); !reflect.DeepEqual(got, []int{0, 2, 3, 1}) {
		t.Errorf("EncodeWith(ab, special) = %v", got)
	}
	if got := tok.EncodeWith("ab", EncodeOptions{}); !reflect.DeepEqual(got, []int{2, 3}) {
		t.Errorf("EncodeWith(ab) = %v", got)
	}
	if got := tok.EncodePair("a", "b", on); !reflect.DeepEqual(got, []int{2, 4, 4, 3}) {
		t.Errorf("EncodePair(a, b, special) = %v", got)
	}
	if got := tok.EncodePair("a", "b", EncodeOptions{}); !reflect.DeepEqual(got, []int{2, 3}) {
		t.Errorf("EncodePair(a, b) = %v", got)
	}
	prefix, suffix := tok.SpecialTokens()
	bos, ok := tok.BOS()
	if !reflect.DeepEqual(prefix, []int{0}) || !reflect.DeepEqual(suffix, []int{1}) || !ok || bos != 0 {
		t.Errorf("SpecialTokens = %v, %v; BOS = %d, %v", prefix, suffix, bos, ok)
	}
	plain := synthetic(t, vocab, nil, nil)
	if _, ok := plain.BOS(); ok || !reflect.DeepEqual(plain.EncodeWith("ab", on), []int{2, 3}) {
		t.Error("a tokenizer without post-processor adds tokens")
	}
}

// A normalizer chain that could make a text more than maxGrowth times
// longer is refused when the tokenizer is read: 8 Replace rules of ×10
// made "aaaa" 4·10⁸ characters (4.3 GB) before.
func TestNormalizerGrowthBound(t *testing.T) {
	replace := `{"type": "Replace", "pattern": {"String": "a"}, "content": "aaaaaaaaaa"}`
	chain := `{"type": "Sequence", "normalizers": [` + strings.TrimSuffix(strings.Repeat(replace+",", 8), ",") + `]}`
	if _, err := parseNormalizer(json.RawMessage(chain), "normalizer"); err == nil || !strings.Contains(err.Error(), "up to 1e+08 times longer, past the bound of 1024") {
		t.Fatalf("8 × (a → 10 a): %v", err)
	}
	for _, ok := range []string{
		`{"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]}`,
		`{"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Replace", "pattern": {"Regex": "\\s+"}, "content": " "}, {"type": "Lowercase"}]}`,
	} {
		if _, err := parseNormalizer(json.RawMessage(ok), "normalizer"); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}
