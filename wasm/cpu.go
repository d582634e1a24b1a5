package main

import (
	"fmt"
	"runtime"
	"unsafe"

	"logitscope/checkpoint"
	"logitscope/cpu"
	"logitscope/gpuengine"
	"logitscope/model"
)

// cpuChunk is the most tokens one CPU Submit takes: the GPU's chunk, so a
// request splits into the same steps on both devices and the row slice
// stays at (cpuChunk, vocab).
const cpuChunk = gpuengine.MaxChunk

// cpuForward is forward on the CPU reference (package cpu), for browsers
// without WebGPU: the weights decoded to float32 in guest memory, no gpu
// import ever called. A step's rows are copied into one reused slice and
// its region names buffer 0 and their guest address; the host copies them
// out before the next ls_step overwrites them.
type cpuForward struct {
	st    *cpu.State
	vocab int
	// rows (cpuChunk, vocab) holds the last step's logit rows. wasm memory
	// is little-endian, so its float32s are already the region's bytes.
	rows []float32
	// pin keeps rows at its address while the host may read it between
	// exports: the session owns the slice, the pin states the contract
	// rather than leaning on the collector not moving objects.
	pin runtime.Pinner
}

var _ forward = (*cpuForward)(nil)

// newCPUForward decodes w (checked against ck's config) and makes a KV
// cache of capacity tokens.
func newCPUForward(ck *checkpoint.Checkpoint, w model.Weights, capacity int) (*cpuForward, error) {
	m, err := model.LoadWeights(ck, w, nil)
	if err != nil {
		return nil, err
	}
	st, err := cpu.New(m, capacity)
	if err != nil {
		return nil, err
	}
	f := &cpuForward{st: st, vocab: m.Vocab, rows: make([]float32, cpuChunk*m.Vocab)}
	f.pin.Pin(&f.rows[0])
	return f, nil
}

func (f *cpuForward) Chunk() int { return cpuChunk }

func (f *cpuForward) Reset() { f.st.Reset() }

// Close drops the weights and the rows for the collector.
func (f *cpuForward) Close() {
	f.pin.Unpin()
	f.st, f.rows = nil, nil
}

// Submit appends tokens to the sequence and names where their rows lie:
// every row with all, else the last, and none without read. cpu.State
// computes the last row even without read (an early prefill chunk): one
// head matmul, not worth a variant of Forward.
func (f *cpuForward) Submit(tokens []int, all, read bool) (gpuengine.Region, error) {
	if len(tokens) > cpuChunk {
		return gpuengine.Region{}, fmt.Errorf("%d tokens in one step, the engine's chunk is %d", len(tokens), cpuChunk)
	}
	rows, err := f.st.Forward(tokens, all)
	if err != nil || !read {
		return gpuengine.Region{}, err
	}
	for i, r := range rows {
		copy(f.rows[i*f.vocab:(i+1)*f.vocab], r)
	}
	n := len(rows)
	return gpuengine.Region{
		Offset: int64(uintptr(unsafe.Pointer(&f.rows[0]))),
		Size:   int64(n * f.vocab * 4),
		Rows:   n,
	}, nil
}
