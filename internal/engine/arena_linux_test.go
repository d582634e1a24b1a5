package engine

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
	"unsafe"
)

func address(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// TestWeightArena: the arena hands out 64-byte aligned, disjoint slices
// from hugePage-aligned slabs the kernel may back with huge pages, one
// slab more when its total undercounted; sealed, they are read-only.
func TestWeightArena(t *testing.T) {
	if newWeightArena(1<<62) != nil {
		t.Fatal("an arena for more than the system's memory")
	}
	a := newWeightArena(5 << 20)
	if a == nil {
		t.Fatal("no arena for 5 MiB")
	}
	defer a.release()
	sizes := []int64{1, 100, 3 << 20, 64, 4 << 20}
	var got [][]byte
	for i, n := range sizes {
		b := a.alloc(n)
		if int64(len(b)) != n || int64(cap(b)) != n {
			t.Fatalf("alloc(%d): len %d cap %d", n, len(b), cap(b))
		}
		if address(b)%64 != 0 {
			t.Errorf("alloc(%d) at %#x: not 64-byte aligned", n, address(b))
		}
		for j := range b {
			b[j] = byte(i + 1)
		}
		got = append(got, b)
	}
	for i, b := range got {
		if bytes.Count(b, []byte{byte(i + 1)}) != len(b) {
			t.Errorf("alloc(%d) was overwritten: its slices overlap", sizes[i])
		}
	}
	if len(a.slabs) != 2 {
		t.Errorf("%d slabs for 7 MiB from an arena sized for 5: want 2", len(a.slabs))
	}
	for _, s := range a.slabs {
		if address(s)%hugePage != 0 || len(s)%hugePage != 0 {
			t.Errorf("slab at %#x of %d bytes: not whole huge pages", address(s), len(s))
		}
		if eligible, ok := thpEligible(t, address(s)); ok && !eligible {
			t.Errorf("slab at %#x: the kernel will not back it with huge pages (THPeligible 0)", address(s))
		}
	}

	a.seal()
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("a write to a sealed arena did not fault")
			}
		}()
		got[2][0] = 0
	}()
}

// thpEligible reads /proc/self/smaps for the mapping holding addr:
// whether the kernel may back it with huge pages. ok is false where THP
// is off on this system (the arena then runs on small pages).
func thpEligible(t *testing.T, addr uintptr) (eligible, ok bool) {
	mode, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil || strings.Contains(string(mode), "[never]") {
		return false, false
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	in := false
	for _, line := range strings.Split(string(smaps), "\n") {
		var lo, hi uintptr
		if f := strings.Fields(line); len(f) > 0 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":") {
			if _, err := fmt.Sscanf(f[0], "%x-%x", &lo, &hi); err == nil {
				in = lo <= addr && addr < hi
			}
			continue
		}
		if v, found := strings.CutPrefix(line, "THPeligible:"); found && in {
			return strings.TrimSpace(v) == "1", true
		}
	}
	t.Fatalf("no mapping holds %#x in /proc/self/smaps", addr)
	return false, false
}

// TestWeightFilesArena: with an arena, a piece's bytes are the file's,
// read into the arena; without one (a model over half the available
// memory), a slice of the file's mapping, or a copy for a caller that
// writes them; bytes past the file's end are an error that names it.
func TestWeightFilesArena(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shard.bin")
	content := make([]byte, 10000)
	for i := range content {
		content[i] = byte(i * 7)
	}
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	f := &weightFiles{mapped: map[string][]byte{}, arena: newWeightArena(int64(len(content)))}
	defer f.release()
	b, err := f.bytes(path, 1234, 5000, false)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, content[1234:6234]) {
		t.Error("the arena's bytes differ from the file's")
	}
	if s := f.arena.slabs[0]; address(b) < address(s) || address(b) >= address(s)+uintptr(len(s)) {
		t.Error("the bytes are not in the arena")
	}
	if len(f.mapped) != 0 {
		t.Error("the file was mapped as well")
	}
	if _, err := f.bytes(path, 9000, 2000, false); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("bytes past the end: %v, want an error naming %s", err, path)
	}

	mapped := &weightFiles{mapped: map[string][]byte{}}
	defer mapped.release()
	for _, write := range []bool{false, true} {
		b, err := mapped.bytes(path, 1234, 5000, write)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, content[1234:6234]) {
			t.Errorf("write %v: the bytes differ from the file's", write)
		}
		m := mapped.mapped[path]
		if inMap := len(m) > 0 && address(b) >= address(m) && address(b) < address(m)+uintptr(len(m)); inMap == write {
			t.Errorf("write %v: the bytes in the file's mapping: %v", write, inMap)
		}
	}
	if _, err := mapped.bytes(path, 9000, 2000, false); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("mapped bytes past the end: %v, want an error naming %s", err, path)
	}
}
