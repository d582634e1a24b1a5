package tokenizer

import "sort"

// What a converter to another format (llama.cpp's GGUF) needs to know of
// a tokenizer beyond encoding: its merges, its kind of pre-tokenizer and
// which tokens were added.

// ByteLevel reports whether the model reads words as bytes mapped to
// printable characters (GPT-2's byte-level BPE, llama.cpp's "gpt2").
func (t *Tokenizer) ByteLevel() bool { return t.model.byteMode }

// Merges returns the BPE merges in priority order, each as the two token
// strings joined by a space, as tokenizer.json's legacy form and GGUF's
// tokenizer.ggml.merges write them.
func (t *Tokenizer) Merges() []string {
	type ranked struct {
		rank int32
		s    string
	}
	str := make(map[int32]string, len(t.model.vocab))
	for s, id := range t.model.vocab {
		str[int32(id)] = s
	}
	rs := make([]ranked, 0, len(t.model.merges))
	for k, m := range t.model.merges {
		rs = append(rs, ranked{m.rank, str[int32(uint32(k>>32))] + " " + str[int32(uint32(k))]})
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].rank < rs[j].rank })
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.s
	}
	return out
}

// Split names the pre-tokenizer when it is exactly one of the splits with
// a name elsewhere: "qwen2" (Qwen2's regex) or "llama3" (Llama 3's, whose
// digit runs stop at three); "" for any other.
func (t *Tokenizer) Split() string {
	switch t.scanDigits {
	case 1:
		return "qwen2"
	case 3:
		return "llama3"
	}
	return ""
}

// IsAdded reports whether id is an added token, special or not.
func (t *Tokenizer) IsAdded(id int) bool {
	return id >= 0 && id < len(t.kind) && (t.kind[id] == addedToken || t.kind[id] == specialToken)
}

// SplitPattern is the regex of the split that Split names ("qwen2",
// "llama3"), as tokenizer.json's Split pre-tokenizer writes it, so that a
// converter from a format that stores only the name (llama.cpp's
// tokenizer.ggml.pre) writes the pattern this package recognizes; "" for
// any other name.
func SplitPattern(name string) string {
	return map[string]string{"qwen2": qwen2Pattern, "llama3": llama3Pattern}[name]
}
