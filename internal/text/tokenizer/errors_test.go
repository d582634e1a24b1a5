package tokenizer

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// mutate returns small.json with edit applied to its decoded form.
func mutate(t testing.TB, edit func(doc map[string]any)) []byte {
	t.Helper()
	data, err := os.ReadFile("testdata/small.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func obj(v any) map[string]any { return v.(map[string]any) }

func TestLoadErrors(t *testing.T) {
	_, err := Load("testdata/no-such-tokenizer.json")
	if err == nil || !strings.Contains(err.Error(), "testdata/no-such-tokenizer.json") {
		t.Errorf("Load of a missing file: %v", err)
	}

	model := func(d map[string]any) map[string]any { return obj(d["model"]) }
	pre := func(d map[string]any, i int) map[string]any {
		return obj(obj(d["pre_tokenizer"])["pretokenizers"].([]any)[i])
	}
	tests := []struct {
		name string
		data []byte
		want []string // substrings of the error
	}{
		{"empty", []byte(""), []string{"malformed JSON"}},
		{"truncated", []byte(`{"model": {`), []string{"malformed JSON"}},
		{"not an object", []byte(`[1, 2]`), []string{"top level"}},
		{"no model", []byte(`{"pre_tokenizer": null}`), []string{"model", "missing"}},
		{"model type", mutate(t, func(d map[string]any) { model(d)["type"] = "WordPiece" }),
			[]string{"model.type", `"WordPiece"`}},
		{"vocab type", mutate(t, func(d map[string]any) { model(d)["vocab"] = []any{1} }),
			[]string{"model.vocab"}},
		{"vocab missing", mutate(t, func(d map[string]any) { delete(model(d), "vocab") }),
			[]string{"model.vocab", "missing"}},
		{"negative id", mutate(t, func(d map[string]any) { obj(model(d)["vocab"])["neg"] = -3 }),
			[]string{"model.vocab", `"neg"`, "-3"}},
		{"duplicate id", mutate(t, func(d map[string]any) { obj(model(d)["vocab"])["dup"] = 97 }),
			[]string{"model.vocab", "id 97", `"a"`, `"dup"`}},
		{"merge unknown token", mutate(t, func(d map[string]any) {
			model(d)["merges"] = []any{[]any{"zz", "a"}}
		}), []string{"model.merges[0]", `"zz"`, "not in model.vocab"}},
		{"merge unknown result", mutate(t, func(d map[string]any) {
			model(d)["merges"] = []any{"h e", "x y"}
		}), []string{"model.merges[1]", `"xy"`}},
		{"merge three parts", mutate(t, func(d map[string]any) { model(d)["merges"] = []any{"a b c"} }),
			[]string{"model.merges[0]", `"a b c"`}},
		{"merge one part", mutate(t, func(d map[string]any) { model(d)["merges"] = []any{[]any{"a"}} }),
			[]string{"model.merges[0]", "1 parts"}},
		{"merge number", mutate(t, func(d map[string]any) { model(d)["merges"] = []any{7} }),
			[]string{"model.merges[0]", "7"}},
		{"unk", mutate(t, func(d map[string]any) { model(d)["unk_token"] = "<unk>" }),
			[]string{"model.unk_token", `"<unk>"`}},
		{"dropout", mutate(t, func(d map[string]any) { model(d)["dropout"] = 0.1 }),
			[]string{"model.dropout"}},
		{"continuing_subword_prefix", mutate(t, func(d map[string]any) { model(d)["continuing_subword_prefix"] = "##" }),
			[]string{"model.continuing_subword_prefix", `"##"`}},
		{"end_of_word_suffix", mutate(t, func(d map[string]any) { model(d)["end_of_word_suffix"] = "</w>" }),
			[]string{"model.end_of_word_suffix", `"</w>"`}},
		{"normalizer", mutate(t, func(d map[string]any) { d["normalizer"] = map[string]any{"type": "BertNormalizer"} }),
			[]string{"normalizer.type", `"BertNormalizer"`}},
		{"normalizer in sequence", mutate(t, func(d map[string]any) {
			obj(d["normalizer"])["normalizers"] = []any{map[string]any{"type": "NFC"}, map[string]any{"type": "Precompiled"}}
		}), []string{"normalizer.normalizers[1].type", `"Precompiled"`}},
		{"strip fields", mutate(t, func(d map[string]any) { d["normalizer"] = map[string]any{"type": "Strip"} }),
			[]string{"normalizer", "strip_left"}},
		{"replace pattern", mutate(t, func(d map[string]any) {
			d["normalizer"] = map[string]any{"type": "Replace", "pattern": map[string]any{"Regex": "(?<= )x"}, "content": ""}
		}), []string{"normalizer.pattern.Regex", "lookbehind"}},
		{"pre-tokenizer type", mutate(t, func(d map[string]any) { d["pre_tokenizer"] = map[string]any{"type": "Whitespace"} }),
			[]string{"pre_tokenizer.type", `"Whitespace"`}},
		{"pre-tokenizer in sequence", mutate(t, func(d map[string]any) { pre(d, 1)["type"] = "UnicodeScripts" }),
			[]string{"pre_tokenizer.pretokenizers[1].type", `"UnicodeScripts"`}},
		{"pattern", mutate(t, func(d map[string]any) { pre(d, 0)["pattern"] = map[string]any{"Regex": `\s+(?!\S)\b`} }),
			[]string{"pre_tokenizer.pretokenizers[0].pattern.Regex", "lookahead"}},
		{"pattern kind", mutate(t, func(d map[string]any) { pre(d, 0)["pattern"] = map[string]any{"Glob": "*"} }),
			[]string{"pre_tokenizer.pretokenizers[0].pattern", "String", "Regex"}},
		{"behavior", mutate(t, func(d map[string]any) { pre(d, 0)["behavior"] = "Splice" }),
			[]string{"pre_tokenizer.pretokenizers[0].behavior", `"Splice"`}},
		{"behavior missing", mutate(t, func(d map[string]any) { delete(pre(d, 0), "behavior") }),
			[]string{"pre_tokenizer.pretokenizers[0].behavior", "missing"}},
		{"metaspace replacement", mutate(t, func(d map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "__"}
		}), []string{"pre_tokenizer.replacement", `"__"`}},
		{"metaspace scheme", mutate(t, func(d map[string]any) {
			d["pre_tokenizer"] = map[string]any{"type": "Metaspace", "replacement": "_", "prepend_scheme": "sometimes"}
		}), []string{"pre_tokenizer.prepend_scheme", `"sometimes"`}},
		{"decoder", mutate(t, func(d map[string]any) { d["decoder"] = map[string]any{"type": "WordPiece"} }),
			[]string{"decoder.type", `"WordPiece"`}},
		{"decoder in sequence", mutate(t, func(d map[string]any) {
			d["decoder"] = map[string]any{"type": "Sequence", "decoders": []any{map[string]any{"type": "Fuse"}, map[string]any{"type": "CTC"}}}
		}), []string{"decoder.decoders[1].type", `"CTC"`}},
		{"strip decoder", mutate(t, func(d map[string]any) {
			d["decoder"] = map[string]any{"type": "Strip", "content": "ab", "start": 1, "stop": 0}
		}), []string{"decoder.content", `"ab"`}},
		{"post-processor", mutate(t, func(d map[string]any) { d["post_processor"] = map[string]any{"type": "RobertaProcessing"} }),
			[]string{"post_processor.type", `"RobertaProcessing"`}},
		{"template token", mutate(t, func(d map[string]any) {
			d["post_processor"] = map[string]any{"type": "TemplateProcessing",
				"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>"}}, map[string]any{"Sequence": map[string]any{"id": "A"}}},
				"special_tokens": map[string]any{}}
		}), []string{"post_processor.single[0].SpecialToken.id", `"<s>"`}},
		{"template id", mutate(t, func(d map[string]any) {
			d["post_processor"] = map[string]any{"type": "TemplateProcessing",
				"single":         []any{map[string]any{"SpecialToken": map[string]any{"id": "<s>"}}, map[string]any{"Sequence": map[string]any{"id": "A"}}},
				"special_tokens": map[string]any{"<s>": map[string]any{"id": "<s>", "ids": []int{5000}}}}
		}), []string{`post_processor.special_tokens["<s>"].ids[0]`, "5000"}},
		{"template sequence", mutate(t, func(d map[string]any) {
			d["post_processor"] = map[string]any{"type": "TemplateProcessing",
				"single": []any{map[string]any{"Sequence": map[string]any{"id": "B"}}}}
		}), []string{"post_processor.single[0].Sequence.id", `"B"`}},
		{"added id", mutate(t, func(d map[string]any) { delete(obj(d["added_tokens"].([]any)[2]), "id") }),
			[]string{"added_tokens[2].id", "missing"}},
		{"added id range", mutate(t, func(d map[string]any) { obj(d["added_tokens"].([]any)[0])["id"] = 1 << 40 }),
			[]string{"added_tokens[0].id"}},
		{"newline in value", mutate(t, func(d map[string]any) { model(d)["type"] = "Word\nPiece" }),
			[]string{"model.type"}},
		{"added id of a vocab token", mutate(t, func(d map[string]any) { obj(d["added_tokens"].([]any)[0])["id"] = 97 }),
			[]string{`added_tokens[0]: "<|endoftext|>" has id 97, which model.vocab gives to "a"`}},
		{"added token under another vocab id", mutate(t, func(d map[string]any) {
			d["added_tokens"] = append(d["added_tokens"].([]any), map[string]any{"id": 300, "content": "hello"})
		}), []string{`added_tokens[8]: "hello" has id 300, but model.vocab gives it 260`}},
		{"added id of another added token", mutate(t, func(d map[string]any) { obj(d["added_tokens"].([]any)[1])["id"] = 280 }),
			[]string{`added_tokens[1]: "<|im_start|>" has id 280, which added_tokens[0] gives to "<|endoftext|>"`}},
	}
	for _, tt := range tests {
		_, err := Parse(tt.data, "dir/tok.json")
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		msg := err.Error()
		for _, w := range append([]string{"dir/tok.json"}, tt.want...) {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: error %q does not mention %q", tt.name, msg, w)
			}
		}
		if strings.ContainsAny(msg, "\r\n") {
			t.Errorf("%s: error is not one line: %q", tt.name, msg)
		}
	}
}

