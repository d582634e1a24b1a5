package host

import (
	"context"
	"syscall"

	"github.com/tetratelabs/wazero/experimental"
)

// withAllocator backs linear memories with one mmap'd reservation of their
// maximum size: growing then extends the slice in place, where wazero's
// default copies the whole memory on every grow (seconds at 1 GB).
func withAllocator(ctx context.Context) context.Context {
	return experimental.WithMemoryAllocator(ctx, experimental.MemoryAllocatorFunc(mmapMemory))
}

type mmapped struct{ buf []byte }

func mmapMemory(_, max uint64) experimental.LinearMemory {
	// Pages are reserved, not committed: the kernel backs them on first touch.
	buf, err := syscall.Mmap(-1, 0, int(max), syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_NORESERVE)
	if err != nil {
		return nil
	}
	return &mmapped{buf: buf}
}

func (m *mmapped) Reallocate(size uint64) []byte {
	if size > uint64(len(m.buf)) {
		return nil
	}
	return m.buf[:size:size]
}

func (m *mmapped) Free() {
	if m.buf != nil {
		syscall.Munmap(m.buf)
		m.buf = nil
	}
}
