// Package gpuengine runs the forward pass as WGSL compute shaders on a
// gpu.Device: weights uploaded as stored (bf16/f16/f32 bytes or quantized
// blobs, decoded in the shaders), one submission per decoded token or
// prefill chunk, the logits read back once per step.
package gpuengine

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"time"

	"logitscope/internal/gpu"
	"logitscope/internal/model"
	"logitscope/shaders"
)

// MaxChunk is the most tokens one submission processes: longer inputs
// (prefill, teacher forcing) run in chunks that share the KV cache.
const MaxChunk = 32

// paramSlot is the bytes of uniform parameters each dispatch owns (WebGPU's
// minimum uniform buffer offset alignment).
const paramSlot = 256

// State is one sequence on the GPU: the uploaded model, its KV cache and
// the fixed program of dispatches that one forward step records.
type State struct {
	dev      gpu.Device
	g        model.Geometry
	capacity int // KV cache length in tokens
	chunk    int // tokens per step (≤ MaxChunk)
	pos      int // tokens in the cache
	maxPiece int64

	pipes map[string]gpu.Pipeline
	owned []gpu.Buffer

	ids, x, h, q, att, o, gate, up, logits, scores, rope, params gpu.Buffer
	kc, vc                                                       []gpu.Buffer
	none                                                         gpu.Buffer // bound where an op has no bias
	spare                                                        gpu.Buffer // a stacked product's third Y when it has two
	ropeLocal                                                    gpu.Buffer // Gemma 3's sliding layers' table; 0 without

	// With 8-bit activations (Options.Acts8): a product's X rounded by
	// quantize.wgsl, (chunk, cols/2) words and (chunk, cols/32) (dx, Σq),
	// cols the widest product's; 0 without.
	acts8  bool
	xq, xd gpu.Buffer

	// The matmul kernels' workgroup sizes (chooseSizes).
	wg sizes

	// Sparse layers' scratch (0 for dense models): router logits (T, E),
	// the chosen experts and their weights (T, K), the experts' gate, up
	// (T, K, ExpertIntermediate) and outputs (T, K, d), Qwen2-MoE's shared
	// expert's output (T, d) and gate logit (T,).
	router, routeIDs, routeW, eg, eu, ey, shared, sgate gpu.Buffer
	// exl3x and exl3y are an EXL3 product's rotated X and unrotated Y
	// (exl3Ops), made with the first EXL3 layer uploaded.
	exl3x, exl3y gpu.Buffer
	// actsX is a lookup product's rounded X (actsOp), made with the
	// first lookup matrix that quantizes its activations.
	actsX gpu.Buffer

	dispatches int64 // recorded so far, for benchmarks

	prog     []op
	buildErr error // the first pipeline that failed to compile, while building
}

// step is what changes between forward steps: the tokens it holds, their
// first position, and how many logit rows it computes: 0 (the early chunks
// of a prefill), 1 (the last token's) or T (teacher forcing).
type step struct {
	T, pos0, rows int
}

// op is one dispatch of the program: fixed pipeline and bindings, with
// dimensions and parameters computed per step.
type op struct {
	name   string
	family string // what Profile sums under
	pipe   gpu.Pipeline
	group  gpu.BindGroup
	dims   func(s step) (x, y, z uint32)
	params func(s step) []uint32
	// many, for the matmuls, is the pipeline that takes eight tokens per
	// invocation (matmul.wgsl's main8 or rows4x8), dispatched instead,
	// with its own grid, when dims' z (the op's tokens) is at least
	// manyFrom; nil for the other ops.
	many *manyTokens
}

// manyFrom is the fewest tokens that a matmul takes eight at a time: one
// dispatch of main8, up to eight tokens, costs on lavapipe about what main
// costs for four (MLP up, q/o, k/v) to six (MLP down, 896x4864); summed
// over a Qwen2.5-0.5B layer's matmuls, main8 is ahead from five. rows4x8
// against rows4 (q4, q8) breaks even at three to five
// (BenchmarkPrefillKernel). All give the same bits.
const manyFrom = 5