func TestParseAccepts(t *testing.T) {
	pre := func(d map[string]any, i int) map[string]any {
		return obj(obj(d["pre_tokenizer"])["pretokenizers"].([]any)[i])
	}
	tests := map[string]struct {
		data []byte
		want string // Decode(Encode("héllo world")): "" that itself, "-" nothing
	}{
		"null normalizer": {mutate(t, func(d map[string]any) { d["normalizer"] = nil }), ""},
		"plain NFC":       {mutate(t, func(d map[string]any) { d["normalizer"] = map[string]any{"type": "NFC"} }), ""},
		"empty sequence": {mutate(t, func(d map[string]any) {
			d["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{}}
		}), ""},
		"no model type":   {mutate(t, func(d map[string]any) { delete(obj(d["model"]), "type") }), ""},
		"no merges":       {mutate(t, func(d map[string]any) { delete(obj(d["model"]), "merges") }), ""},
		"unknown fields":  {mutate(t, func(d map[string]any) { d["future"] = []any{1, "x"} }), ""},
		"no added tokens": {mutate(t, func(d map[string]any) { delete(d, "added_tokens") }), ""},
		// Byte-level files often list a special token in model.vocab too,
		// under the same id: that is one token, not a collision.
		"added token also in vocab": {mutate(t, func(d map[string]any) { obj(obj(d["model"])["vocab"])["<|endoftext|>"] = 280 }), ""},
		"added token listed twice": {mutate(t, func(d map[string]any) {
			d["added_tokens"] = append(d["added_tokens"].([]any), d["added_tokens"].([]any)[0])
		}), ""},
		// Without ByteLevel the vocabulary's byte-level characters are just
		// characters: é is the one for byte E9, space is none.
		"no pre-tokenizer": {mutate(t, func(d map[string]any) { d["pre_tokenizer"] = nil }), "h\uFFFDlloworld"},
		"no decoder":       {mutate(t, func(d map[string]any) { d["decoder"] = nil }), "h Ã© ll o Ġworld"},
		"string pattern":   {mutate(t, func(d map[string]any) { pre(d, 0)["pattern"] = map[string]any{"String": " "} }), ""},
		// Every character is in some match of the Qwen pattern.
		"removed behavior": {mutate(t, func(d map[string]any) { pre(d, 0)["behavior"] = "Removed" }), "-"},
		"byte-level regex": {mutate(t, func(d map[string]any) { pre(d, 1)["use_regex"] = true }), ""},
		"prefix space":     {mutate(t, func(d map[string]any) { pre(d, 1)["add_prefix_space"] = true }), " héllo world"},
		"byte fallback":    {mutate(t, func(d map[string]any) { obj(d["model"])["byte_fallback"] = true }), ""},
		"dropout 0":        {mutate(t, func(d map[string]any) { obj(d["model"])["dropout"] = 0 }), ""},
		"Lowercase":        {mutate(t, func(d map[string]any) { d["normalizer"] = map[string]any{"type": "Lowercase"} }), ""},
		"template post": {mutate(t, func(d map[string]any) {
			d["post_processor"] = map[string]any{"type": "Sequence", "processors": []any{}}
		}), ""},
	}
	for name, tt := range tests {
		tok, err := Parse(tt.data, name)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		want := tt.want
		switch want {
		case "":
			want = "héllo world"
		case "-":
			want = ""
		}
		if got := tok.Decode(tok.Encode("héllo world"), false); got != want {
			t.Errorf("%s: round trip gave %q, want %q", name, got, want)
		}
	}
}

func TestSparseIDs(t *testing.T) {
	data := mutate(t, func(d map[string]any) { obj(d["added_tokens"].([]any)[0])["id"] = 1 << 20 })
	if _, err := Parse(data, "sparse.json"); err == nil || !strings.Contains(err.Error(), "sparse") {
		t.Errorf("sparse ids: %v", err)
	}
}
