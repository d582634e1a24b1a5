package tokenizer

// mergeHeap computes what mergeQuadratic does in O(n log n), for long
// words: candidate merges wait in a heap ordered by (rank, position) and
// are checked for staleness when they come out.
func (b *bpe) mergeHeap(syms []int32) []int32 {
	n := len(syms)
	if n < 2 {
		return syms
	}
	next := make([]int32, n) // -1 at the end; left symbols absorb right ones
	prev := make([]int32, n)
	alive := make([]bool, n)
	h := candHeap(make([]cand, 0, n))
	push := func(i int32) {
		j := next[i]
		if j < 0 {
			return
		}
		if m, ok := b.merges[pairKey(syms[i], syms[j])]; ok {
			h.push(cand{key: uint64(m.rank)<<32 | uint64(i), left: syms[i], right: syms[j], id: m.id})
		}
	}
	for i := range n {
		next[i], prev[i], alive[i] = int32(i+1), int32(i-1), true
	}
	next[n-1] = -1
	for i := range n - 1 {
		push(int32(i))
	}
	for len(h) > 0 {
		c := h.pop()
		pos := int32(c.key)
		j := next[pos]
		// Symbols only grow, so an unchanged pair of ids means the
		// candidate is still current.
		if !alive[pos] || j < 0 || syms[pos] != c.left || syms[j] != c.right {
			continue
		}
		syms[pos] = c.id
		alive[j] = false
		next[pos] = next[j]
		if k := next[j]; k >= 0 {
			prev[k] = pos
		}
		if p := prev[pos]; p >= 0 {
			push(p)
		}
		push(pos)
	}
	out := syms[:0]
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, syms[i])
	}
	return out
}

// cand is a possible merge of the symbols at pos and next[pos]. key packs
// (rank, pos) so that one comparison orders candidates.
type cand struct {
	key             uint64
	left, right, id int32
}

func (c cand) less(d cand) bool { return c.key < d.key }

// candHeap is a binary min-heap; container/heap's interface calls cost
// more than the merging itself.
type candHeap []cand

func (h *candHeap) push(c cand) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 2
		if !s[i].less(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *candHeap) pop() cand {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		l, r, m := 2*i+1, 2*i+2, i
		if l < len(s) && s[l].less(s[m]) {
			m = l
		}
		if r < len(s) && s[r].less(s[m]) {
			m = r
		}
		if m == i {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
