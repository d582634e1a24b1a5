package serve

import (
	"fmt"
	"strings"
	"testing"
)

func TestRangeLimits(t *testing.T) {
	f := newFixture(t)
	data := read(t, f.shard)
	n := len(data)
	many := make([]string, maxRanges+1)
	for i := range many {
		many[i] = fmt.Sprintf("%d-%d", i, i)
	}
	for _, tc := range []struct {
		name   string
		rng    string
		status int
		cr     string
		body   []byte
	}{
		{"empty suffix", "bytes=-0", 416, fmt.Sprintf("bytes */%d", n), nil},
		{"empty suffixes", "bytes=-0,-00", 416, fmt.Sprintf("bytes */%d", n), nil},
		{"empty suffix beside a range", "bytes=-0,0-1", 206, fmt.Sprintf("bytes 0-1/%d", n), data[:2]},
		{"at the cap", "bytes=" + strings.Join(many[:maxRanges], ","), 206, "", nil},
		{"over the cap", "bytes=" + strings.Join(many, ","), 200, "", data},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := f.do(t, shardURL, map[string]string{"Range": tc.rng})
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d", w.Code, tc.status)
			}
			if got := w.Header().Get("Content-Range"); got != tc.cr {
				t.Errorf("Content-Range %q, want %q", got, tc.cr)
			}
			if tc.body != nil && string(w.Body.Bytes()) != string(tc.body) {
				t.Errorf("body of %d bytes, want %d", w.Body.Len(), len(tc.body))
			}
		})
	}
}
