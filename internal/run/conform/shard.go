package conform

import (
	"fmt"
	"strconv"
	"strings"
)

// Shard is shard I of N, 1-based: the cases whose index mod N is I-1. The
// zero value runs every case.
type Shard struct{ I, N int }

// ParseShard reads i/n; "" is every case.
func ParseShard(s string) (Shard, error) {
	if s == "" {
		return Shard{1, 1}, nil
	}
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 1 || i > n {
		return Shard{}, fmt.Errorf("--shard %q: want i/n with 1 ≤ i ≤ n, e.g. 1/2", s)
	}
	return Shard{i, n}, nil
}

// Pick is the indices of this shard's cases: a round-robin deal, so that
// shards stay balanced when a suite groups its slow cases together.
func (s Shard) Pick(cases int) []int {
	if s.N == 0 {
		s = Shard{1, 1}
	}
	var idx []int
	for i := range cases {
		if i%s.N == s.I-1 {
			idx = append(idx, i)
		}
	}
	return idx
}

func (s Shard) String() string {
	if s.N == 0 {
		s = Shard{1, 1}
	}
	return fmt.Sprintf("%d/%d", s.I, s.N)
}
