//go:build wasip1

package main

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"unsafe"

	"logitscope/internal/gpu"
)

// The gpu imports mirror gpu.Device one to one (ABI.md). Creating imports
// return a handle > 0 or a negative status; the others return 0 or a
// negative status. After a negative status, last_error has the message.

//go:wasmimport gpu info
func gpuInfo(buf unsafe.Pointer, cap uint32) uint32

//go:wasmimport gpu create_buffer
func gpuCreateBuffer(label unsafe.Pointer, labelLen uint32, size int64) int32

//go:wasmimport gpu write_buffer
func gpuWriteBuffer(b uint32, offset int64, data unsafe.Pointer, n uint32) int32

//go:wasmimport gpu destroy_buffer
func gpuDestroyBuffer(b uint32)

//go:wasmimport gpu create_shader_module
func gpuCreateShaderModule(label unsafe.Pointer, labelLen uint32, wgsl unsafe.Pointer, wgslLen uint32) int32

//go:wasmimport gpu create_compute_pipeline
func gpuCreateComputePipeline(label unsafe.Pointer, labelLen uint32, m uint32, entry unsafe.Pointer, entryLen uint32) int32

//go:wasmimport gpu create_bind_group
func gpuCreateBindGroup(p uint32, group uint32, entries unsafe.Pointer, n uint32) int32

//go:wasmimport gpu destroy_bind_group
func gpuDestroyBindGroup(g uint32)

//go:wasmimport gpu dispatch
func gpuDispatch(p uint32, groups unsafe.Pointer, n uint32, x, y, z uint32) int32

//go:wasmimport gpu copy_buffer
func gpuCopyBuffer(src uint32, srcOffset int64, dst uint32, dstOffset int64, size int64) int32

//go:wasmimport gpu submit
func gpuSubmit() int32

//go:wasmimport gpu read_buffer
func gpuReadBuffer(b uint32, offset, size int64, dst unsafe.Pointer) int32

//go:wasmimport gpu upload_file
func gpuUploadFile(b uint32, offset int64, path unsafe.Pointer, pathLen uint32, fileOffset, length int64) int32

//go:wasmimport gpu last_error
func gpuLastError(buf unsafe.Pointer, cap uint32) uint32

// hostDevice is gpu.Device over the imports. Handles pass through as is.
type hostDevice struct{ info gpu.Info }

var (
	_ gpu.Device       = (*hostDevice)(nil)
	_ gpu.FileUploader = (*hostDevice)(nil)
)

func newHostDevice() (*hostDevice, error) {
	buf := make([]byte, 1024)
	for {
		n := gpuInfo(unsafe.Pointer(&buf[0]), uint32(len(buf)))
		if int(n) > len(buf) {
			buf = make([]byte, n)
			continue
		}
		d := &hostDevice{}
		if err := json.Unmarshal(buf[:n], &d.info); err != nil {
			return nil, fmt.Errorf("gpu.info: %w", err)
		}
		return d, nil
	}
}

// hostError fetches the message of the last failed import.
func hostError(op string, status int32) error {
	buf := make([]byte, 256)
	n := gpuLastError(unsafe.Pointer(&buf[0]), uint32(len(buf)))
	if int(n) > len(buf) {
		buf = make([]byte, n)
		n = gpuLastError(unsafe.Pointer(&buf[0]), uint32(len(buf)))
	}
	if n == 0 {
		return fmt.Errorf("gpu.%s: status %d", op, status)
	}
	return errors.New(string(buf[:min(int(n), len(buf))]))
}

// ptr is a slice's address for an import; nil for an empty one.
func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

func sptr(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }

func (d *hostDevice) Info() gpu.Info { return d.info }

func (d *hostDevice) CreateBuffer(label string, size int64) (gpu.Buffer, error) {
	h := gpuCreateBuffer(sptr(label), uint32(len(label)), size)
	if h < 0 {
		return 0, hostError("create_buffer", h)
	}
	return gpu.Buffer(h), nil
}

