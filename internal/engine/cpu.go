package engine

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"unsafe"

	"logitscope/internal/engine/internal/cpu"
	"logitscope/internal/engine/internal/gpuengine"
	"logitscope/internal/format/ggml"
	"logitscope/internal/model"
	"logitscope/internal/quant"
	"logitscope/shaders"
)

// cpuEngine is the reference forward pass (package cpu) behind the seam. A
// submission's rows lie in the state's reused buffer, so that memory
// stays flat: a wasm host reads them where each Region says.
type cpuEngine struct {
	st            *cpu.State
	vocab, routes int
	release       func() // frees the weights' memory
	// pending: tokens submitted without rows (a prefill's chunks before
	// its last), not yet run: they run with the next submission, up to
	// prefillTokens() at once, so that a prefill's matmuls decode each
	// block of weights once for up to 4 chunks of tokens instead of one.
	// The rows have the same bits however the tokens are cut.
	pending []int
}

// prefillTokens is the most tokens the CPU runs in one forward pass of a
// prefill: four chunks natively, one in engine.wasm, where the page
// shows a prefill's progress chunk by chunk and a chunk takes seconds.
func prefillTokens() int {
	if runtime.GOARCH == "wasm" {
		return cpuChunk
	}
	return 4 * cpuChunk
}

// cpuChunk is the GPU's chunk, so that a request splits into the same
// submissions on both devices.
const cpuChunk = gpuengine.MaxChunk

func newCPU(m *model.Model, capacity int, acts8 bool, release func()) (*cpuEngine, error) {
	st, err := cpu.New(m, capacity)
	if err != nil {
		release()
		return nil, err
	}
	if acts8 {
		st.Acts8()
	}
	return &cpuEngine{st: st, vocab: m.Vocab, routes: m.Routes(), release: release}, nil
}

func (c *cpuEngine) Name() string { return DeviceName(nil) }
func (c *cpuEngine) Vocab() int   { return c.vocab }
func (c *cpuEngine) Routes() int  { return c.routes }
func (c *cpuEngine) Chunk() int   { return cpuChunk }
func (c *cpuEngine) Reset()       { c.st.Reset(); c.pending = c.pending[:0] }

// Close unmaps the weights and drops the rows for the collector.
func (c *cpuEngine) Close() {
	if c.release != nil {
		c.release()
	}
	c.st, c.release = nil, nil
}

// Submit runs the tokens through the reference, after the pending ones;
// without a wanted row it skips the LM head, or keeps them pending.
func (c *cpuEngine) Submit(tokens []int, want Want) (Region, error) {
	if err := checkChunk(tokens, cpuChunk); err != nil {
		return Region{}, err
	}
	if err := c.st.Check(tokens, len(c.pending)); err != nil {
		return Region{}, err
	}
	run := append(c.pending, tokens...)
	c.pending = run[:0]
	if want == None {
		if len(run) < prefillTokens() {
			c.pending = run
			return Region{}, nil
		}
		return Region{}, c.st.Append(run)
	}
	first := len(run) - 1
	if want == All {
		first = len(run) - len(tokens)
	}
	rows, err := c.st.Rows(run, first)
	if err != nil {
		return Region{}, err
	}
	return Region{Rows: len(rows) / (c.vocab + c.routes), Size: int64(len(rows) * 4), Host: rows}, nil
}

// Read copies the rows out: the next Submit overwrites them.
func (c *cpuEngine) Read(r Region) ([][]float32, error) {
	return cpu.Split(r.Host, c.vocab+c.routes), nil
}

// loadCPU builds the CPU engine's model from the pieces src serves the GPU
// too: every matrix as stored, its bytes sliced from inMemory (files
// already in memory, by path) where they are there, else read into a
// weight arena (huge pages, arena_linux.go) where the system has one and
// the memory, else mapped from the file where the system can (so that the
// weights take no heap and are shared with the page cache) or else read;
// rows a GGUF interleaves put back in Hugging Face's order in a copy;
// float32 rows as float32 (in place), vectors as float32. progress, if
// set, is told the bytes loaded so far of w's stored total. The arena and
// the files' mappings end with release.
func loadCPU(g model.Geometry, src gpuengine.Source, w model.Weights, inMemory map[string][]byte, progress func(done, total int64)) (m *model.Model, release func(), err error) {
	tensors, release, err := loadTensors(g, src, w, inMemory, progress)
	if err != nil {
		return nil, nil, err
	}
	m, err = model.Assemble(g, func(s model.Spec) (*model.Matrix, error) { return tensors[s.Name], nil })
	if err != nil {
		release()
		return nil, nil, err
	}
	return m, release, nil
}

