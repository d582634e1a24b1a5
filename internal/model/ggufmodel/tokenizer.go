package ggufmodel

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"logitscope/internal/format/gguf"
	"logitscope/internal/text/chat"
	"logitscope/internal/text/tokenizer"
)

// llama.cpp's token types (tokenizer.ggml.token_type, llama_token_type).
const (
	tokenNormal      = 1
	tokenControl     = 3
	tokenUserDefined = 4
	tokenUnused      = 5
)

// preSplit is what a tokenizer.ggml.pre name stands for in tokenizer.json:
// the normalizer and pre-tokenizer of the Hugging Face tokenizer that
// llama.cpp's converter recognized by that name, whether its BPE takes a
// whole word found in the vocabulary without merging (ignore_merges, as
// llama.cpp sets for the name too), and whether llama.cpp adds a BOS when
// tokenizer.ggml.add_bos_token does not say.
type preSplit struct {
	normalizer, pre any
	ignoreMerges    bool
	addBOS          bool
}

// byteLevel is the ByteLevel step of a byte-level BPE, with use_regex:
// GPT-2's own split (which llama.cpp's gpt-2 and smollm regexes write out).
func byteLevel(useRegex bool) map[string]any {
	return map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": useRegex}
}

// isolated is a Split pre-tokenizer on one of the patterns package
// tokenizer recognizes, followed by the byte mapping.
func isolated(name string) any {
	return map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]string{"Regex": tokenizer.SplitPattern(name)}, "behavior": "Isolated", "invert": false},
		byteLevel(false),
	}}
}

