package host

import (
	"context"
	"errors"

	"github.com/tetratelabs/wazero/api"

	"logitscope/internal/gpu"
)

// state is what the gpu imports serve one instance with. wazero calls a
// host function with the context of the export that the host called, so
// the state rides in it and one gpu host module serves every instance.
type state struct {
	dev      gpu.Device
	modelDir string // mounted at Mount
	lastErr  string
	// simd is simd.wasm on this instance's memory, kernels its exports
	// in wasmsimd.Kernels' order (simdModule makes them on first use),
	// calls how often each was called (what tests check).
	simd    api.Module
	kernels []api.Function
	calls   []int
}

type stateKey struct{}

func withState(ctx context.Context, st *state) context.Context {
	return context.WithValue(ctx, stateKey{}, st)
}

func stateOf(ctx context.Context) *state {
	st, _ := ctx.Value(stateKey{}).(*state)
	return st
}

// noGPU is the device of an instance opened on the CPU. The guest then
// calls no gpu import; one that did would get a failed status and this
// message, not a nil dereference in the host.
type noGPU struct{}

var _ gpu.Device = noGPU{}

var errNoGPU = errors.New("no GPU device: this engine instance was opened on the CPU")

func (noGPU) Info() gpu.Info                                        { return gpu.Info{} }
func (noGPU) CreateBuffer(string, int64) (gpu.Buffer, error)        { return 0, errNoGPU }
func (noGPU) WriteBuffer(gpu.Buffer, int64, []byte) error           { return errNoGPU }
func (noGPU) DestroyBuffer(gpu.Buffer)                              {}
func (noGPU) CreateShaderModule(string, string) (gpu.Module, error) { return 0, errNoGPU }
func (noGPU) CreateComputePipeline(string, gpu.Module, string) (gpu.Pipeline, error) {
	return 0, errNoGPU
}
func (noGPU) CreateBindGroup(gpu.Pipeline, uint32, []gpu.Binding) (gpu.BindGroup, error) {
	return 0, errNoGPU
}
func (noGPU) DestroyBindGroup(gpu.BindGroup)                                       {}
func (noGPU) Dispatch(gpu.Pipeline, []gpu.BindGroup, uint32, uint32, uint32) error { return errNoGPU }
func (noGPU) CopyBuffer(gpu.Buffer, int64, gpu.Buffer, int64, int64) error         { return errNoGPU }
func (noGPU) Submit() error                                                        { return errNoGPU }
func (noGPU) ReadBuffer(gpu.Buffer, int64, int64) ([]byte, error)                  { return nil, errNoGPU }
func (noGPU) Close() error                                                         { return nil }
