// Package tokenizer implements Hugging Face tokenizer.json byte-level BPE as
// used by Qwen2 (NFC, the Qwen2 split pattern, ByteLevel, merges by rank,
// added tokens matched first) and the ChatML chat template.
package tokenizer

import "errors"

// Tokenizer is a loaded tokenizer.json.
type Tokenizer struct{}

var errTODO = errors.New("TODO")

// Load reads tokenizer.json from path.
func Load(path string) (*Tokenizer, error) { return nil, errTODO }

// Parse parses tokenizer.json bytes; name is used in errors.
func Parse(data []byte, name string) (*Tokenizer, error) { return nil, errTODO }

// Encode returns the token ids of text, without adding any special token.
func (t *Tokenizer) Encode(text string) []int { return nil }

// Decode turns ids back into text; with skipSpecial, special added tokens are dropped.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) string { return "" }

// TokenID looks up a token string (vocabulary or added token).
func (t *Tokenizer) TokenID(token string) (int, bool) { return 0, false }

// VocabSize is the largest id plus one, added tokens included.
func (t *Tokenizer) VocabSize() int { return 0 }

// Message is one chat turn.
type Message struct{ Role, Content string }

// DefaultSystem is Qwen2.5's default system prompt.
const DefaultSystem = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."

// ChatML renders messages as <|im_start|>role\ncontent<|im_end|>\n and, with
// addGenerationPrompt, a trailing "<|im_start|>assistant\n".
func ChatML(msgs []Message, addGenerationPrompt bool) string { return "" }
