// Package gpu is the engine's whole view of a WebGPU device: integer
// handles for buffers, shader modules, compute pipelines and bind groups;
// dispatches recorded and submitted together (one submission per token or
// prefill chunk); blocking readback. The engine uses nothing else, so the
// same engine runs on a native WebGPU (package internal/gpu/native) and, compiled to
// wasm, on the host's WebGPU through imports that mirror these methods one
// to one.
package gpu

import (
	"encoding/binary"
	"math"
)

// Handles name device objects; 0 is never a valid handle.
type (
	Buffer    uint32
	Module    uint32
	Pipeline  uint32
	BindGroup uint32
)

// Limits are the device limits the engine plans with. WebGPU's defaults
// (and gogpu/wgpu's hard limits on Vulkan) are 128 MiB per storage binding
// and 256 MiB per buffer.
type Limits struct {
	MaxStorageBufferBindingSize       int64
	MaxBufferSize                     int64
	MaxComputeWorkgroupsPerDimension  uint32
	MaxComputeInvocationsPerWorkgroup uint32
	MaxComputeWorkgroupSizeX          uint32
	MaxStorageBuffersPerShaderStage   uint32
	MinStorageBufferOffsetAlignment   uint32
	MinUniformBufferOffsetAlignment   uint32
}

// Info describes the adapter behind a device.
type Info struct {
	Adapter   string // e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
	Backend   string // e.g. "vulkan"
	Limits    Limits
	Subgroups bool // the subgroups feature is usable from WGSL
	// SubgroupMinSize is the fewest invocations a subgroup of a compute
	// shader holds, when Subgroups (0 otherwise), its subgroups laid along
	// local_invocation_index. The engine's subgroup kernels need a
	// matmul row's invocations in one subgroup.
	SubgroupMinSize uint32
	// Software: the adapter runs on the CPU (lavapipe, SwiftShader),
	// executing a workgroup's invocations a SIMD lane each, where every
	// load an invocation makes costs a loop over the lanes. The engine
	// then takes kernels that load less per invocation.
	Software bool
}

// Binding binds [Offset, Offset+Size) of a buffer at @binding(Binding);
// Size 0 means to the end of the buffer.
type Binding struct {
	Binding uint32
	Buffer  Buffer
	Offset  int64
	Size    int64
}

// Device is a WebGPU device. Buffers are usable as storage and uniform
// buffers and as copy source and destination. Methods are not safe for
// concurrent use.
type Device interface {
	Info() Info

	CreateBuffer(label string, size int64) (Buffer, error)
	// WriteBuffer queues a write of data at offset; it is ordered before
	// the commands of the next Submit.
	WriteBuffer(b Buffer, offset int64, data []byte) error
	DestroyBuffer(b Buffer)

	CreateShaderModule(label, wgsl string) (Module, error)
	// CreateComputePipeline uses the "auto" layout.
	CreateComputePipeline(label string, m Module, entryPoint string) (Pipeline, error)
	CreateBindGroup(p Pipeline, group uint32, entries []Binding) (BindGroup, error)
	DestroyBindGroup(g BindGroup)

	// Dispatch records a dispatch of p with groups[i] bound at @group(i).
	Dispatch(p Pipeline, groups []BindGroup, x, y, z uint32) error
	// CopyBuffer records a copy; offsets and size are multiples of 4.
	CopyBuffer(src Buffer, srcOffset int64, dst Buffer, dstOffset int64, size int64) error
	// Submit sends everything recorded since the last Submit.
	Submit() error
	// ReadBuffer waits for submitted work and returns size bytes at offset.
	ReadBuffer(b Buffer, offset, size int64) ([]byte, error)

	Close() error
}

// FileUploader is a Device that copies a file region straight into a
// buffer. The wasm host implements it so that weights never cross the
// engine's wasm memory; the engine uses it whenever the device offers it.
type FileUploader interface {
	// UploadFile writes length bytes of path, from fileOffset, at offset
	// of b; a length that is not a multiple of 4 is zero-padded.
	UploadFile(b Buffer, offset int64, path string, fileOffset, length int64) error
}

// Float32Rows decodes a buffer's little-endian float32 (rows × vocab,
// row-major, as logits lie) into rows of vocab values.
func Float32Rows(raw []byte, vocab int) [][]float32 {
	out := make([][]float32, len(raw)/4/max(vocab, 1))
	for i := range out {
		row := make([]float32, vocab)
		for j := range row {
			row[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*(i*vocab+j):]))
		}
		out[i] = row
	}
	return out
}
