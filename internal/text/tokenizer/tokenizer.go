// Package tokenizer implements Hugging Face tokenizer.json BPE tokenizers
// (Qwen, Llama 2 and 3, Gemma 3, DeepSeek-V3 and others built from the same
// parts) and the ChatML chat template.
//
// Encode follows Hugging Face's pipeline: added tokens with "normalized":
// false are cut out of the raw text first (leftmost, then longest); each
// remaining piece is normalized on its own, then searched for normalized
// added tokens, pre-tokenized into words and merged by rank; a post-processor
// may add special tokens around the result. Decode runs the decoders. Ids
// and decoded text match Hugging Face's on the conformance corpus in
// testdata for five real tokenizers (see oracle_test.go).
//
// Supported: normalizers NFC, NFD, NFKC, NFKD, Lowercase, Strip, Prepend,
// Replace and Sequence; pre-tokenizers Split (with the regexes real files
// carry, see pattern.go), ByteLevel, Metaspace, Digits and Sequence; the BPE
// model with byte_fallback, fuse_unk, unk_token and ignore_merges; added
// tokens with every flag; post-processors TemplateProcessing, ByteLevel and
// Sequence; decoders ByteLevel, Metaspace, ByteFallback, Fuse, Strip,
// Replace and Sequence. Parse refuses anything else with an error naming
// the JSON path and type, rather than tokenize differently.
//
// A *Tokenizer is safe for concurrent use.
package tokenizer

import (
	"fmt"
	"os"
	"strings"
)

// Tokenizer is a loaded tokenizer.json.
type Tokenizer struct {
	normalize normalizer     // nil: no normalizer
	pre       []preTokenizer // applied in turn; none: the piece is one word
	model     *bpe
	added     *addedVocab
	post      *template // nil: the post-processor adds nothing
	decoder   decoder   // nil: Decode joins tokens with spaces
	byteLevel bool      // the decoder is ByteLevel alone: Decode's fast path
	// scanDigits > 0: the pre-tokenizer is just the Qwen2 or Llama 3 split
	// (its \p{N} run limit), which encode calls directly.
	scanDigits int

	// idToken maps ids to token strings for decoding; added tokens override
	// the model's entry, as Hugging Face looks them up first.
	idToken []string
	kind    []tokenKind
	vocab   map[string]int
}

type tokenKind uint8

const (
	noToken tokenKind = iota // a hole in the id space
	vocabToken
	addedToken
	specialToken // an added token with "special": true
)

// Load reads tokenizer.json from path.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return Parse(data, path)
}

// Parse parses tokenizer.json bytes; name is used in errors.
func Parse(data []byte, name string) (*Tokenizer, error) {
	t, err := build(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %s", name, oneLine(err.Error()))
	}
	return t, nil
}

// Encode returns the token ids of text without special tokens, as Hugging
// Face's encode(text, add_special_tokens=False): text that already holds
// special tokens, such as a rendered chat template, needs nothing added.
//
// Bytes that are not valid UTF-8 are kept and encoded as their bytes (byte-
// level or byte-fallback tokens), so nothing is lost (Hugging Face only
// accepts valid strings).
func (t *Tokenizer) Encode(text string) []int {
	return t.encode(text, make([]int, 0, len(text)/3+1))
}

// EncodeOptions are the options of EncodeWith and EncodePair.
type EncodeOptions struct {
	// AddSpecialTokens adds what the post-processor adds, such as Llama's
	// and Gemma's BOS (Hugging Face's add_special_tokens=True).
	AddSpecialTokens bool
}

// EncodeWith returns the token ids of text with the given options.
func (t *Tokenizer) EncodeWith(text string, o EncodeOptions) []int {
	ids := t.Encode(text)
	if t.post == nil {
		return ids
	}
	return t.post.apply(ids, nil, false, o.AddSpecialTokens)
}

// EncodePair returns the token ids of a pair of texts, joined by the
// post-processor's pair template (plainly concatenated without one).
func (t *Tokenizer) EncodePair(a, b string, o EncodeOptions) []int {
	ia, ib := t.Encode(a), t.Encode(b)
	if t.post == nil {
		return append(ia, ib...)
	}
	return t.post.apply(ia, ib, true, o.AddSpecialTokens)
}

// SpecialTokens returns the ids that EncodeWith puts before and after the
// text when AddSpecialTokens is set.
func (t *Tokenizer) SpecialTokens() (prefix, suffix []int) {
	if t.post == nil {
		return nil, nil
	}
	return t.post.prefixSuffix()
}

