//go:build !linux

package engine

// weightArena holds nothing here: the weights stay in the files'
// mappings, or are read onto the heap (arena_linux.go).
type weightArena struct{}

func newWeightArena(int64) *weightArena { return nil }
func (*weightArena) alloc(int64) []byte { return nil }
func (*weightArena) seal()              {}
func (*weightArena) release()           {}
