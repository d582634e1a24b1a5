package synth

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode"
)

//go:embed corpus.txt
var corpus string

// qwenSplit is Qwen2's pre-tokenizer pattern, so that the synthetic
// tokenizer exercises the same code path as the real one.
const qwenSplit = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// Qwen's special tokens, in Qwen's order; the first three are the ones a
// ChatML capture needs.
var specials = []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"}

// byteLevel is GPT-2's reversible map from bytes to printable runes, in
// the order that byte-level vocabularies (Qwen's included) number them.
func byteLevel() (order []byte, rn [256]rune) {
	n := 0
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			order = append(order, byte(b))
			rn[b] = rune(b)
		}
	}
	for b := 0; b < 256; b++ {
		if !(b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE) {
			order = append(order, byte(b))
			rn[b] = rune(256 + n)
			n++
		}
	}
	return order, rn
}

// trainBPE learns up to n merges from the embedded corpus: the classic BPE
// loop (merge the most frequent adjacent pair, ties broken by the pair's
// text) over words split at spaces, each space kept at the front of the
// word that follows it as the Qwen pattern does.
func trainBPE(n int) [][2]string {
	_, rn := byteLevel()
	freq := map[string]int{}
	for _, w := range words(corpus) {
		var sb strings.Builder
		for _, b := range []byte(w) {
			sb.WriteRune(rn[b])
		}
		freq[sb.String()]++
	}
	type word struct {
		syms []string
		n    int
	}
	var ws []word
	keys := make([]string, 0, len(freq))
	for k := range freq {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var syms []string
		for _, r := range k {
			syms = append(syms, string(r))
		}
		ws = append(ws, word{syms, freq[k]})
	}
	var merges [][2]string
	for len(merges) < n {
		counts := map[[2]string]int{}
		for _, w := range ws {
			for i := 0; i+1 < len(w.syms); i++ {
				counts[[2]string{w.syms[i], w.syms[i+1]}] += w.n
			}
		}
		var best [2]string
		bestN := 1 // a pair seen once teaches nothing
		for p, c := range counts {
			if c > bestN || c == bestN && bestN > 1 && p[0]+" "+p[1] < best[0]+" "+best[1] {
				best, bestN = p, c
			}
		}
		if bestN < 2 {
			break
		}
		merges = append(merges, best)
		for wi := range ws {
			s := ws[wi].syms
			out := s[:0]
			for i := 0; i < len(s); i++ {
				if i+1 < len(s) && s[i] == best[0] && s[i+1] == best[1] {
					out = append(out, best[0]+best[1])
					i++
				} else {
					out = append(out, s[i])
				}
			}
			ws[wi].syms = out
		}
	}
	return merges
}

// words splits text into letter runs, digits, punctuation runs and
// whitespace, each run of letters or punctuation keeping one leading space.
func words(text string) []string {
	var out []string
	rs := []rune(text)
	for i := 0; i < len(rs); {
		j := i
		if rs[j] == ' ' && j+1 < len(rs) && !unicode.IsSpace(rs[j+1]) {
			j++
		}
		class := func(r rune) int {
			switch {
			case unicode.IsLetter(r):
				return 0
			case unicode.IsDigit(r):
				return 1
			case unicode.IsSpace(r):
				return 2
			}
			return 3
		}
		c := class(rs[j])
		k := j + 1
		for k < len(rs) && class(rs[k]) == c && c != 1 {
			k++
		}
		out = append(out, string(rs[i:k]))
		i = k
	}
	return out
}

// tokenizerJSON builds a Hugging Face tokenizer.json with a byte-level BPE
// vocabulary of 256 bytes plus the learned merges, and Qwen's special
// tokens at specialBase, specialBase+1, ... (0: right after the
// vocabulary). It returns the file and the id of <|endoftext|>.
func tokenizerJSON(merges [][2]string, specialBase int) ([]byte, int, error) {
	order, rn := byteLevel()
	vocab := map[string]int{}
	for i, b := range order {
		vocab[string(rn[b])] = i
	}
	pairs := make([][]string, len(merges))
	for i, m := range merges {
		// Two merges can spell the same token ("ab"+"c", "a"+"bc"): one id.
		if _, ok := vocab[m[0]+m[1]]; !ok {
			vocab[m[0]+m[1]] = len(vocab)
		}
		pairs[i] = []string{m[0], m[1]}
	}
	if specialBase == 0 {
		specialBase = len(vocab)
	}
	if specialBase < len(vocab) {
		return nil, 0, fmt.Errorf("special tokens at %d would overlap the %d-token vocabulary", specialBase, len(vocab))
	}
	type added struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		Lstrip     bool   `json:"lstrip"`
		Rstrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	}
	var adds []added
	for i, s := range specials {
		adds = append(adds, added{ID: specialBase + i, Content: s, Special: true})
	}
	byteLevelStep := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
	doc := map[string]any{
		"version":      "1.0",
		"truncation":   nil,
		"padding":      nil,
		"added_tokens": adds,
		"normalizer":   map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]string{"Regex": qwenSplit}, "behavior": "Isolated", "invert": false},
			byteLevelStep,
		}},
		"post_processor": byteLevelStep,
		"decoder":        byteLevelStep,
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": "",
			"end_of_word_suffix": "", "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": pairs,
		},
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	return append(b, '\n'), specialBase, err
}
