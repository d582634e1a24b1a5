package tokenizer

import (
	"fmt"
	"unicode/utf8"
)

// addedVocab finds added tokens (like <|im_start|>) in text before the
// model sees it, as Hugging Face's AddedVocabulary does: tokens with
// "normalized": false are matched in the raw text and the others in the
// normalized text, each leftmost first and, at one position, longest first;
// single_word, lstrip and rstrip act on the match.
type addedVocab struct {
	byContent map[string]int
	raw, norm trie
}

type addedTok struct {
	id                         int
	lstrip, rstrip, singleWord bool
}

// trie is a byte trie of token contents. Gemma 3 has over 6000 added
// tokens, most starting with "<", too many to try one by one.
type trie struct {
	first [256]bool        // bytes that start some token
	edges map[uint64]int32 // node<<8 | byte → child node
	term  []int32          // node → index into toks, -1 if no token ends there
	toks  []addedTok
}

func (t *trie) empty() bool { return len(t.toks) == 0 }

func (t *trie) add(content string, tok addedTok) {
	t.first[content[0]] = true
	if t.edges == nil {
		t.edges = make(map[uint64]int32)
		t.term = []int32{-1}
	}
	node := int32(0)
	for i := 0; i < len(content); i++ {
		key := uint64(node)<<8 | uint64(content[i])
		next, ok := t.edges[key]
		if !ok {
			next = int32(len(t.term))
			t.term = append(t.term, -1)
			t.edges[key] = next
		}
		node = next
	}
	if t.term[node] < 0 {
		t.term[node] = int32(len(t.toks))
		t.toks = append(t.toks, tok)
		return
	}
	// Two entries with one content: the later one wins, as it replaces
	// the earlier in Hugging Face's map.
	t.toks[t.term[node]] = tok
}

// longest returns the longest token at the start of s.
func (t *trie) longest(s string) (addedTok, int, bool) {
	node, best, n := int32(0), int32(-1), 0
	for i := 0; i < len(s); i++ {
		next, ok := t.edges[uint64(node)<<8|uint64(s[i])]
		if !ok {
			break
		}
		node = next
		if t.term[node] >= 0 {
			best, n = t.term[node], i+1
		}
	}
	if best < 0 {
		return addedTok{}, 0, false
	}
	return t.toks[best], n, true
}

func newAddedVocab(list []addedTokenJSON, normalize normalizer) (*addedVocab, error) {
	v := &addedVocab{byContent: make(map[string]int, len(list))}
	for i, a := range list {
		if a.ID == nil {
			return nil, fmt.Errorf("added_tokens[%d].id: missing", i)
		}
		if *a.ID < 0 || *a.ID >= maxID {
			return nil, fmt.Errorf("added_tokens[%d].id: %d is outside [0, %d)", i, *a.ID, maxID)
		}
		v.byContent[a.Content] = *a.ID
		tok := addedTok{*a.ID, a.LStrip, a.RStrip, a.SingleWord}
		// Hugging Face's default: special tokens are matched raw.
		normalized := !a.Special
		if a.Normalized != nil {
			normalized = *a.Normalized
		}
		content, t := a.Content, &v.raw
		if normalized && normalize != nil {
			content, t = normalize(content), &v.norm
		} else if normalized {
			t = &v.norm
		}
		if content == "" {
			continue // Hugging Face ignores empty tokens
		}
		t.add(content, tok)
	}
	return v, nil
}

// split calls emit for each piece of text in order: plain text with tok -1,
// or an added token's id, and where the piece starts in text. Whitespace eaten by lstrip/rstrip is dropped.
// It follows AddedVocabulary::find_matches, quirks included: matches come
// from one leftmost-longest pass over the text, so a match refused by
// single_word does not let a shorter token match there, and the pass goes
// on from the end of the match, not from the end of what rstrip took.
func (v *addedVocab) split(text string, normalized bool, emit func(seg string, start, tok int)) {
	t := &v.raw
	if normalized {
		t = &v.norm
	}
	if t.empty() {
		if text != "" {
			emit(text, 0, -1)
		}
		return
	}
	done := 0 // text[:done] has been emitted
	for i := 0; i < len(text); {
		if !t.first[text[i]] {
			i++
			continue
		}
		tok, n, ok := t.longest(text[i:])
		if !ok {
			i++
			continue
		}
		start, stop := i, i+n
		i = stop
		if tok.singleWord && (endsWithWord(text[:start]) || startsWithWord(text[stop:])) {
			continue
		}
		if tok.lstrip {
			ws := start
			for ws > 0 {
				r, w := utf8.DecodeLastRuneInString(text[:ws])
				if !isWhiteSpace(r) || (r == utf8.RuneError && w == 1) {
					break
				}
				ws -= w
			}
			start = max(ws, done)
		}
		if tok.rstrip {
			for stop < len(text) {
				r, w := utf8.DecodeRuneInString(text[stop:])
				if !isWhiteSpace(r) || (r == utf8.RuneError && w == 1) {
					break
				}
				stop += w
			}
		}
		if start > done {
			emit(text[done:start], done, -1)
		}
		emit("", start, tok.id)
		done = stop
	}
	if done < len(text) {
		emit(text[done:], done, -1)
	}
}

// wordSet is the Rust regex crate's Unicode \w, which single_word uses.
var wordSet = func() *charSet {
	c := &charSet{}
	r := wordChars()
	for i := 0; i+1 < len(r); i += 2 {
		for x := r[i]; x <= r[i+1] && x < utf8.RuneSelf; x++ {
			c.ascii[x>>6] |= 1 << (x & 63)
		}
		if r[i+1] >= utf8.RuneSelf {
			c.ranges = append(c.ranges, max(r[i], utf8.RuneSelf), r[i+1])
		}
	}
	return c
}()

func endsWithWord(s string) bool {
	r, w := utf8.DecodeLastRuneInString(s)
	return s != "" && !(r == utf8.RuneError && w == 1) && wordSet.has(r)
}

func startsWithWord(s string) bool {
	r, w := utf8.DecodeRuneInString(s)
	return s != "" && !(r == utf8.RuneError && w == 1) && wordSet.has(r)
}