// preSplits are the tokenizer.ggml.pre names that open, with the
// tokenizers llama.cpp's converter gives them (convert_hf_to_gguf_update.py
// lists the repositories): qwen2 is Qwen's (Qwen1.5 to Qwen3, NFC-normalized
// before its split; llama.cpp does not normalize, so on text that is not in
// NFC it tokenizes otherwise than the model's own tokenizer, which this
// one follows); llama-bpe is Llama 3's (llama3 and llama-v3 are older
// names llama.cpp reads alike); gpt-2 is GPT-2's regex in ByteLevel;
// smollm is SmolLM's, every digit alone before GPT-2's regex. Other names
// are refused: llama.cpp maps many of them onto the same regexes, but
// their tokenizers differ in normalization and flags that the name alone
// does not say, and "default" means the converter did not recognize the
// tokenizer at all.
var preSplits = map[string]preSplit{
	"qwen2":     {normalizer: map[string]any{"type": "NFC"}, pre: isolated("qwen2")},
	"llama-bpe": {pre: isolated("llama3"), ignoreMerges: true, addBOS: true},
	"llama3":    {pre: isolated("llama3"), ignoreMerges: true, addBOS: true},
	"llama-v3":  {pre: isolated("llama3"), ignoreMerges: true, addBOS: true},
	"gpt-2":     {pre: byteLevel(true)},
	"smollm": {pre: map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Digits", "individual_digits": true}, byteLevel(true)}}},
}

// addedJSON is one of tokenizer.json's added_tokens.
type addedJSON struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// TokenizerFiles translates a GGUF file's tokenizer.ggml.* keys into the
// tokenizer.json and tokenizer_config.json of the Hugging Face tokenizer
// they were converted from, so that the model of a GGUF file encodes text
// as the original checkpoint did. Only byte-level BPE vocabularies
// (tokenizer.ggml.model "gpt2") whose split tokenizer.ggml.pre names one
// of preSplits open: the NORMAL tokens are the BPE vocabulary, with
// tokenizer.ggml.merges in order; CONTROL tokens are special added
// tokens and USER_DEFINED ones added tokens that are not special (both
// matched in raw text before any split, as llama.cpp and Hugging Face
// match them); UNUSED ones (a converter's [PADn] fill) are left out.
// tokenizer_config.json gets the bos, eos, unk and padding tokens,
// add_bos_token and add_eos_token (llama.cpp's default for the split when
// the file does not say) and tokenizer.chat_template. Anything else is
// refused, naming the file and the key.
func TokenizerFiles(f *gguf.File) (tokJSON, configJSON []byte, err error) {
	if tokJSON, configJSON, err = tokenizerFiles(f); err != nil {
		return nil, nil, err
	}
	return tokJSON, configJSON, checkTokenizerFiles(f, tokJSON, configJSON)
}

// checkTokenizerFiles parses what tokenizerFiles wrote, as the tokenizer
// and chat packages will, so that a file they refuse is refused naming
// the GGUF file.
func checkTokenizerFiles(f *gguf.File, tokJSON, configJSON []byte) error {
	if _, err := tokenizer.Parse(tokJSON, f.Path+" (its derived tokenizer.json)"); err != nil {
		return err
	}
	if _, err := chat.ParseConfig(configJSON); err != nil {
		return fmt.Errorf("%s (its derived tokenizer_config.json): %w", f.Path, err)
	}
	return nil
}

// tokenizerFiles is TokenizerFiles without the final check.
func tokenizerFiles(f *gguf.File) (tokJSON, configJSON []byte, err error) {
	kind, err := f.String("tokenizer.ggml.model")
	if err != nil {
		return nil, nil, err
	}
	if kind != "gpt2" {
		return nil, nil, fmt.Errorf("%s: tokenizer.ggml.model %q is not supported: only byte-level BPE (\"gpt2\") vocabularies open as a model", f.Path, kind)
	}
	preName, err := f.String("tokenizer.ggml.pre")
	if err != nil {
		return nil, nil, err
	}
	split, ok := preSplits[preName]
	if !ok {
		var names []string
		for n := range preSplits {
			names = append(names, n)
		}
		slices.Sort(names)
		return nil, nil, fmt.Errorf("%s: tokenizer.ggml.pre %q is not supported (supported: %s)", f.Path, preName, strings.Join(names, ", "))
	}
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, nil, err
	}
	types, err := f.Int32s("tokenizer.ggml.token_type")
	if err != nil {
		return nil, nil, err
	}
	if len(types) != len(tokens) {
		return nil, nil, fmt.Errorf("%s: tokenizer.ggml.token_type has %d entries for %d tokens", f.Path, len(types), len(tokens))
	}
	vocab := map[string]int{}
	added := []addedJSON{}
	addedID := map[string]int{}
	for id, t := range tokens {
		switch types[id] {
		case tokenNormal:
			if prev, dup := vocab[t]; dup {
				return nil, nil, fmt.Errorf("%s: tokenizer.ggml.tokens[%d] %q repeats token %d", f.Path, id, t, prev)
			}
			vocab[t] = id
		case tokenControl, tokenUserDefined:
			added = append(added, addedJSON{ID: id, Content: t, Special: types[id] == tokenControl})
			addedID[t] = id
		case tokenUnused:
		default:
			return nil, nil, fmt.Errorf("%s: tokenizer.ggml.token_type[%d] (%q) is %d: a byte-level BPE has NORMAL, CONTROL, USER_DEFINED and UNUSED tokens (1, 3, 4, 5)", f.Path, id, t, types[id])
		}
	}
	merges, err := f.Strings("tokenizer.ggml.merges")
	if err != nil {
		return nil, nil, err
	}
	pairs := make([][2]string, len(merges))
	for i, mg := range merges {
		a, b, ok := strings.Cut(mg, " ")
		if !ok || strings.Contains(b, " ") {
			return nil, nil, fmt.Errorf("%s: tokenizer.ggml.merges[%d] %q is not two tokens separated by a space", f.Path, i, mg)
		}
		for _, t := range []string{a, b, a + b} {
			if _, ok := vocab[t]; ok {
				continue
			}
			// A vocabulary may hold an added token too (GPT-2's
			// <|endoftext|>); only a merge shows it.
			id, ok := addedID[t]
			if !ok {
				return nil, nil, fmt.Errorf("%s: tokenizer.ggml.merges[%d] %q: %q is not a token", f.Path, i, mg, t)
			}
			vocab[t] = id
		}
		pairs[i] = [2]string{a, b}
	}
	cfg, post, err := tokenizerConfig(f, tokens, split)
	if err != nil {
		return nil, nil, err
	}
	doc := map[string]any{
		"version": "1.0", "truncation": nil, "padding": nil,
		"added_tokens":   added,
		"normalizer":     split.normalizer,
		"pre_tokenizer":  split.pre,
		"post_processor": post,
		"decoder":        byteLevel(false),
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "", "end_of_word_suffix": "",
			"fuse_unk": false, "byte_fallback": false, "ignore_merges": split.ignoreMerges,
			"vocab": vocab, "merges": pairs,
		},
	}
	if tokJSON, err = json.Marshal(doc); err != nil {
		return nil, nil, err
	}
	if configJSON, err = json.MarshalIndent(cfg, "", "  "); err != nil {
		return nil, nil, err
	}
	return tokJSON, append(configJSON, '\n'), nil
}

