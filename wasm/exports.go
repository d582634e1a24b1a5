//go:build wasip1

package main

import (
	"errors"
	"fmt"
	"runtime/debug"
	"unsafe"

	"logitscope/internal/gpu"
	"logitscope/wasm/abi"
)

// Exports return ≥ 0 on success and errStatus on failure, with the
// message for ls_error. A panic inside an export is recovered into an
// error; only ls_trap lets one escape (to test the host's trap handling).
const errStatus = -1

var (
	opened  *openModel
	lastErr string
	// blocks are the ls_malloc'd buffers by address: they keep the memory
	// alive and let exports check every (ptr, len) the host passes.
	blocks = map[uint32][]byte{}
)

// guard runs f, turning an error or a panic into errStatus.
func guard(f func() (int32, error)) (status int32) {
	defer func() {
		if r := recover(); r != nil {
			lastErr = fmt.Sprintf("panic: %v\n%s", r, debug.Stack())
			status = errStatus
		}
	}()
	n, err := f()
	if err != nil {
		lastErr = err.Error()
		return errStatus
	}
	return n
}

// mem is [ptr, ptr+n) of guest memory, which must lie in one ls_malloc block.
func mem(p, n uint32) ([]byte, error) {
	for base, b := range blocks {
		if p >= base && uint64(p)+uint64(n) <= uint64(base)+uint64(len(b)) {
			return b[p-base : p-base+n], nil
		}
	}
	return nil, fmt.Errorf("[%#x, +%d) is not inside a block from ls_malloc", p, n)
}

// put copies data to (p, cap) when it fits and returns its length either way.
func put(p, cap uint32, data []byte) (int32, error) {
	if int(cap) >= len(data) {
		out, err := mem(p, cap)
		if err != nil {
			return 0, err
		}
		copy(out, data)
	}
	return int32(len(data)), nil
}

//go:wasmexport ls_malloc
func lsMalloc(size uint32) uint32 {
	b := make([]byte, max(size, 1))
	p := uint32(uintptr(unsafe.Pointer(&b[0])))
	blocks[p] = b
	return p
}

//go:wasmexport ls_free
func lsFree(p uint32) { delete(blocks, p) }

//go:wasmexport ls_error
func lsError(p, cap uint32) int32 {
	n, err := put(p, cap, []byte(lastErr))
	if err != nil {
		return errStatus
	}
	return n
}

//go:wasmexport ls_open
func lsOpen(p, n uint32) int32 {
	return guard(func() (int32, error) {
		data, err := mem(p, n)
		if err != nil {
			return 0, err
		}
		if opened != nil {
			opened.close()
			opened = nil
		}
		s, err := open(data, blocks, hostGPU)
		if err != nil {
			return 0, err
		}
		opened = s
		return 0, nil
	})
}

// hostGPU is the gpu imports as a device. open calls it only for device
// "gpu": it asks the host for info, which a CPU model must never do.
func hostGPU() (gpu.Device, error) {
	d, err := newHostDevice()
	if err != nil {
		return nil, err // not a nil *hostDevice inside a non-nil interface
	}
	return d, nil
}

func current() (*openModel, error) {
	if opened == nil {
		return nil, errors.New("no model open (call ls_open first)")
	}
	return opened, nil
}

// withModel is guard for the exports that need an open model.
func withModel(f func(m *openModel) (int32, error)) int32 {
	return guard(func() (int32, error) {
		m, err := current()
		if err != nil {
			return 0, err
		}
		return f(m)
	})
}

//go:wasmexport ls_request
func lsRequest(p, n uint32) int32 {
	return withModel(func(m *openModel) (int32, error) {
		data, err := mem(p, n)
		if err != nil {
			return 0, err
		}
		return 0, m.request(data)
	})
}

//go:wasmexport ls_step
func lsStep() int32 {
	return withModel(func(m *openModel) (int32, error) { return m.step() })
}

//go:wasmexport ls_progress
func lsProgress(p uint32) int32 {
	return withModel(func(m *openModel) (int32, error) {
		out, err := mem(p, abi.ProgressSize)
		if err != nil {
			return 0, err
		}
		m.progress().Encode(out)
		return 0, nil
	})
}

//go:wasmexport ls_region
func lsRegion(p uint32) int32 {
	return withModel(func(m *openModel) (int32, error) {
		out, err := mem(p, abi.RegionSize)
		if err != nil {
			return 0, err
		}
		return 0, m.region(out)
	})
}

//go:wasmexport ls_feed
func lsFeed(p, n uint32) int32 {
	return withModel(func(m *openModel) (int32, error) {
		data, err := mem(p, n)
		if err != nil {
			return 0, err
		}
		return 0, m.feed(data)
	})
}

//go:wasmexport ls_result
func lsResult(p, cap uint32) int32 {
	return withModel(func(m *openModel) (int32, error) {
		js, err := m.result()
		if err != nil {
			return 0, err
		}
		return put(p, cap, js)
	})
}

// ls_trap panics outside any recover: the Go runtime exits, which the host
// sees as a trap. Only for the host's tests.
//
//go:wasmexport ls_trap
func lsTrap() { panic("ls_trap: deliberate trap") }