// manyTokens is a matmul op's prefill pipeline (entry of the matmul
// kernel for format in variant), its source made and compiled with its
// bind group at the first step that needs it: opening a model (in the
// page, compiling every pipeline) does not wait for it, and a decode-only
// session never compiles it.
type manyTokens struct {
	format   shaders.Format
	variant  shaders.MatmulVariant
	entry    string
	blocks   int           // workgroups per eight tokens
	bindings []gpu.Binding // the op's, params included
	pipe     gpu.Pipeline
	group    gpu.BindGroup
}

// Options for New.
type Options struct {
	// Capacity is the KV cache length in tokens.
	Capacity int
	// MaxPieceBytes, if set, splits weight matrices into smaller pieces
	// than the device's binding limit requires (tests use it to exercise
	// the split path on small models).
	MaxPieceBytes int64
	// Progress, if not nil, is told the tensors uploaded so far.
	Progress func(done, total int64)
	// Acts8 multiplies the weights with integer codes (Format.A8) by
	// activations rounded to 8-bit blocks, as the CPU engine's Acts8 does
	// (matmul_a8.wgsl); float32 and 16-bit weights keep float32
	// activations. Dense models only.
	Acts8 bool
	// Workgroup, when not 0, fixes the matmul kernels' workgroup size (32,
	// 64, 128 or 256 invocations); else New chooses it per adapter
	// (chooseSizes): 64 on software adapters, the fastest measured at
	// open on the others, or on every adapter with Tune. Every size gives
	// the same bits.
	Workgroup int
	Tune      bool
	// Pipelines, if set, is a cache of compiled pipelines that States on
	// the same device share (a pipeline is its source and entry, which its
	// key names), so that a State built per run (engine.Mix on a device)
	// compiles each kernel once; nil keeps one of the State's own.
	Pipelines map[string]gpu.Pipeline
}

