//go:build unix

package engine

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile maps path into memory, read-only; unmap ends the mapping. A
// file too large for the address space or that the system will not map
// gives a nil mapping: its bytes are read instead.
func mapFile(path string) (data []byte, unmap func(), err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	size := st.Size()
	if size == 0 || size != int64(int(size)) {
		return nil, nil, nil
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, nil
	}
	return data, func() {
		if err := syscall.Munmap(data); err != nil {
			panic(fmt.Sprintf("munmap %s: %v", path, err))
		}
	}, nil
}
