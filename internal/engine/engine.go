// Package engine is the seam under every way of running the model: the one
// interface that the CPU reference (package cpu) and the WGSL program
// (package gpuengine) are driven through, and the one Open that resolves a
// variant, checks it against the checkpoint and builds either on a device.
// The CLI, engine.wasm and the benchmarks all open models here; package
// session drives what Open returns, for blocking and split-step hosts alike.
package engine

import (
	"fmt"

	"logitscope/internal/gpu"
)

// Want is which logit rows a submission computes.
type Want int

const (
	None Want = iota // no row: an early chunk of a prefill
	Last             // the row after the last token (decoding)
	All              // one row per token (teacher forcing)
)

// rows is how many rows a submission of t tokens yields.
func (w Want) rows(t int) int {
	switch w {
	case None:
		return 0
	case Last:
		return 1
	}
	return t
}

// Region is where a submission's logit rows lie: Rows rows of Width
// float32 (the vocabulary's logits, then a mixture of experts' routes),
// either Size bytes at Offset of a device Buffer (little-endian
// float32, read back by the host: blocking natively, with mapAsync in a
// browser) or, for the CPU engine, Host in this process's memory. Either
// stays valid until the next Submit.
type Region struct {
	Rows         int
	Buffer       gpu.Buffer
	Offset, Size int64
	Host         []float32
}

// Slice narrows r, whose rows are width float32, to its rows [lo, hi), so
// that a host reads only the rows it keeps.
func (r Region) Slice(lo, hi, width int) Region {
	row := int64(width) * 4
	out := Region{Rows: hi - lo, Buffer: r.Buffer, Offset: r.Offset + int64(lo)*row, Size: int64(hi-lo) * row}
	if r.Host != nil {
		out.Host, out.Offset = r.Host[lo*width:hi*width], 0
	}
	return out
}

// Width is the length of e's rows: Vocab logits, then Routes expert ids.
func Width(e Engine) int { return e.Vocab() + e.Routes() }

// Engine is one sequence on one device: a model, its KV cache and the
// position reached. Not safe for concurrent use.
type Engine interface {
	// Name says where it runs, for receipts: "cpu", or "gpu: <adapter>".
	Name() string
	// Vocab is the number of logits in a row.
	Vocab() int
	// Routes is the number of values after the logits in a row: for a
	// mixture of experts, the ids (as float32) of the experts each sparse
	// layer routed the row's token to (model.Geometry.Routes); else 0.
	Routes() int
	// Chunk is the most tokens one Submit takes.
	Chunk() int
	// Submit appends at most Chunk tokens to the sequence and names the
	// region that will hold the rows want asks for.
	Submit(tokens []int, want Want) (Region, error)
	// Read blocks until a region's rows are computed and copies them out.
	// A browser cannot block: it reads device regions itself.
	Read(r Region) ([][]float32, error)
	// Reset empties the sequence; the cache is reused.
	Reset()
	// Close releases what the engine holds (not the device).
	Close()
}

// checkChunk refuses a submission larger than an engine's chunk.
func checkChunk(tokens []int, chunk int) error {
	if len(tokens) > chunk {
		return fmt.Errorf("%d tokens in one step, the engine's chunk is %d", len(tokens), chunk)
	}
	return nil
}