// BOS returns the first id that EncodeWith puts before the text when
// AddSpecialTokens is set (Llama's <|begin_of_text|>, Gemma's <bos>), and
// false when it puts none (Qwen; DeepSeek-V3, whose tokenizer.json leaves
// adding BOS to transformers).
func (t *Tokenizer) BOS() (int, bool) {
	prefix, _ := t.SpecialTokens()
	if len(prefix) == 0 {
		return 0, false
	}
	return prefix[0], true
}

func (t *Tokenizer) encode(text string, ids []int) []int {
	word := func(w string, _ bool) { ids = t.model.encodeWord(w, ids) }
	t.added.split(text, false, func(seg string, start, tok int) {
		if tok >= 0 {
			ids = append(ids, tok)
			return
		}
		if t.normalize != nil {
			seg = t.normalize(seg)
		}
		t.added.split(seg, true, func(sub string, subStart, tok int) {
			if tok >= 0 {
				ids = append(ids, tok)
				return
			}
			if t.scanDigits > 0 {
				for i := 0; i < len(sub); {
					n := matchQwen2(sub, i, t.scanDigits)
					ids = t.model.encodeWord(sub[i:i+n], ids)
					i += n
				}
				return
			}
			runStages(t.pre, sub, start == 0 && subStart == 0, word)
		})
	})
	return ids
}

// Decode turns ids back into text through the tokenizer's decoders, as
// Hugging Face's decode does; with skipSpecial, special added tokens are
// dropped. Ids that name no token are skipped, as Hugging Face does. Byte-
// level bytes that do not form valid UTF-8 become U+FFFD, one per maximal
// invalid subpart, exactly as Rust's String::from_utf8_lossy does.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) string {
	keep := func(id int) bool {
		return id >= 0 && id < len(t.kind) && t.kind[id] != noToken && !(skipSpecial && t.kind[id] == specialToken)
	}
	if t.byteLevel {
		buf := make([]byte, 0, len(ids)*4)
		for _, id := range ids {
			if keep(id) {
				buf = appendTokenBytes(buf, t.idToken[id])
			}
		}
		return lossyUTF8(buf)
	}
	tokens := make([]string, 0, len(ids))
	for _, id := range ids {
		if keep(id) {
			tokens = append(tokens, t.idToken[id])
		}
	}
	if t.decoder == nil {
		return strings.Join(tokens, " ")
	}
	return strings.Join(t.decoder.chain(tokens), "")
}

// TokenID looks up a token string (vocabulary or added token).
func (t *Tokenizer) TokenID(token string) (int, bool) {
	if id, ok := t.added.byContent[token]; ok {
		return id, true
	}
	id, ok := t.vocab[token]
	return id, ok
}

// VocabSize is the largest id plus one, added tokens included.
func (t *Tokenizer) VocabSize() int { return len(t.idToken) }

// Token returns the string of id as stored in tokenizer.json (byte-level
// form for vocabulary tokens).
func (t *Tokenizer) Token(id int) (string, bool) {
	if id < 0 || id >= len(t.kind) || t.kind[id] == noToken {
		return "", false
	}
	return t.idToken[id], true
}

// IsSpecial reports whether id is a special added token (such as <|im_end|>).
func (t *Tokenizer) IsSpecial(id int) bool {
	return id >= 0 && id < len(t.kind) && t.kind[id] == specialToken
}

// Message is one chat turn.
type Message struct{ Role, Content string }

// Turns is the conversation for one user prompt; an empty system prompt
// leaves the system turn out.
func Turns(system, user string) []Message {
	var msgs []Message
	if system != "" {
		msgs = append(msgs, Message{Role: "system", Content: system})
	}
	return append(msgs, Message{Role: "user", Content: user})
}

// ChatML renders messages as <|im_start|>role\ncontent<|im_end|>\n and, with
// addGenerationPrompt, a trailing "<|im_start|>assistant\n".
func ChatML(msgs []Message, addGenerationPrompt bool) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|im_start|>")
		b.WriteString(m.Role)
		b.WriteString("\n")
		b.WriteString(m.Content)
		b.WriteString("<|im_end|>\n")
	}
	if addGenerationPrompt {
		b.WriteString("<|im_start|>assistant\n")
	}
	return b.String()
}

// oneLine keeps error messages on one line whatever the input contained.
func oneLine(s string) string {
	return strings.NewReplacer("\n", `\n`, "\r", `\r`).Replace(s)
}
