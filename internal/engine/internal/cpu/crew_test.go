package cpu

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestParallelBlocks: every block runs once, on its own scratch, whether
// the crew is awake, asleep (after a pause longer than awake) or held by
// another caller at the same time.
func TestParallelBlocks(t *testing.T) {
	for _, tc := range []struct {
		name          string
		pause         time.Duration
		callers, size int
	}{
		{"awake", 0, 1, 64},
		{"asleep", 2 * awake, 1, 64},
		{"callers at once", 0, 4, 64},
		{"one block", 0, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for range 20 {
				time.Sleep(tc.pause)
				var wg sync.WaitGroup
				for range tc.callers {
					wg.Go(func() {
						ran := make([]atomic.Int32, tc.size)
						parallelBlocks(tc.size, true, 8, 0, func(blk int, sc *scratch) {
							if len(sc.w) < 8 {
								t.Errorf("block %d: scratch of %d floats, want 8", blk, len(sc.w))
							}
							ran[blk].Add(1)
							time.Sleep(time.Microsecond)
						})
						for blk := range ran {
							if n := ran[blk].Load(); n != 1 {
								t.Errorf("block %d ran %d times", blk, n)
							}
						}
					})
				}
				wg.Wait()
			}
		})
	}
}
