package engine

import (
	"fmt"
	"math"
	"os"
	"unsafe"

	"logitscope/engine/internal/cpu"
	"logitscope/engine/internal/gpuengine"
	"logitscope/ggml"
	"logitscope/model"
	"logitscope/quant"
	"logitscope/shaders"
)

// cpuEngine is the reference forward pass (package cpu) behind the seam. A
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

// loadCPU builds the CPU engine's model from the pieces src serves the GPU
// too: every matrix as stored (rows a GGUF interleaves put back in Hugging
// Face's order), read straight from its file into memory that the kernels
// compute with, float32 rows as float32 (so a float32 matrix is held once,
// in place), vectors as float32. progress, if set, is told the bytes read
// so far of w's stored total.
func loadCPU(g model.Geometry, src gpuengine.Source, w model.Weights, progress func(done, total int64)) (*model.Model, error) {
	var done, total int64
	for _, s := range g.Specs() {
		_, _, size, _ := w.Shape(s.Name)
		total += size
	}
	return model.Assemble(g, func(s model.Spec) (*model.Matrix, error) {
		m, err := loadTensor(s, src)
		if err != nil {
			return nil, err
		}
		_, _, size, _ := w.Shape(s.Name)
		if done += size; progress != nil {
			progress(done, total)
		}
		return m, nil
	})
}

func loadTensor(s model.Spec, src gpuengine.Source) (*model.Matrix, error) {
	if len(s.Shape) == 1 {
		v, err := src.Vector(s.Name)
		return &model.Matrix{Rows: s.Shape[0], Cols: 1, Data: v}, err
	}
	m := &model.Matrix{Rows: s.Shape[0], Cols: s.Shape[1]}
	pieces, err := src.Matrix(s.Name, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	f32 := true
	for _, p := range pieces {
		f32 = f32 && p.Format == shaders.F32
	}
	if f32 {
		// Read into the float32 rows' own bytes (every target is
		// little-endian, as the files are).
		m.Data = make([]float32, m.Rows*m.Cols)
		bytes := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(m.Data))), 4*len(m.Data))
		for _, p := range pieces {
			if p.Row0+p.Rows > m.Rows || p.Length != int64(4*p.Rows*m.Cols) {
				return nil, fmt.Errorf("%s: %s: a float32 piece of rows [%d, %d) is %d bytes", p.File, s.Name, p.Row0, p.Row0+p.Rows, p.Length)
			}
			if err := readAt(p.File, bytes[4*p.Row0*m.Cols:4*(p.Row0+p.Rows)*m.Cols], p.Offset); err != nil {
				return nil, err
			}
			interleave(bytes[4*p.Row0*m.Cols:4*(p.Row0+p.Rows)*m.Cols], 4*m.Cols, p.Interleaved)
		}
		return m, nil
	}
	for _, p := range pieces {
		f, err := storedFormat(p.Format)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", p.File, s.Name, err)
		}
		data := make([]byte, p.Length)
		if err := readAt(p.File, data, p.Offset); err != nil {
			return nil, err
		}
		if p.Interleaved != 0 {
			rb, err := f.Type.RowBytes(m.Cols)
			if err != nil || f.Scheme != "" {
				return nil, fmt.Errorf("%s: %s: %v rows cannot be interleaved", p.File, s.Name, f)
			}
			interleave(data, int(rb), p.Interleaved)
		}
		m.Pieces = append(m.Pieces, model.Piece{Row0: p.Row0, Rows: p.Rows, Format: f, Data: data})
	}
	return m, m.CheckPieces(s.Name)
}

// storedFormat is the CPU's name for a format the shaders read.
func storedFormat(f shaders.Format) (model.Format, error) {
	switch f {
	case shaders.Q8:
		return model.Format{Scheme: quant.Q8}, nil
	case shaders.Q6:
		return model.Format{Scheme: quant.Q6}, nil
	case shaders.Q4:
		return model.Format{Scheme: quant.Q4}, nil
	case shaders.F32:
		return model.Format{Type: ggml.F32}, nil
	case shaders.F16:
		return model.Format{Type: ggml.F16}, nil
	case shaders.BF16:
		return model.Format{Type: ggml.BF16}, nil
	}
	if t, ok := f.GGML(); ok {
		return model.Format{Type: t}, nil
	}
	return model.Format{}, fmt.Errorf("no CPU decoder for format %v", f)
}

// interleave puts rows of rb bytes that llama.cpp's q/k permutation
// stored in GGUF's order (gpuengine.Piece.Interleaved: row j of each head
// of hd rows holds Hugging Face's row (j%2)·hd/2 + j/2) back in Hugging
// Face's order, in place; hd 0 leaves them.
func interleave(rows []byte, rb, hd int) {
	if hd == 0 {
		return
	}
	head := make([]byte, hd*rb)
	for h := 0; h < len(rows)/rb; h += hd {
		at := rows[h*rb : (h+hd)*rb]
		copy(head, at)
		for j := range hd {
			r := (j%2)*(hd/2) + j/2
			copy(at[r*rb:(r+1)*rb], head[j*rb:(j+1)*rb])
		}
	}
}

func readAt(path string, buf []byte, off int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.ReadAt(buf, off); err != nil {
		return fmt.Errorf("%s: reading %d bytes at %d: %w", path, len(buf), off, err)
	}
	return nil
}