// New uploads the model described by g from src and prepares its KV cache.
// src must hold what model.Check verifies of the same weights.
func New(dev gpu.Device, g model.Geometry, src Source, opt Options) (*State, error) {
	if err := g.CheckCapacity(opt.Capacity); err != nil {
		return nil, err
	}
	lim := dev.Info().Limits
	if err := checkMoE(g, lim); err != nil {
		return nil, err
	}
	if opt.Acts8 && g.SparseLayers() > 0 {
		return nil, fmt.Errorf("8-bit activations on the GPU: the mixture-of-experts kernels take float32 activations only")
	}
	e := &State{dev: dev, g: g, capacity: max(opt.Capacity, 1), pipes: opt.Pipelines, acts8: opt.Acts8}
	if e.pipes == nil {
		e.pipes = map[string]gpu.Pipeline{}
	}
	// Room for the lookup tables that an i-quant's buffer ends with
	// (weightBuffer).
	e.maxPiece = min(lim.MaxStorageBufferBindingSize, lim.MaxBufferSize) - shaders.MaxTableBytes
	if opt.MaxPieceBytes > 0 {
		e.maxPiece = min(e.maxPiece, opt.MaxPieceBytes)
	}
	// The attention scratch holds (chunk, heads, capacity) scores in one
	// binding, the experts' (chunk, TopK, max(d, ExpertIntermediate)):
	// shrink the chunk for very long contexts or very many experts.
	e.chunk = MaxChunk
	scratch := int64(max(g.Heads*e.capacity, g.TopK*max(g.Dim, g.ExpertIntermediate), g.Experts)) * 4
	for e.chunk > 1 && int64(e.chunk)*scratch > lim.MaxStorageBufferBindingSize {
		e.chunk /= 2
	}
	if _, err := e.chooseSizes(opt, src); err != nil {
		return nil, err
	}
	if err := e.build(src, opt.Progress); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Pos is the number of tokens in the cache.
func (e *State) Pos() int { return e.pos }

// Close releases every buffer and bind group the engine made (not its
// pipelines, which the device keeps, or a shared cache's: Options).
func (e *State) Close() {
	for _, op := range e.prog {
		if op.group != 0 {
			e.dev.DestroyBindGroup(op.group)
		}
		if op.many != nil && op.many.group != 0 {
			e.dev.DestroyBindGroup(op.many.group)
		}
	}
	e.prog = nil
	for _, b := range e.owned {
		e.dev.DestroyBuffer(b)
	}
	e.owned = nil
}

// Chunk is the most tokens one Submit takes.
func (e *State) Chunk() int { return e.chunk }

// Logits is the buffer whose start holds a step's rows: (rows, Vocab +
// Routes) little-endian float32, the logits then the route tail.
func (e *State) Logits() gpu.Buffer { return e.logits }

// Submit records and submits one step of at most Chunk tokens, appending
// them to the sequence, computing the last rows of its logits (0, 1 or
// len(tokens)) at the start of Logits. The host reads them (blocking
// natively, awaiting mapAsync in a browser) before the next Submit
// overwrites them.
func (e *State) Submit(tokens []int, rows int) error {
	if len(tokens) > e.chunk {
		return fmt.Errorf("%d tokens in one step, the engine's chunk is %d", len(tokens), e.chunk)
	}
	if rows < 0 || rows > len(tokens) {
		return fmt.Errorf("%d logit rows asked of a step of %d tokens", rows, len(tokens))
	}
	if err := e.g.CheckTokens(e.pos, e.capacity, tokens); err != nil {
		return err
	}
	s := step{T: len(tokens), pos0: e.pos, rows: rows}
	if err := e.prepare(tokens, s); err != nil {
		return err
	}
	for _, o := range e.prog {
		if err := e.dispatch(o, s); err != nil {
			return err
		}
	}
	if err := e.dev.Submit(); err != nil {
		return err
	}
	e.pos += s.T
	return nil
}

// prepare writes a step's token ids and every op's parameters.
func (e *State) prepare(tokens []int, s step) error {
	ids := make([]byte, 4*len(tokens))
	for i, id := range tokens {
		binary.LittleEndian.PutUint32(ids[4*i:], uint32(id))
	}
	if err := e.dev.WriteBuffer(e.ids, 0, ids); err != nil {
		return err
	}
	params := make([]byte, len(e.prog)*paramSlot)
	for i, o := range e.prog {
		for j, v := range o.params(s) {
			binary.LittleEndian.PutUint32(params[i*paramSlot+4*j:], v)
		}
	}
	return e.dev.WriteBuffer(e.params, 0, params)
}

func (e *State) dispatch(o op, s step) error {
	x, y, z := o.dims(s)
	if x*y*z == 0 {
		return nil
	}
	pipe, group := o.pipe, o.group
	if m := o.many; m != nil && z >= manyFrom {
		if m.pipe == 0 {
			p, err := e.pipeline(m.variant.Name(m.format), shaders.Matmul(m.format, m.variant), m.entry)
			if err == nil {
				m.group, err = e.dev.CreateBindGroup(p, 0, m.bindings)
			}
			if err != nil {
				return fmt.Errorf("%s (%d tokens per invocation): %w", o.name, shaders.MatmulTokens, err)
			}
			m.pipe = p
		}
		pipe, group = m.pipe, m.group
		x, y, z = uint32(min(m.blocks, shaders.GridX)), ceilDiv(m.blocks, shaders.GridX), ceilDiv(int(z), shaders.MatmulTokens)
	}
	if err := e.dev.Dispatch(pipe, []gpu.BindGroup{group}, x, y, z); err != nil {
		return fmt.Errorf("%s: %w", o.name, err)
	}
	e.dispatches++
	return nil
}

// Dispatches is how many dispatches the engine has recorded so far (ops
// with no work in a step, such as the head in an unread prefill chunk,
// are skipped and not counted): benchmarks divide it by the tokens.
func (e *State) Dispatches() int64 { return e.dispatches }

// Profile decodes token id with a submission and a wait after every
// dispatch, and returns the time spent per op, summed over layers and
// pieces (keys like "matmul q", "attention", "rmsnorm"). The token is
// appended to the sequence. For benchmarks: waiting after each dispatch
// makes the whole step slower than Forward.
func (e *State) Profile(id int) (map[string]time.Duration, error) {
	if err := e.g.CheckTokens(e.pos, e.capacity, []int{id}); err != nil {
		return nil, err
	}
	s := step{T: 1, pos0: e.pos, rows: 1}
	if err := e.prepare([]int{id}, s); err != nil {
		return nil, err
	}
	// Let the writes land before timing the first op.
	if _, err := e.dev.ReadBuffer(e.ids, 0, 4); err != nil {
		return nil, err
	}
	times := map[string]time.Duration{}
	for _, o := range e.prog {
		start := time.Now()
		if err := e.dispatch(o, s); err != nil {
			return nil, err
		}
		if _, err := e.dev.ReadBuffer(e.ids, 0, 4); err != nil { // submits and waits
			return nil, err
		}
		times[o.family] += time.Since(start)
	}
	e.pos++
	return times, nil
}

func ceilDiv(a, b int) uint32 { return uint32((a + b - 1) / b) }

// pipeline compiles a kernel once per (source, entry point).
func (e *State) pipeline(name, src, entry string) (gpu.Pipeline, error) {
	key := name + "/" + entry
	if p, ok := e.pipes[key]; ok {
		return p, nil
	}
	m, err := e.dev.CreateShaderModule(name, src)
	if err != nil {
		return 0, err
	}
	p, err := e.dev.CreateComputePipeline(key, m, entry)
	if err != nil {
		return 0, err
	}
	e.pipes[key] = p
	return p, nil
}

func (e *State) buffer(label string, size int64) (gpu.Buffer, error) {
	b, err := e.dev.CreateBuffer(label, max(size, 4))
	if err == nil {
		e.owned = append(e.owned, b)
	}
	return b, err
}

// upload copies data into a new buffer, padded to a multiple of 4 bytes.
func (e *State) upload(label string, data []byte) (gpu.Buffer, error) {
	if len(data)%4 != 0 {
		data = append(data[:len(data):len(data)], make([]byte, 4-len(data)%4)...)
	}
	b, err := e.buffer(label, int64(len(data)))
	if err != nil {
		return 0, err
	}
	return b, e.dev.WriteBuffer(b, 0, data)
}

// uploadPiece copies a weight piece from its file into a new buffer.
func (e *State) uploadPiece(label string, p Piece) (gpu.Buffer, error) {
	b, err := e.weightBuffer(label, (p.Length+3)/4*4, p.Format)
	if err != nil {
		return 0, err
	}
	return b, e.writePiece(b, 0, label, p)
}

// weightBuffer makes the buffer for size bytes (whole words) of weights
// in format f, and for the i-quants and MXFP4 writes their lookup tables
// after them, as the buffer's last words, where iquants.wgsl finds them
// (shaders.Tables).
func (e *State) weightBuffer(label string, size int64, f shaders.Format) (gpu.Buffer, error) {
	tab := shaders.Tables(f)
	b, err := e.buffer(label, size+int64(len(tab)))
	if err == nil && len(tab) > 0 {
		err = e.dev.WriteBuffer(b, size, tab)
	}
	return b, err
}

// writePiece copies a weight piece from its file to offset of b (a
// multiple of 4; banks hold several pieces), zero-padded to whole words:
// by the device itself when it can (the wasm host), else through memory.
func (e *State) writePiece(b gpu.Buffer, offset int64, label string, p Piece) error {
	if data := p.bytes(); data != nil {
		if len(data)%4 != 0 {
			data = append(data[:len(data):len(data)], make([]byte, 4-len(data)%4)...)
		}
		return e.dev.WriteBuffer(b, offset, data)
	}
	if fu, ok := e.dev.(gpu.FileUploader); ok {
		return fu.UploadFile(b, offset, p.File, p.Offset, p.Length)
	}
	f, err := os.Open(p.File)
	if err != nil {
		return err
	}
	defer f.Close()
	data := make([]byte, (p.Length+3)/4*4)
	if _, err := f.ReadAt(data[:p.Length], p.Offset); err != nil {
		return fmt.Errorf("%s: reading %s at %d: %w", p.File, label, p.Offset, err)
	}
	return e.dev.WriteBuffer(b, offset, data)
}

func (e *State) uploadF32(label string, v []float32) (gpu.Buffer, error) {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return e.upload(label, b)
}

// Reset empties the sequence; the cache is reused.
func (e *State) Reset() { e.pos = 0 }