// tokenizerConfig is tokenizer_config.json, and the post-processor that
// adds the BOS and EOS that add_bos_token and add_eos_token ask for (nil
// when neither), as Hugging Face's tokenizer then has it.
func tokenizerConfig(f *gguf.File, tokens []string, split preSplit) (map[string]any, any, error) {
	cfg := map[string]any{"clean_up_tokenization_spaces": false}
	ids := map[string]int{}
	for _, name := range []string{"bos", "eos", "unknown", "padding"} {
		key := "tokenizer.ggml." + name + "_token_id"
		if !f.Has(key) {
			continue
		}
		id, err := f.Uint(key)
		if err != nil {
			return nil, nil, err
		}
		if id >= uint64(len(tokens)) {
			return nil, nil, fmt.Errorf("%s: %s is %d, outside the %d tokens", f.Path, key, id, len(tokens))
		}
		ids[name] = int(id)
		field := map[string]string{"bos": "bos_token", "eos": "eos_token", "unknown": "unk_token", "padding": "pad_token"}[name]
		cfg[field] = tokens[id]
	}
	add := map[string]bool{"bos": split.addBOS, "eos": false}
	for _, name := range []string{"bos", "eos"} {
		key := "tokenizer.ggml.add_" + name + "_token"
		if f.Has(key) {
			b, err := f.Bool(key)
			if err != nil {
				return nil, nil, err
			}
			add[name] = b
		}
		if _, ok := ids[name]; add[name] && !ok {
			return nil, nil, fmt.Errorf("%s: %s asks for a token that tokenizer.ggml.%s_token_id does not name", f.Path, key, name)
		}
		cfg["add_"+name+"_token"] = add[name]
	}
	if f.Has("tokenizer.chat_template") {
		t, err := f.String("tokenizer.chat_template")
		if err != nil {
			return nil, nil, err
		}
		cfg["chat_template"] = t
	}
	if !add["bos"] && !add["eos"] {
		return cfg, nil, nil
	}
	special := map[string]any{}
	piece := func(name string) any {
		t := tokens[ids[name]]
		special[t] = map[string]any{"id": t, "ids": []int{ids[name]}, "tokens": []string{t}}
		return map[string]any{"SpecialToken": map[string]any{"id": t, "type_id": 0}}
	}
	seq := func(id string) []any {
		var out []any
		if add["bos"] {
			out = append(out, piece("bos"))
		}
		out = append(out, map[string]any{"Sequence": map[string]any{"id": id, "type_id": 0}})
		if add["eos"] {
			out = append(out, piece("eos"))
		}
		return out
	}
	post := map[string]any{"type": "TemplateProcessing", "single": seq("A"), "pair": append(seq("A"), seq("B")...), "special_tokens": special}
	return cfg, post, nil
}