func (d *hostDevice) WriteBuffer(b gpu.Buffer, offset int64, data []byte) error {
	if st := gpuWriteBuffer(uint32(b), offset, ptr(data), uint32(len(data))); st < 0 {
		return hostError("write_buffer", st)
	}
	return nil
}

func (d *hostDevice) DestroyBuffer(b gpu.Buffer) { gpuDestroyBuffer(uint32(b)) }

func (d *hostDevice) CreateShaderModule(label, wgsl string) (gpu.Module, error) {
	h := gpuCreateShaderModule(sptr(label), uint32(len(label)), sptr(wgsl), uint32(len(wgsl)))
	if h < 0 {
		return 0, hostError("create_shader_module", h)
	}
	return gpu.Module(h), nil
}

func (d *hostDevice) CreateComputePipeline(label string, m gpu.Module, entry string) (gpu.Pipeline, error) {
	h := gpuCreateComputePipeline(sptr(label), uint32(len(label)), uint32(m), sptr(entry), uint32(len(entry)))
	if h < 0 {
		return 0, hostError("create_compute_pipeline", h)
	}
	return gpu.Pipeline(h), nil
}

// bindingSize is one gpu.Binding on the wire: binding u32, buffer u32,
// offset i64, size i64, little-endian.
const bindingSize = 24

func (d *hostDevice) CreateBindGroup(p gpu.Pipeline, group uint32, entries []gpu.Binding) (gpu.BindGroup, error) {
	buf := make([]byte, bindingSize*len(entries))
	for i, e := range entries {
		o := buf[i*bindingSize:]
		binary.LittleEndian.PutUint32(o[0:], e.Binding)
		binary.LittleEndian.PutUint32(o[4:], uint32(e.Buffer))
		binary.LittleEndian.PutUint64(o[8:], uint64(e.Offset))
		binary.LittleEndian.PutUint64(o[16:], uint64(e.Size))
	}
	h := gpuCreateBindGroup(uint32(p), group, ptr(buf), uint32(len(entries)))
	if h < 0 {
		return 0, hostError("create_bind_group", h)
	}
	return gpu.BindGroup(h), nil
}

func (d *hostDevice) DestroyBindGroup(g gpu.BindGroup) { gpuDestroyBindGroup(uint32(g)) }

func (d *hostDevice) Dispatch(p gpu.Pipeline, groups []gpu.BindGroup, x, y, z uint32) error {
	buf := make([]byte, 4*len(groups))
	for i, g := range groups {
		binary.LittleEndian.PutUint32(buf[4*i:], uint32(g))
	}
	if st := gpuDispatch(uint32(p), ptr(buf), uint32(len(groups)), x, y, z); st < 0 {
		return hostError("dispatch", st)
	}
	return nil
}

func (d *hostDevice) CopyBuffer(src gpu.Buffer, srcOffset int64, dst gpu.Buffer, dstOffset int64, size int64) error {
	if st := gpuCopyBuffer(uint32(src), srcOffset, uint32(dst), dstOffset, size); st < 0 {
		return hostError("copy_buffer", st)
	}
	return nil
}

func (d *hostDevice) Submit() error {
	if st := gpuSubmit(); st < 0 {
		return hostError("submit", st)
	}
	return nil
}

// ReadBuffer blocks in the host, which a browser cannot do: the engine's
// split-step loop never calls it; it is here for completeness and tests.
func (d *hostDevice) ReadBuffer(b gpu.Buffer, offset, size int64) ([]byte, error) {
	out := make([]byte, size)
	if st := gpuReadBuffer(uint32(b), offset, size, ptr(out)); st < 0 {
		return nil, hostError("read_buffer", st)
	}
	return out, nil
}

func (d *hostDevice) UploadFile(b gpu.Buffer, offset int64, path string, fileOffset, length int64) error {
	if st := gpuUploadFile(uint32(b), offset, sptr(path), uint32(len(path)), fileOffset, length); st < 0 {
		return hostError("upload_file", st)
	}
	return nil
}

// Close is the host's business: the device outlives the instance.
func (d *hostDevice) Close() error { return nil }
