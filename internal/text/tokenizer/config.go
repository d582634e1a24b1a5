package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// fileJSON is the part of tokenizer.json that affects ids and text.
// truncation and padding are ignored: Encode never truncates or pads.
type fileJSON struct {
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	Model         *modelJSON       `json:"model"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
}

type addedTokenJSON struct {
	ID         *int   `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized *bool  `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelJSON struct {
	Type                    string            `json:"type"`
	Vocab                   map[string]int    `json:"vocab"`
	Merges                  []json.RawMessage `json:"merges"` // see parseMerge
	Dropout                 *float64          `json:"dropout"`
	UnkToken                *string           `json:"unk_token"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	FuseUnk                 bool              `json:"fuse_unk"`
	ByteFallback            bool              `json:"byte_fallback"`
	IgnoreMerges            bool              `json:"ignore_merges"`
}

// parseMerge accepts both encodings seen in the wild: "a b" (older files)
// and ["a","b"] (tokenizers >= 0.20).
func parseMerge(raw json.RawMessage, i int) (a, b string, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) > 0 && raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", "", fmt.Errorf("model.merges[%d]: %v", i, err)
		}
		a, b, ok := strings.Cut(s, " ")
		if !ok || strings.Contains(b, " ") {
			return "", "", fmt.Errorf("model.merges[%d]: %q is not two tokens separated by one space", i, short(s))
		}
		return a, b, nil
	}
	var pair []string
	if err := json.Unmarshal(raw, &pair); err != nil {
		return "", "", fmt.Errorf("model.merges[%d]: %s is neither \"a b\" nor [\"a\", \"b\"]", i, clip(raw))
	}
	if len(pair) != 2 {
		return "", "", fmt.Errorf("model.merges[%d]: %s has %d parts, want 2", i, clip(raw), len(pair))
	}
	return pair[0], pair[1], nil
}

// component is the common shape of normalizers, pre-tokenizers,
// post-processors and decoders: each reads the fields of its type.
type component struct {
	Type          string            `json:"type"`
	Normalizers   []json.RawMessage `json:"normalizers"`
	PreTokenizers []json.RawMessage `json:"pretokenizers"`
	Processors    []json.RawMessage `json:"processors"`
	Decoders      []json.RawMessage `json:"decoders"`
	Pattern       *patternJSON      `json:"pattern"`
	Content       *string           `json:"content"`
	Behavior      *string           `json:"behavior"`
	Invert        *bool             `json:"invert"`
	Prepend       *string           `json:"prepend"`
	StripLeft     *bool             `json:"strip_left"`
	StripRight    *bool             `json:"strip_right"`
	// ByteLevel and Metaspace
	AddPrefixSpace *bool   `json:"add_prefix_space"`
	UseRegex       *bool   `json:"use_regex"`
	Replacement    *string `json:"replacement"`
	PrependScheme  *string `json:"prepend_scheme"`
	Split          *bool   `json:"split"`
	// Digits
	IndividualDigits *bool `json:"individual_digits"`
	// the Strip decoder
	Start *int `json:"start"`
	Stop  *int `json:"stop"`
}

// maxID and sparseSlack bound ids so that a hostile or broken file cannot
// make us allocate gigabytes for the id table. Real files number their
// tokens densely, but a small vocabulary may put its special tokens at a
// large model's ids (logitscope's synthetic qwen2.5-0.5b puts them at
// 151643..), so the slack covers any vocabulary up to 2^18 ids.
const (
	maxID       = 1 << 24
	sparseSlack = 1 << 18
)

