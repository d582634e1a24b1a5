package engine

import (
	"fmt"

	"logitscope/internal/engine/internal/gpuengine"
	"logitscope/internal/gpu"
)

// gpuEngine is the WGSL program (package gpuengine) behind the seam.
type gpuEngine struct {
	*gpuengine.State
	dev           gpu.Device
	vocab, routes int
	name          string
}

func (g *gpuEngine) Name() string { return g.name }
func (g *gpuEngine) Vocab() int   { return g.vocab }
func (g *gpuEngine) Routes() int  { return g.routes }

// Submit records and submits one step; its rows lie at the start of the
// engine's logits buffer.
func (g *gpuEngine) Submit(tokens []int, want Want) (Region, error) {
	if err := checkChunk(tokens, g.Chunk()); err != nil {
		return Region{}, err
	}
	n := want.rows(len(tokens))
	if err := g.State.Submit(tokens, n); err != nil {
		return Region{}, err
	}
	return Region{Rows: n, Buffer: g.Logits(), Size: int64(n * (g.vocab + g.routes) * 4)}, nil
}

// Read waits for the submission and decodes its rows.
func (g *gpuEngine) Read(r Region) ([][]float32, error) {
	if r.Rows == 0 {
		return nil, nil
	}
	raw, err := g.dev.ReadBuffer(r.Buffer, r.Offset, r.Size)
	if err != nil {
		return nil, err
	}
	w := g.vocab + g.routes
	if len(raw) != r.Rows*w*4 {
		return nil, fmt.Errorf("read %d bytes of logits, want %d rows of %d float32", len(raw), r.Rows, w)
	}
	return gpu.Float32Rows(raw, w), nil
}
