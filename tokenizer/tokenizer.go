// Package tokenizer implements Hugging Face tokenizer.json byte-level BPE as
// used by Qwen2 (NFC, the Qwen2 split pattern, ByteLevel, merges by rank,
// added tokens matched first) and the ChatML chat template.
//
// Encode follows Hugging Face's pipeline: added tokens with "normalized":
// false are cut out of the raw text first (leftmost, then longest); each
// remaining piece is normalized on its own, then searched for normalized
// added tokens, split by the Qwen2 pattern, mapped to byte-level characters
// and merged by rank. Its ids match Hugging Face's on the conformance corpus
// in testdata (see oracle_test.go). Configurations other than Qwen2's are
// refused by Parse with an error naming the field, rather than tokenized
// differently.
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
	normalize func(string) string // nil: no normalizer
	model     *bpe
	added     *addedVocab

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

// Encode returns the token ids of text, without adding any special token.
//
// Bytes that are not valid UTF-8 are kept and encoded as their byte-level
// tokens, so nothing is lost (Hugging Face only accepts valid strings).
func (t *Tokenizer) Encode(text string) []int {
	ids := make([]int, 0, len(text)/3+1)
	t.added.split(text, false, func(seg string, tok int) {
		if tok >= 0 {
			ids = append(ids, tok)
			return
		}
		if t.normalize != nil {
			seg = t.normalize(seg)
		}
		t.added.split(seg, true, func(sub string, tok int) {
			if tok >= 0 {
				ids = append(ids, tok)
				return
			}
			splitQwen2(sub, func(word string) {
				ids = t.model.encodeWord(word, ids)
			})
		})
	})
	return ids
}

// Decode turns ids back into text; with skipSpecial, special added tokens are dropped.
// Ids that name no token are skipped, as Hugging Face does. Bytes that do not
// form valid UTF-8 become U+FFFD, one per maximal invalid subpart, exactly as
// Rust's String::from_utf8_lossy does.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) string {
	buf := make([]byte, 0, len(ids)*4)
	for _, id := range ids {
		if id < 0 || id >= len(t.kind) || t.kind[id] == noToken {
			continue
		}
		if skipSpecial && t.kind[id] == specialToken {
			continue
		}
		buf = appendTokenBytes(buf, t.idToken[id])
	}
	return lossyUTF8(buf)
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

// DefaultSystem is Qwen2.5's default system prompt.
const DefaultSystem = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

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
