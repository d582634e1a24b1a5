package tokenizer

import (
	"fmt"
	"sync"
	"unicode/utf8"
)

// bpe is Hugging Face's BPE model. It works on ids: a word starts as the ids
// of its characters and merges replace adjacent pairs of ids. In byteMode
// (a ByteLevel pre-tokenizer last) words arrive as raw bytes and each byte
// stands for its byte-level character, which saves building the byte-level
// string; otherwise words are text and each character is looked up.
type bpe struct {
	byteMode     bool
	byteID       [256]int32           // byteMode: id of each byte's character, -1 if absent
	asciiID      [utf8.RuneSelf]int32 // id of each one-character ASCII token, -1 if absent
	runeID       map[rune]int32       // ids of the other one-character tokens
	byteFallback bool
	fallbackID   [256]int32 // ids of <0x00>..<0xFF>, -1 if absent
	merges       map[uint64]merge
	vocab        map[string]int
	unk          int32 // -1: characters outside the vocabulary are dropped
	fuseUnk      bool
	ignoreMerges bool

	mu    sync.RWMutex
	cache map[string][]int32
}

type merge struct{ rank, id int32 }

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

const (
	maxCachedWord  = 256     // bytes; longer words are rare and cheap to redo
	maxCacheWords  = 1 << 16 // the cache is dropped when it grows past this
	quadraticLimit = 64      // symbols; longer words use the heap
)

func newBPE(m *modelJSON, byteMode bool) (*bpe, error) {
	switch m.Type {
	case "BPE", "":
	default:
		return nil, fmt.Errorf("model.type: unsupported model %q (want BPE)", short(m.Type))
	}
	switch {
	case m.Vocab == nil:
		return nil, fmt.Errorf("model.vocab: missing")
	case m.Dropout != nil && *m.Dropout != 0:
		// Hugging Face treats 0 as no dropout.
		return nil, fmt.Errorf("model.dropout: unsupported %v (want null)", *m.Dropout)
	case m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "":
		return nil, fmt.Errorf("model.continuing_subword_prefix: unsupported %q", short(*m.ContinuingSubwordPrefix))
	case m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "":
		return nil, fmt.Errorf("model.end_of_word_suffix: unsupported %q", short(*m.EndOfWordSuffix))
	}
	for tok, id := range m.Vocab {
		if id < 0 || id >= maxID {
			return nil, fmt.Errorf("model.vocab: token %q has id %d, outside [0, %d)", short(tok), id, maxID)
		}
	}
	b := &bpe{
		byteMode:     byteMode,
		runeID:       make(map[rune]int32),
		byteFallback: m.ByteFallback,
		merges:       make(map[uint64]merge, len(m.Merges)),
		vocab:        m.Vocab,
		unk:          -1,
		fuseUnk:      m.FuseUnk,
		ignoreMerges: m.IgnoreMerges,
		cache:        make(map[string][]int32),
	}
	if m.UnkToken != nil {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("model.unk_token: %q is not in model.vocab", short(*m.UnkToken))
		}
		b.unk = int32(id)
	}
	for c := range 256 {
		b.byteID[c] = -1
		if id, ok := m.Vocab[string(byteRune[c])]; ok {
			b.byteID[c] = int32(id)
		}
		b.fallbackID[c] = -1
		if id, ok := m.Vocab[fmt.Sprintf("<0x%02X>", c)]; ok {
			b.fallbackID[c] = int32(id)
		}
	}
	for i := range b.asciiID {
		b.asciiID[i] = -1
	}
	for tok, id := range m.Vocab {
		r, w := utf8.DecodeRuneInString(tok)
		switch {
		case w != len(tok) || (r == utf8.RuneError && w == 1):
		case r < utf8.RuneSelf:
			b.asciiID[r] = int32(id)
		default:
			b.runeID[r] = int32(id)
		}
	}
	for i, raw := range m.Merges {
		left, right, err := parseMerge(raw, i)
		if err != nil {
			return nil, err
		}
		a, okA := m.Vocab[left]
		c, okB := m.Vocab[right]
		id, okM := m.Vocab[left+right]
		switch {
		case !okA:
			return nil, fmt.Errorf("model.merges[%d]: token %q is not in model.vocab", i, short(left))
		case !okB:
			return nil, fmt.Errorf("model.merges[%d]: token %q is not in model.vocab", i, short(right))
		case !okM:
			return nil, fmt.Errorf("model.merges[%d]: merged token %q is not in model.vocab", i, short(left+right))
		}
		// A repeated pair keeps its last rank, as in Hugging Face.
		b.merges[pairKey(int32(a), int32(c))] = merge{int32(i), int32(id)}
	}
	return b, nil
}