// loadTensors loads every tensor of g as loadCPU does, by name.
func loadTensors(g model.Geometry, src gpuengine.Source, w model.Weights, inMemory map[string][]byte, progress func(done, total int64)) (map[string]*model.Matrix, func(), error) {
	var done, total int64
	for _, s := range g.Specs() {
		_, _, size, _ := w.Shape(s.Name)
		total += size
	}
	files := &weightFiles{inMemory: inMemory, mapped: map[string][]byte{}, arena: newWeightArena(total)}
	tensors := map[string]*model.Matrix{}
	for _, s := range g.Specs() {
		m, err := files.tensor(s, src)
		if err != nil {
			files.release()
			return nil, nil, err
		}
		tensors[s.Name] = m
		_, _, size, _ := w.Shape(s.Name)
		if done += size; progress != nil {
			progress(done, total)
		}
	}
	if files.arena != nil {
		files.arena.seal()
	}
	return tensors, files.release, nil
}

// weightFiles serves the bytes of the weights' files (bytes).
type weightFiles struct {
	inMemory map[string][]byte // by path: the files the caller holds in memory
	arena    *weightArena      // nil: none
	mapped   map[string][]byte // by path: the file mapped, or nil where it cannot be
	unmap    []func()
}

// bytes returns n bytes at off of path: a slice of the file where the
// caller holds it in memory, else read into the arena where there is
// one, else a slice of the file's read-only mapping; where the file is
// none of these or the caller will write them, the bytes read into a
// fresh buffer.
func (f *weightFiles) bytes(path string, off, n int64, write bool) ([]byte, error) {
	b, seen := f.inMemory[path]
	if !seen && f.arena != nil {
		if buf := f.arena.alloc(n); buf != nil {
			return buf, readAt(path, buf, off)
		}
	}
	if !seen {
		b, seen = f.mapped[path]
	}
	if !seen {
		var unmap func()
		var err error
		if b, unmap, err = mapFile(path); err != nil {
			return nil, err
		}
		f.mapped[path] = b
		if unmap != nil {
			f.unmap = append(f.unmap, unmap)
		}
	}
	if b != nil && !write {
		if off < 0 || n < 0 || off+n > int64(len(b)) {
			return nil, fmt.Errorf("%s: %d bytes at %d lie outside the file's %d", path, n, off, len(b))
		}
		return b[off : off+n : off+n], nil
	}
	buf := make([]byte, n)
	return buf, readAt(path, buf, off)
}

// piece is the bytes of piece p: its own where it holds them in memory
// (a hub quantization's float matrices), else its file's (bytes).
func (f *weightFiles) piece(p gpuengine.Piece, write bool) ([]byte, error) {
	if p.Data != nil {
		return p.Data, nil
	}
	return f.bytes(p.File, p.Offset, p.Length, write)
}

// release frees the arena and unmaps the files.
func (f *weightFiles) release() {
	if f.arena != nil {
		f.arena.release()
	}
	for _, u := range f.unmap {
		u()
	}
	f.unmap = nil
}

func (f *weightFiles) tensor(s model.Spec, src gpuengine.Source) (*model.Matrix, error) {
	if len(s.Shape) == 1 {
		v, err := src.Vector(s.Name)
		return &model.Matrix{Rows: s.Shape[0], Cols: 1, Data: v}, err
	}
	m := &model.Matrix{Rows: s.Shape[0], Cols: s.Shape[1]}
	pieces, err := src.Matrix(s.Name, math.MaxInt64)
	if err != nil {
		return nil, err
	}
	if len(pieces) == 1 && pieces[0].Format == shaders.F32 && pieces[0].Interleaved == 0 && pieces[0].Offset%4 == 0 {
		// One float32 piece: its rows in place (every target is
		// little-endian, as the files are).
		p := pieces[0]
		if p.Row0 != 0 || p.Rows != m.Rows || p.Length != int64(4*m.Rows*m.Cols) {
			return nil, fmt.Errorf("%s: %s: a float32 piece of rows [%d, %d) is %d bytes", p.File, s.Name, p.Row0, p.Row0+p.Rows, p.Length)
		}
		b, err := f.piece(p, false)
		if err != nil {
			return nil, err
		}
		m.Data = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
		return m, nil
	}
	for _, p := range pieces {
		format, err := storedFormat(p)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", p.File, s.Name, err)
		}
		if format.Lookup != nil { // its rows decode from the matrix itself
			m.Pieces = append(m.Pieces, model.Piece{Row0: p.Row0, Rows: p.Rows, Format: format})
			continue
		}
		data, err := f.piece(p, p.Interleaved != 0)
		if err != nil {
			return nil, err
		}
		if p.Interleaved != 0 {
			rb, err := format.Type.RowBytes(m.Cols)
			if err != nil || format.Scheme != "" {
				return nil, fmt.Errorf("%s: %s: %v rows cannot be interleaved", p.File, s.Name, format)
			}
			interleave(data, int(rb), p.Interleaved)
		}
		m.Pieces = append(m.Pieces, model.Piece{Row0: p.Row0, Rows: p.Rows, Format: format, Data: data})
	}
	return m, m.CheckPieces(s.Name)
}

// storedFormat is the CPU's name for a format the shaders read.
func storedFormat(p gpuengine.Piece) (model.Format, error) {
	f := p.Format
	switch f {
	case shaders.Lookup:
		return model.Format{Lookup: p.Lookup, Acts: p.Acts}, nil
	case shaders.EXL3:
		return model.Format{EXL3: p.EXL3}, nil
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
