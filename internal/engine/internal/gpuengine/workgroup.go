package gpuengine

import (
	"encoding/binary"
	"fmt"
	"time"

	"logitscope/internal/gpu"
	"logitscope/shaders"
)

// workgroupSizes are the matmul workgroup sizes a State chooses among,
// smallest first. The size sets how many rows a workgroup computes, never
// how a row is summed, so every size gives the same bits.
var workgroupSizes = []int{32, 64, 128, 256}

// sizes are the matmul kernels' workgroup sizes: for one token an
// invocation (decode: main, rows4, a8main, a8rows4, expert, expert4) and
// for eight (prefill: main8, rows4x8, a8rows4x8).
type sizes struct{ decode, prefill int }

// defaultSizes are the sizes on software adapters, where they hardly
// matter: on lavapipe (q4, Qwen2.5-0.5B's shapes, T = 1 and 32) 32, 64
// and 128 took the same time within the machine's noise and 256 up to
// 1.8× longer (a 896-row matrix is then one workgroup of rows4 for two
// cores).
var defaultSizes = sizes{shaders.Workgroup, shaders.Workgroup}

// Each candidate is timed tuneReps times, the best counting, each time
// over as many dispatches in one submission as make about tuneRun by the
// untimed first one's time (at most tuneMaxDispatches).
const (
	tuneReps          = 3
	tuneRun           = 2 * time.Millisecond
	tuneMaxDispatches = 256
)

// chooseSizes sets e.wg: opt's size where it fixes one, the default on
// software adapters (unless opt.Tune), else the fastest of
// workgroupSizes measured on this device for a product of the shape and
// format of the first piece of layer 0's MLP up projection (its q
// projection in a sparse layer), for one token and for a prefill chunk,
// through the entry points the engine takes for it; with zero weights:
// the work, not the values, is timed. It returns the times measured
// (none where it measured nothing), for tests and benchmarks.
func (e *State) chooseSizes(opt Options, src Source) (timings, error) {
	info := e.dev.Info()
	switch {
	case opt.Workgroup != 0:
		if !validSize(opt.Workgroup, info.Limits) {
			return timings{}, fmt.Errorf("matmul workgroup size %d: want one of %v within the device's %d invocations", opt.Workgroup, workgroupSizes, info.Limits.MaxComputeInvocationsPerWorkgroup)
		}
		e.wg = sizes{opt.Workgroup, opt.Workgroup}
		return timings{}, nil
	case info.Software && !opt.Tune:
		e.wg = defaultSizes
		return timings{}, nil
	}
	n := e.g.Names(0)
	name := n.Wup
	if e.g.Sparse != nil && e.g.Sparse[0] {
		name = n.Wq
	}
	ps, err := src.Matrix(name, e.maxPiece)
	if err != nil {
		return timings{}, err
	}
	if ps[0].Format == shaders.EXL3 { // exl3.wgsl's product has no workgroup sizes to choose
		e.wg = defaultSizes
		return timings{}, nil
	}
	t, err := e.timeSizes(ps[0], e.rounds(matrix{pieces: ps}))
	if err != nil {
		return t, fmt.Errorf("choosing the matmul workgroup size on %s: %w", info.Adapter, err)
	}
	e.wg = t.best()
	return t, nil
}

// Workgroups are the matmul kernels' workgroup sizes for one token and
// for eight, as chosen at open: benchmarks report them.
func (e *State) Workgroups() (decode, prefill int) { return e.wg.decode, e.wg.prefill }

// validSize is whether wg is a candidate that the device runs.
func validSize(wg int, lim gpu.Limits) bool {
	for _, s := range workgroupSizes {
		if s == wg && (lim.MaxComputeInvocationsPerWorkgroup == 0 || uint32(wg) <= lim.MaxComputeInvocationsPerWorkgroup) {
			return true
		}
	}
	return false
}

// timings are the best time of each workgroup size (workgroupSizes'
// order; 0 where the device cannot run it) for one token and for a
// prefill chunk.
type timings struct{ decode, prefill []time.Duration }

func (t timings) best() sizes {
	pick := func(ds []time.Duration) int {
		best := 0
		for i, d := range ds {
			if d > 0 && (ds[best] == 0 || d < ds[best]) {
				best = i
			}
		}
		return workgroupSizes[best]
	}
	return sizes{pick(t.decode), pick(t.prefill)}
}