// encodeWord appends the ids of one pre-tokenized word to ids.
func (b *bpe) encodeWord(word string, ids []int) []int {
	if len(word) <= maxCachedWord {
		b.mu.RLock()
		cached, ok := b.cache[word]
		b.mu.RUnlock()
		if ok {
			for _, id := range cached {
				ids = append(ids, int(id))
			}
			return ids
		}
	}
	out := b.merge(word)
	if len(word) <= maxCachedWord {
		b.mu.Lock()
		if len(b.cache) >= maxCacheWords {
			clear(b.cache)
		}
		b.cache[word] = out
		b.mu.Unlock()
	}
	for _, id := range out {
		ids = append(ids, int(id))
	}
	return ids
}

func (b *bpe) merge(word string) []int32 {
	if b.ignoreMerges {
		key := word
		if b.byteMode {
			key = byteLevel(word)
		}
		if id, ok := b.vocab[key]; ok {
			return []int32{int32(id)}
		}
	}
	syms := b.symbols(word)
	if len(syms) <= quadraticLimit {
		return b.mergeQuadratic(syms)
	}
	return b.mergeHeap(syms)
}

// symbols maps a word to the ids of its characters as BPE::merge_word does:
// a character outside the vocabulary becomes its <0xNN> byte tokens with
// byte_fallback (when all of them exist), else unk_token, consecutive ones
// fused into one with fuse_unk, else nothing. Like Hugging Face, a pending
// unk is only written out at the next known character or at the end, so it
// can land after the byte tokens of a later character.
func (b *bpe) symbols(word string) []int32 {
	syms := make([]int32, 0, len(word))
	pendingUnk := false
	for i := 0; i < len(word); {
		var id int32
		var ch string // the character, for byte fallback
		if b.byteMode {
			c := word[i]
			i++
			if id = b.byteID[c]; id < 0 {
				ch = string(byteRune[c])
			}
		} else {
			r, w := decodeRune(word, i)
			ch = word[i : i+w]
			i += w
			switch {
			case r < utf8.RuneSelf:
				id = b.asciiID[r]
			case r == utf8.RuneError && w == 1:
				id = -1 // an invalid byte is no vocabulary entry
			default:
				var ok bool
				if id, ok = b.runeID[r]; !ok {
					id = -1
				}
			}
		}
		if id >= 0 {
			if pendingUnk {
				syms, pendingUnk = append(syms, b.unk), false
			}
			syms = append(syms, id)
			continue
		}
		if b.byteFallback && b.hasFallback(ch) {
			for j := 0; j < len(ch); j++ {
				syms = append(syms, b.fallbackID[ch[j]])
			}
			continue
		}
		if b.unk >= 0 {
			if pendingUnk && !b.fuseUnk {
				syms = append(syms, b.unk)
			}
			pendingUnk = true
		}
	}
	if pendingUnk {
		syms = append(syms, b.unk)
	}
	return syms
}

func (b *bpe) hasFallback(ch string) bool {
	for j := 0; j < len(ch); j++ {
		if b.fallbackID[ch[j]] < 0 {
			return false
		}
	}
	return true
}

// mergeQuadratic applies the lowest-ranked adjacent merge, leftmost first
// on ties, until none applies. For short words scanning beats a heap; each
// pair's merge is looked up once and kept, as the map is the costly part.
func (b *bpe) mergeQuadratic(syms []int32) []int32 {
	if len(syms) < 2 {
		return syms
	}
	var buf [quadraticLimit]merge
	pairs := buf[:len(syms)-1] // pairs[i] joins syms[i] and syms[i+1]
	for i := range pairs {
		pairs[i] = b.lookup(syms[i], syms[i+1])
	}
	for len(pairs) > 0 {
		at := -1
		for i, m := range pairs {
			if m.rank >= 0 && (at < 0 || m.rank < pairs[at].rank) {
				at = i
			}
		}
		if at < 0 {
			break
		}
		syms[at] = pairs[at].id
		syms = append(syms[:at+1], syms[at+2:]...)
		pairs = append(pairs[:at], pairs[at+1:]...)
		if at > 0 {
			pairs[at-1] = b.lookup(syms[at-1], syms[at])
		}
		if at < len(pairs) {
			pairs[at] = b.lookup(syms[at], syms[at+1])
		}
	}
	return syms
}

// lookup returns the merge of a and b, with rank -1 when there is none.
func (b *bpe) lookup(x, y int32) merge {
	if m, ok := b.merges[pairKey(x, y)]; ok {
		return m
	}
	return merge{rank: -1}
}
