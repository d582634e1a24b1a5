package native

import "fmt"

// table maps the integer handles of package gpu to device objects. Handles
// count up from 1 and are never reused, so a stale handle (one whose object
// was destroyed) is reported as such instead of silently naming a newer
// object.
type table[T any] struct {
	kind  string // "buffer", "pipeline", ... for error messages
	items map[uint32]T
	last  uint32
}

func newTable[T any](kind string) table[T] {
	return table[T]{kind: kind, items: make(map[uint32]T)}
}

func (t *table[T]) add(v T) (uint32, error) {
	if t.last == ^uint32(0) {
		return 0, fmt.Errorf("gpu/native: out of %s handles", t.kind)
	}
	t.last++
	t.items[t.last] = v
	return t.last, nil
}

func (t *table[T]) get(h uint32) (T, error) {
	v, ok := t.items[h]
	if !ok {
		var zero T
		switch {
		case h == 0:
			return zero, fmt.Errorf("gpu/native: %s handle 0 is never valid", t.kind)
		case h <= t.last:
			return zero, fmt.Errorf("gpu/native: %s handle %d was destroyed", t.kind, h)
		default:
			return zero, fmt.Errorf("gpu/native: unknown %s handle %d", t.kind, h)
		}
	}
	return v, nil
}

func (t *table[T]) remove(h uint32) (T, bool) {
	v, ok := t.items[h]
	delete(t.items, h)
	return v, ok
}