func build(data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, jsonError(err)
	}
	t := &Tokenizer{}
	var err error
	if t.normalize, err = parseNormalizer(f.Normalizer, "normalizer"); err != nil {
		return nil, err
	}
	if t.pre, err = parsePreTokenizer(f.PreTokenizer, "pre_tokenizer"); err != nil {
		return nil, err
	}
	// A ByteLevel pre-tokenizer at the end leaves the byte mapping to the
	// model, which then reads words as raw bytes; without its own regex
	// or prefix space it has nothing else to do.
	byteMode := false
	if n := len(t.pre); n > 0 {
		if bl, ok := t.pre[n-1].(*byteLevelPre); ok {
			byteMode, bl.mapBytes = true, false
			if !bl.addPrefixSpace && bl.regex == nil {
				t.pre = t.pre[:n-1]
			}
		}
	}
	if len(t.pre) == 1 {
		if sp, ok := t.pre[0].(*splitPre); ok && sp.behavior == isolated {
			if sm, ok := sp.m.(scanMatcher); ok {
				t.scanDigits = sm.digits
			}
		}
	}
	if t.decoder, err = parseDecoder(f.Decoder, "decoder"); err != nil {
		return nil, err
	}
	_, t.byteLevel = t.decoder.(byteLevelDec)
	if f.Model == nil {
		return nil, errors.New("model: missing")
	}
	if t.model, err = newBPE(f.Model, byteMode); err != nil {
		return nil, err
	}
	t.vocab = f.Model.Vocab
	if t.added, err = newAddedVocab(f.AddedTokens, t.normalize); err != nil {
		return nil, err
	}
	size := 0
	for _, id := range t.vocab {
		size = max(size, id+1)
	}
	for _, a := range f.AddedTokens {
		size = max(size, *a.ID+1)
	}
	if entries := len(t.vocab) + len(f.AddedTokens); size > 2*entries+sparseSlack {
		return nil, fmt.Errorf("ids are too sparse: %d tokens use ids up to %d", entries, size-1)
	}
	t.idToken = make([]string, size)
	t.kind = make([]tokenKind, size)
	for tok, id := range t.vocab {
		if t.kind[id] != noToken {
			prev := t.idToken[id]
			return nil, fmt.Errorf("model.vocab: id %d is used by both %q and %q", id, short(min(prev, tok)), short(max(prev, tok)))
		}
		t.idToken[id], t.kind[id] = tok, vocabToken
	}
	// An added token may repeat a vocabulary entry (byte-level files list
	// their special tokens in both places), but an id given to two different
	// strings would make Encode and Decode disagree about what it means.
	addedAt := map[int]int{} // id → index of the first added token with it
	for i, a := range f.AddedTokens {
		id := *a.ID
		if prev := t.idToken[id]; t.kind[id] != noToken && prev != a.Content {
			owner := "model.vocab"
			if j, ok := addedAt[id]; ok {
				owner = fmt.Sprintf("added_tokens[%d]", j)
			}
			return nil, fmt.Errorf("added_tokens[%d]: %q has id %d, which %s gives to %q", i, short(a.Content), id, owner, short(prev))
		}
		// Hugging Face's Rust crate would give the token its vocabulary id
		// and tokenizers.js the file's: refuse rather than pick one.
		if vid, ok := t.vocab[a.Content]; ok && vid != id {
			return nil, fmt.Errorf("added_tokens[%d]: %q has id %d, but model.vocab gives it %d", i, short(a.Content), id, vid)
		}
		if _, ok := addedAt[id]; !ok {
			addedAt[id] = i
		}
		t.idToken[id], t.kind[id] = a.Content, addedToken
		if a.Special {
			t.kind[id] = specialToken
		}
	}
	known := func(id int) bool { return id >= 0 && id < len(t.kind) && t.kind[id] != noToken }
	if t.post, err = parsePostProcessor(f.PostProcessor, "post_processor", known); err != nil {
		return nil, err
	}
	return t, nil
}

// jsonError says where a syntax or type error is, without echoing input.
func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("malformed JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "top level"
		}
		return fmt.Errorf("%s: JSON %s where %v was expected (byte %d)", field, te.Value, te.Type, te.Offset)
	}
	return fmt.Errorf("malformed JSON: %v", err)
}

// short cuts a value from the file before it is quoted in an error, so a
// hostile file cannot produce a megabyte-long message.
func short(s string) string {
	const n = 120
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

func clip(b []byte) string {
	const n = 40
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

func parseComponent(raw json.RawMessage, field string) (*component, error) {
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("%s: %v", field, jsonError(err))
	}
	return &c, nil
}
