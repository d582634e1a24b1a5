package engine

import (
	"logitscope/engine/internal/cpu"
	"logitscope/engine/internal/gpuengine"
	"logitscope/model"
)

// cpuEngine is the float32 reference (package cpu) behind the seam. A
// submission's rows are copied into one reused slice, so that a wasm host
// reads them at a fixed guest address and memory stays flat.
type cpuEngine struct {
	st            *cpu.State
	vocab, routes int
	rows          []float32 // (Chunk, Vocab+Routes): the last submission's rows
}

// cpuChunk is the GPU's chunk, so that a request splits into the same
// submissions on both devices.
const cpuChunk = gpuengine.MaxChunk

func newCPU(m *model.Model, capacity int) (*cpuEngine, error) {
	st, err := cpu.New(m, capacity)
	if err != nil {
		return nil, err
	}
	return &cpuEngine{st: st, vocab: m.Vocab, routes: m.Routes(), rows: make([]float32, cpuChunk*(m.Vocab+m.Routes()))}, nil
}

func (c *cpuEngine) Name() string { return DeviceName(nil) }
func (c *cpuEngine) Vocab() int   { return c.vocab }
func (c *cpuEngine) Routes() int  { return c.routes }
func (c *cpuEngine) Chunk() int   { return cpuChunk }
func (c *cpuEngine) Reset()       { c.st.Reset() }

// Close drops the weights and the rows for the collector.
func (c *cpuEngine) Close() { c.st, c.rows = nil, nil }

// Submit runs the tokens through the reference. Without a wanted row it
// still computes the last one: one head matmul, not worth a variant of
// cpu.State.Forward.
func (c *cpuEngine) Submit(tokens []int, want Want) (Region, error) {
	if err := checkChunk(tokens, cpuChunk); err != nil {
		return Region{}, err
	}
	rows, err := c.st.Forward(tokens, want == All)
	if err != nil || want == None {
		return Region{}, err
	}
	w := c.vocab + c.routes
	for i, r := range rows {
		copy(c.rows[i*w:(i+1)*w], r)
	}
	n := len(rows)
	return Region{Rows: n, Size: int64(n * w * 4), Host: c.rows[:n*w]}, nil
}

// Read copies the rows out: the next Submit overwrites them.
func (c *cpuEngine) Read(r Region) ([][]float32, error) {
	out := make([][]float32, r.Rows)
	for i := range out {
		w := c.vocab + c.routes
		out[i] = append([]float32(nil), r.Host[i*w:(i+1)*w]...)
	}
	return out, nil
}