// timeSizes times a product of W's shape and format at every workgroup
// size the device runs (timeEntry).
func (e *State) timeSizes(W Piece, a8 bool) (timings, error) {
	var scratch []gpu.Buffer
	defer func() {
		for _, b := range scratch {
			e.dev.DestroyBuffer(b)
		}
	}()
	// A prefill chunk of the engine's (at least eight tokens), and one.
	T, groups := max(e.chunk, shaders.MatmulTokens), (W.Cols+31)/32
	base, err := W.scaleBase()
	if err != nil {
		return timings{}, err
	}
	// Y = X @ Wᵀ for T tokens (params as productOps writes them, the
	// other fields 0), or for one (the second slot).
	params := make([]byte, 2*paramSlot)
	for slot, tokens := range []int{T, 1} {
		for i, v := range map[int]int{0: W.Rows, 1: W.Cols, 2: groups, 3: int(base), 4: W.Rows, 15: tokens} {
			binary.LittleEndian.PutUint32(params[slot*paramSlot+4*i:], uint32(v))
		}
	}
	bufs := map[int][]byte{0: make([]byte, W.Length), 2: make([]byte, 4*T*W.Rows), 3: make([]byte, 4), 4: params}
	if a8 {
		bufs[8], bufs[9] = make([]byte, 2*T*W.Cols), make([]byte, 8*T*groups)
	} else {
		bufs[1] = make([]byte, 4*T*W.Cols)
	}
	bound := map[uint32]gpu.Buffer{}
	for at, data := range bufs {
		b, err := e.dev.CreateBuffer("workgroup tuning", int64(len(data)+3)/4*4)
		if err != nil {
			return timings{}, err
		}
		scratch = append(scratch, b)
		if err := e.dev.WriteBuffer(b, 0, append(data, make([]byte, (4-len(data)%4)%4)...)); err != nil {
			return timings{}, err
		}
		bound[uint32(at)] = b
	}
	software, lim := e.dev.Info().Software, e.dev.Info().Limits
	t := timings{make([]time.Duration, len(workgroupSizes)), make([]time.Duration, len(workgroupSizes))}
	for i, wg := range workgroupSizes {
		if !validSize(wg, lim) {
			continue
		}
		v := e.matmulVariant(false, a8, wg)
		entry, per, entry8, per8 := matmulEntries(v, W.Cols, software, a8)
		if t.decode[i], err = e.timeEntry(W.Format, v, entry, bound, paramSlot, ceilDiv(W.Rows, per), 1); err != nil {
			return t, err
		}
		if t.prefill[i], err = e.timeEntry(W.Format, v, entry8, bound, 0, ceilDiv(W.Rows, per8), ceilDiv(T, shaders.MatmulTokens)); err != nil {
			return t, err
		}
	}
	return t, nil
}

// timeEntry is the time of one dispatch of variant v's entry over
// (blocks, 1, z) workgroups (blocks wrapped onto y past GridX), its params
// at paramsAt of binding 4, the best of tuneReps runs after an untimed
// one. The pipeline is the engine's own (e.pipeline): the chosen size's
// products reuse it.
func (e *State) timeEntry(f shaders.Format, v shaders.MatmulVariant, entry string, bound map[uint32]gpu.Buffer, paramsAt int64, blocks, z uint32) (time.Duration, error) {
	p, err := e.pipeline(v.Name(f), shaders.Matmul(f, v), entry)
	if err != nil {
		return 0, err
	}
	var bindings []gpu.Binding
	for at, b := range bound {
		bd := gpu.Binding{Binding: at, Buffer: b}
		if at == 4 {
			bd.Offset, bd.Size = paramsAt, paramSlot
		}
		bindings = append(bindings, bd)
	}
	g, err := e.dev.CreateBindGroup(p, 0, bindings)
	if err != nil {
		return 0, err
	}
	defer e.dev.DestroyBindGroup(g)
	// n dispatches in one submission, then the wait: per dispatch.
	run := func(n int) (time.Duration, error) {
		start := time.Now()
		for range n {
			if err := e.dev.Dispatch(p, []gpu.BindGroup{g}, min(blocks, shaders.GridX), ceilDiv(int(blocks), shaders.GridX), z); err != nil {
				return 0, err
			}
		}
		if _, err := e.dev.ReadBuffer(bound[2], 0, 4); err != nil { // submits and waits
			return 0, err
		}
		return time.Since(start) / time.Duration(n), nil
	}
	// The untimed run sizes the timed ones: on a fast GPU one product
	// takes microseconds, less than a submission and its wait, which
	// would time the same for every size.
	once, err := run(1)
	if err != nil {
		return 0, err
	}
	n := int(min(max(tuneRun/max(once, 1), 1), tuneMaxDispatches))
	var best time.Duration
	for range tuneReps {
		d, err := run(n)
		if err != nil {
			return 0, err
		}
		if best == 0 || d < best {
			best = d
		}
	}
	return best, nil
}
