package gpuengine

import (
	"fmt"
	"math"
	"strings"

	"logitscope/internal/gpu"
	"logitscope/internal/model"
	"logitscope/shaders"
)

// matrix is an uploaded weight matrix: one buffer per row-piece. A
// stacked matrix is two or three matrices in one piece, one above the
// other (stackPieces): splits are the rows where the second and third
// begin, plain the first row not interleaved (0: every row is, if any).
type matrix struct {
	pieces []Piece
	bufs   []gpu.Buffer
	splits []int
	plain  int
}

// out is where a product's rows go: Y (T, ld) from element off of buf;
// with add, Y += the product (a stacked product's Ys never add).
type out struct {
	buf gpu.Buffer
	off func(step) int
	ld  int
	add bool
}

// mlp is a (SwiGLU or GeGLU) MLP's uploaded weights: gate and up as one
// stacked matrix or as two, their biases alike, then down.
type mlp struct {
	gateUp     []matrix
	gateUpBias []gpu.Buffer
	down       matrix
	downBias   gpu.Buffer
}

// pending is an op before its bind group exists: the params buffer is
// sized once the whole program is known.
type pending struct {
	op
	bindings []gpu.Binding
	paramsAt uint32 // @binding of the Params uniform
}

// build allocates activations and the KV cache, uploads the weights and
// lays out the program of one forward step.
func (e *State) build(src Source, progress func(done, total int64)) error {
	g := e.g
	d, qDim, kvDim := g.Dim, g.Heads*g.HeadDim, g.KVHeads*g.HeadDim
	// gate and up serve the dense MLP and Qwen2-MoE's shared expert.
	ff := max(g.Intermediate, g.SharedIntermediate)
	c, f := int64(e.chunk), int64(4)
	var err error
	alloc := func(label string, size int64) gpu.Buffer {
		var b gpu.Buffer
		if err == nil {
			b, err = e.buffer(label, size)
		}
		return b
	}
	e.ids = alloc("ids", c*4)
	e.x = alloc("x", c*int64(d)*f)
	e.h = alloc("h", c*int64(d)*f)
	e.q = alloc("q", c*int64(qDim)*f)
	e.att = alloc("att", c*int64(qDim)*f)
	e.o = alloc("o", c*int64(d)*f)
	e.gate = alloc("gate", c*int64(ff)*f)
	e.up = alloc("up", c*int64(ff)*f)
	e.logits = alloc("logits", c*int64(g.Vocab+g.Routes())*f)
	e.scores = alloc("scores", c*int64(g.Heads*e.capacity)*f)
	e.none = alloc("no-bias", 4)
	e.spare = alloc("no-output", 4)
	if e.acts8 {
		cols := int64(max(d, qDim, ff))
		e.xq = alloc("x-q8", c*cols*2)
		e.xd = alloc("x-q8-scales", c*cols/32*8)
	}
	if g.SparseLayers() > 0 {
		K, eff := int64(g.TopK), int64(g.ExpertIntermediate)
		e.router = alloc("router", c*int64(g.Experts)*f)
		e.routeIDs = alloc("route-ids", c*K*4)
		e.routeW = alloc("route-weights", c*K*f)
		e.eg = alloc("expert-gate", c*K*eff*f)
		e.eu = alloc("expert-up", c*K*eff*f)
		e.ey = alloc("expert-out", c*K*int64(d)*f)
		if g.SharedIntermediate > 0 {
			e.shared = alloc("shared-expert", c*int64(d)*f)
			e.sgate = alloc("shared-expert-gate", c*f)
		}
	}
	for l := 0; l < g.NumLayers; l++ {
		e.kc = append(e.kc, alloc(fmt.Sprintf("k-cache.%d", l), int64(e.capacity*kvDim)*f))
		e.vc = append(e.vc, alloc(fmt.Sprintf("v-cache.%d", l), int64(e.capacity*kvDim)*f))
	}
	if err != nil {
		return err
	}
	if err := e.uploadRope(); err != nil {
		return err
	}

	up := uploader{e: e, src: src, total: int64(len(g.Specs())), progress: progress}
	embed := up.matrix(model.EmbedName)
	prog := e.embedOps(embed)
	if g.EmbedScale != 0 {
		prog = append(prog, e.scaleOp("embed-scale", e.x, g.EmbedScale, d))
	}
	sparseSeen := 0
	for l := 0; l < g.NumLayers; l++ {
		n := g.Names(l)
		attnNorm, mlpNorm := up.vector(n.AttnNorm), up.vector(n.MLPNorm)
		var postAttnNorm, postMLPNorm gpu.Buffer
		if g.SandwichNorm {
			postAttnNorm, postMLPNorm = up.vector(n.PostAttnNorm), up.vector(n.PostMLPNorm)
		}
		var qkvBias []string
		if g.QKVBias {
			qkvBias = []string{n.Bq, n.Bk, n.Bv}
		}
		qkv, bqkv := up.stack([]string{n.Wq, n.Wk, n.Wv}, qkvBias)
		wo, bo := up.matrix(n.Wo), e.none
		if g.OBias {
			bo = up.vector(n.Bo)
		}
		var qNorm, kNorm gpu.Buffer
		if g.QKNorm {
			qNorm, kNorm = up.vector(n.QNorm), up.vector(n.KNorm)
		}
		sparse := g.Sparse != nil && g.Sparse[l]
		var moe moeLayer
		var dense mlp
		if sparse {
			moe = up.moe(n, sparseSeen)
			sparseSeen++
		} else {
			var biases [3]string
			if g.MLPBias {
				biases = [3]string{n.Bgate, n.Bup, n.Bdown}
			}
			dense = up.mlp([3]string{n.Wgate, n.Wup, n.Wdown}, biases)
		}
		if up.err != nil {
			return up.err
		}
		kvOff := func(s step) int { return s.pos0 * kvDim }
		zero := func(step) int { return 0 }
		T := func(s step) int { return s.T }
		rounded := e.normRounds(qkv...)
		prog = append(prog, e.rmsnormOp("attn-norm", e.x, attnNorm, e.h, T, zero, rounded))
		prog = append(prog, e.stackOps([]string{"q", "k", "v"}, qkv, bqkv, []out{{e.q, zero, qDim, false}, {e.kc[l], kvOff, kvDim, false}, {e.vc[l], kvOff, kvDim, false}}, T, rounded)...)
		if g.QKNorm {
			prog = append(prog, e.headNormOp("q-norm", e.q, qNorm, g.Heads, zero), e.headNormOp("k-norm", e.kc[l], kNorm, g.KVHeads, kvOff))
		}
		table := e.rope
		if g.LocalRope(l) {
			table = e.ropeLocal
		}
		prog = append(prog, e.ropeOp(table, e.kc[l], kvOff))
		prog = append(prog, e.attentionOp(l))
		attnOut := e.blockOut(postAttnNorm)
		prog = append(prog, e.productOps("o", wo, e.att, zero, []out{attnOut}, bo, T, false)...)
		prog = append(prog, e.residualOps("post-attn-norm", postAttnNorm, attnOut)...)
		rounded = e.normRounds(dense.gateUp...)
		prog = append(prog, e.rmsnormOp("mlp-norm", e.x, mlpNorm, e.h, T, zero, rounded))
		act := "silu_mul"
		if g.GeluTanh {
			act = "gelu_tanh_mul"
		}
		mlpOut := out{e.o, zero, d, false}
		if sparse {
			prog = append(prog, e.moeOps(moe, act)...)
		} else {
			mlpOut = e.blockOut(postMLPNorm)
			prog = append(prog, e.swigluOps("", dense, g.Intermediate, act, mlpOut, rounded)...)
		}
		prog = append(prog, e.residualOps("post-mlp-norm", postMLPNorm, mlpOut)...)
	}
	norm := up.vector(model.NormName)
	head := embed
	if !g.TiedHead {
		head = up.matrix(model.HeadName)
	}
	if up.err != nil {
		return up.err
	}
	// The final norm writes the rows whose logits are wanted to h's top.
	rows := func(s step) int { return s.rows }
	lastRows := func(s step) int { return (s.T - s.rows) * d }
	rounded := e.normRounds(head)
	zero := func(step) int { return 0 }
	prog = append(prog, e.rmsnormOp("final-norm", e.x, norm, e.h, rows, lastRows, rounded))
	// Rows are Vocab + Routes wide: the route kernels filled the tails.
	prog = append(prog, e.productOps("head", head, e.h, zero, []out{{e.logits, zero, g.Vocab + g.Routes(), false}}, e.none, rows, rounded)...)
	return e.finish(prog)
}

// swigluOps: y (T, d) = Wdown (act(Wgate h + bg) ⊙ (Wup h + bu)) + bd
// (y.add: y +=), through gate and up (T, ff); name prefixes the ops'
// names ("shared-" for Qwen2-MoE's shared expert); rounded: the norm
// before rounded h for gate and up (e.rounds).
func (e *State) swigluOps(name string, m mlp, ff int, act string, y out, rounded bool) []pending {
	zero := func(step) int { return 0 }
	T := func(s step) int { return s.T }
	prog := e.stackOps([]string{name + "gate", name + "up"}, m.gateUp, m.gateUpBias, []out{{e.gate, zero, ff, false}, {e.up, zero, ff, false}}, T, rounded)
	down := e.rounds(m.down)
	if down {
		prog = append(prog, e.roundOp(act+"_q8", e.gate, e.up, ff, zero, T))
	} else {
		prog = append(prog, e.elementwiseOp(act, e.gate, e.up, ff))
	}
	return append(prog, e.productOps(name+"down", m.down, e.gate, zero, []out{y}, m.downBias, T, down)...)
}

// stackOps: ys[i] = h @ W_iᵀ + b_i for the matrices that up.stack
// uploaded for names, in one dispatch where it stacked them; rounded:
// the norm before rounded h for them (e.rounds(ms...)).
func (e *State) stackOps(names []string, ms []matrix, biases []gpu.Buffer, ys []out, tokens func(step) int, rounded bool) []pending {
	zero := func(step) int { return 0 }
	if len(ms) == 1 && len(names) > 1 {
		return e.productOps(strings.Join(names, "+"), ms[0], e.h, zero, ys, biases[0], tokens, rounded)
	}
	var prog []pending
	for i, m := range ms {
		prog = append(prog, e.productOps(names[i], m, e.h, zero, ys[i:i+1], biases[i], tokens, rounded)...)
	}
	return prog
}

// finish sizes the params buffer and creates each op's bind group.
func (e *State) finish(prog []pending) error {
	var err error
	if e.params, err = e.buffer("params", int64(len(prog))*paramSlot); err != nil {
		return err
	}
	for i, p := range prog {
		if p.pipe == 0 {
			return fmt.Errorf("%s: %w", p.name, e.buildErr)
		}
		b := append(p.bindings, gpu.Binding{Binding: p.paramsAt, Buffer: e.params, Offset: int64(i) * paramSlot, Size: paramSlot})
		if p.group, err = e.dev.CreateBindGroup(p.pipe, 0, b); err != nil {
			return fmt.Errorf("%s: %w", p.name, err)
		}
		if p.many != nil {
			p.many.bindings = b
		}
		e.prog = append(e.prog, p.op)
	}
	return nil
}

// uploadRope writes the (capacity, RopeDim/2) cos/sin table of InvFreq,
// and a second one of the local base where sliding layers have their own
// (Gemma 3).
func (e *State) uploadRope() error {
	table := func(label string, inv []float32) (gpu.Buffer, error) {
		tab := make([]float32, 0, e.capacity*len(inv)*2)
		for pos := 0; pos < e.capacity; pos++ {
			for _, f := range inv {
				c, s := model.Rotation(pos, f)
				tab = append(tab, c, s)
			}
		}
		return e.uploadF32(label, tab)
	}
	var err error
	if e.rope, err = table("rope", e.g.InvFreq()); err != nil {
		return err
	}
	for l := range e.g.NumLayers {
		if e.g.LocalRope(l) {
			e.ropeLocal, err = table("rope-local", e.g.LayerInvFreq(l))
			break
		}
	}
	return err
}

// uploader uploads tensors from a source, keeping the first error.
type uploader struct {
	e           *State
	src         Source
	err         error
	done, total int64
	progress    func(done, total int64)
}

func (u *uploader) tick() {
	if u.done++; u.progress != nil {
		u.progress(min(u.done, u.total), u.total)
	}
}

func (u *uploader) matrix(name string) matrix {
	if u.err != nil {
		return matrix{}
	}
	return u.upload(name, u.pieces(name))
}

// pieces are matrix name's pieces as the source serves them, each checked.
func (u *uploader) pieces(name string) []Piece {
	ps, err := u.src.Matrix(name, u.e.maxPiece)
	for _, p := range ps {
		if err == nil {
			err = p.check()
		}
		if err == nil && p.Format == shaders.EXL3 {
			err = u.e.exl3Scratch()
		}
		if err == nil && p.Acts != "" {
			err = u.e.actsScratch()
		}
	}
	u.err = err
	return ps
}

// upload uploads matrix name's pieces, a buffer each.
func (u *uploader) upload(name string, ps []Piece) matrix {
	m := matrix{pieces: ps}
	for i, p := range ps {
		if u.err != nil {
			break
		}
		var b gpu.Buffer
		b, u.err = u.e.uploadPiece(fmt.Sprintf("%s[%d]", name, i), p)
		m.bufs = append(m.bufs, b)
	}
	u.tick()
	return m
}

// stack uploads matrices that multiply the same X (q, k and v; gate and
// up) and their biases (nil: none): as one stacked matrix and one stacked
// bias where stackPieces can lay the matrices out, else each alone.
func (u *uploader) stack(names, biases []string) ([]matrix, []gpu.Buffer) {
	if u.err != nil {
		return nil, nil
	}
	each := make([][]Piece, len(names))
	var pieces []Piece
	for i, name := range names {
		if each[i] = u.pieces(name); u.err != nil {
			return nil, nil
		}
		pieces = append(pieces, each[i]...)
	}
	st, ok := stackPieces(pieces, u.e.maxPiece)
	if len(pieces) != len(names) || !ok {
		ms, bs := make([]matrix, len(names)), make([]gpu.Buffer, len(names))
		for i, name := range names {
			ms[i], bs[i] = u.upload(name, each[i]), u.e.none
			if biases != nil {
				bs[i] = u.vector(biases[i])
			}
		}
		return ms, bs
	}
	m := matrix{pieces: []Piece{st.piece}, splits: st.splits, plain: st.plain}
	label := strings.Join(names, "+")
	b, err := u.e.weightBuffer(label, (st.piece.Length+3)/4*4, st.piece.Format)
	for at, i := int64(0), 0; err == nil && i < len(st.regions); i++ {
		err = u.e.writePiece(b, at, label, st.regions[i])
		at += st.regions[i].Length
	}
	m.bufs, u.err = []gpu.Buffer{b}, err
	for range names {
		u.tick()
	}
	bias := u.e.none
	if biases != nil && u.err == nil {
		var v []float32
		for _, name := range biases {
			part, err := u.src.Vector(name)
			if err != nil {
				u.err = err
				return nil, nil
			}
			v = append(v, part...)
			u.tick()
		}
		bias, u.err = u.e.uploadF32(label+".bias", v)
	}
	return []matrix{m}, []gpu.Buffer{bias}
}

// mlp uploads gate, up and down (names) and their biases (empty: none),
// gate and up stacked where they can be.
func (u *uploader) mlp(names, biases [3]string) mlp {
	var m mlp
	var stackBias []string
	if biases[0] != "" {
		stackBias = biases[:2]
	}
	m.gateUp, m.gateUpBias = u.stack(names[:2], stackBias)
	m.down, m.downBias = u.matrix(names[2]), u.e.none
	if biases[2] != "" {
		m.downBias = u.vector(biases[2])
	}
	return m
}

func (u *uploader) vector(name string) gpu.Buffer {
	if u.err != nil {
		return 0
	}
	v, err := u.src.Vector(name)
	if err != nil {
		u.err = err
		return 0
	}
	var b gpu.Buffer
	b, u.err = u.e.uploadF32(name, v)
	u.tick()
	return b
}

// kernel is pipeline for the op builders: a failure is kept in
// e.buildErr and surfaces in finish, where the op has no pipeline.
func (e *State) kernel(name, src, entry string) gpu.Pipeline {
	p, err := e.pipeline(name, src, entry)
	if err != nil && e.buildErr == nil {
		e.buildErr = err
	}
	return p
}

// matmulEntries are the matmul.wgsl entry points that multiply a piece
// with cols columns, one token at a time and eight at a time, and the
// output rows of a workgroup of each in variant v. Every one gives the
// same bits. On a real GPU: main (LANES invocations per row) and main8 (a
// row per invocation). A software adapter runs a workgroup's invocations
// as SIMD lanes, where each load from a buffer is a loop over the lanes,
// and loads of X dominate: rows4 and rows4x8 (cols a multiple of 32) load
// each element of X once for four rows. On lavapipe
// (BenchmarkPrefillKernel, 4864x896) rows4 takes 0.3–0.5 of main's time,
// rows4x8 0.3–0.4 of main8's (0.7 for ggml's blocks). With 8-bit
// activations (a8): matmul_a8.wgsl's a8rows4x8 (rows4x8's shape)
// everywhere, and for one token a8rows4 on software adapters and a8main
// (main's shape, A8Lanes invocations a row) on the others.
func matmulEntries(v shaders.MatmulVariant, cols int, software, a8 bool) (entry string, perGroup int, entry8 string, perGroup8 int) {
	switch {
	case a8 && software:
		return "a8rows4", v.Rows4(), "a8rows4x8", v.Rows4()
	case a8:
		return "a8main", v.A8Rows(), "a8rows4x8", v.Rows4()
	case software && cols%32 == 0:
		return "rows4", v.Rows4(), "rows4x8", v.Rows4()
	}
	return "main", v.Rows(), "main8", v.Rows8()
}

// matmulVariant is the matmul kernel a product takes: stacked or not;
// adding a row's lanes in a subgroup (no workgroup memory, no barriers:
// the same bits) where the device's subgroups hold a row's lanes; and of
// workgroups of wg invocations. Products with 8-bit activations add
// a8main's 16 lanes in workgroup memory: the subgroups here hold 8 (4 in
// Chromium), so the shuffles could not be tested with 16.
func (e *State) matmulVariant(stacked, a8 bool, wg int) shaders.MatmulVariant {
	info := e.dev.Info()
	return shaders.MatmulVariant{Stacked: stacked, Subgroups: !a8 && info.Subgroups && info.SubgroupMinSize >= shaders.MatmulLanes, Workgroup: wg}
}

// matmulOps: Y (T, ldy) at yOff = X (T, cols) at xOff @ Wᵀ + b, one
// dispatch per piece of W.
func (e *State) matmulOps(name string, W matrix, x gpu.Buffer, xOff func(step) int, y gpu.Buffer, yOff func(step) int, ldy int, bias gpu.Buffer, tokens func(step) int) []pending {
	return e.productOps(name, W, x, xOff, []out{{y, yOff, ldy, false}}, bias, tokens, false)
}

// productOps is matmulOps with a Y per matrix of a stacked W (ys[0] alone
// otherwise); rounded: the op before rounded X into xq and xd for it (W
// takes 8-bit activations, e.rounds).
func (e *State) productOps(name string, W matrix, x gpu.Buffer, xOff func(step) int, ys []out, bias gpu.Buffer, tokens func(step) int, rounded bool) []pending {
	if p := W.pieces[0]; p.Format == shaders.EXL3 {
		return e.exl3Ops(name, p, W.bufs[0], tokens, nil, false, x, xOff, ys[0], bias)
	}
	var prog []pending
	if mode := W.pieces[0].Acts; mode != "" { // a lookup matrix's (every piece's)
		prog = append(prog, e.actsOp(name, mode, x, xOff, W.pieces[0].Cols, tokens))
		x, xOff = e.actsX, func(step) int { return 0 }
	}
	software := e.dev.Info().Software
	a8 := e.rounds(W)
	variant := e.matmulVariant(len(W.splits) > 0, a8, e.wg.decode)
	variant8 := e.matmulVariant(len(W.splits) > 0, a8, e.wg.prefill)
	if a8 && !rounded {
		prog = append(prog, e.roundOp("quantize", x, 0, W.pieces[0].Cols, xOff, tokens))
	}
	// A stacked piece's second and third Y; a third never written when
	// there are two matrices, bound to a buffer of its own (WebGPU refuses
	// a writable binding that aliases another).
	split, add := [2]uint32{}, uint32(0)
	if ys[0].add {
		add = 1
	}
	more := []out{{buf: e.spare, off: func(step) int { return 0 }}, {buf: e.spare, off: func(step) int { return 0 }}}
	for j, at := range W.splits {
		split[j], more[j] = uint32(at), ys[j+1]
	}
	for i, p := range W.pieces {
		kernel, src := variant.Name(p.Format), shaders.Matmul(p.Format, variant)
		entry, perGroup, _, _ := matmulEntries(variant, p.Cols, software, a8)
		_, _, entry8, perGroup8 := matmulEntries(variant8, p.Cols, software, a8)
		pipe := e.kernel(kernel, src, entry)
		base, _ := p.scaleBase()
		groups := uint32((p.Cols + 31) / 32)
		hasBias := uint32(0)
		if bias != e.none {
			hasBias = 1
		}
		bindings := []gpu.Binding{{Binding: 0, Buffer: W.bufs[i]}, {Binding: 2, Buffer: ys[0].buf}, {Binding: 3, Buffer: bias}}
		if a8 {
			bindings = append(bindings, gpu.Binding{Binding: 8, Buffer: e.xq}, gpu.Binding{Binding: 9, Buffer: e.xd})
		} else {
			bindings = append(bindings, gpu.Binding{Binding: 1, Buffer: x})
		}
		if variant.Stacked {
			bindings = append(bindings, gpu.Binding{Binding: 6, Buffer: more[0].buf}, gpu.Binding{Binding: 7, Buffer: more[1].buf})
		}
		prog = append(prog, pending{
			op: op{
				name: fmt.Sprintf("%s[%d]", name, i), family: "matmul " + name, pipe: pipe,
				dims: func(s step) (uint32, uint32, uint32) {
					blocks := (p.Rows + perGroup - 1) / perGroup
					return uint32(min(blocks, shaders.GridX)), ceilDiv(blocks, shaders.GridX), uint32(tokens(s))
				},
				params: func(s step) []uint32 {
					// The expert fields (first … x_slot) stay 0.
					return []uint32{uint32(p.Rows), uint32(p.Cols), groups, base, uint32(ys[0].ld), uint32(p.Row0),
						uint32(ys[0].off(s)), hasBias, uint32(xOff(s)), 0, 0, 0, 0, 0, uint32(p.Interleaved), uint32(tokens(s)),
						uint32(W.plain), split[0], split[1], uint32(more[0].off(s)), uint32(more[0].ld), uint32(more[1].off(s)), uint32(more[1].ld), add}
				},
				many: &manyTokens{format: p.Format, variant: variant8, entry: entry8, blocks: (p.Rows + perGroup8 - 1) / perGroup8},
			},
			bindings: bindings,
			paramsAt: 4,
		})
	}
	return prog
}

// takesA8 is whether every piece of W has a format that the a8 entry
// points take, in whole blocks: as the CPU engine's takesA8.
func takesA8(W matrix) bool {
	for _, p := range W.pieces {
		if !p.Format.A8() || p.Cols%32 != 0 {
			return false
		}
	}
	return len(W.pieces) > 0
}

// rounds is whether there are products in ms and all take 8-bit
// activations, so that the op making their X rounds it too
// (rmsnorm.wgsl's main_q8, elementwise.wgsl's *_q8) and they skip their
// own quantize (none: a sparse layer's MLP, whose dense matrices are
// absent).
func (e *State) rounds(ms ...matrix) bool {
	if !e.acts8 || len(ms) == 0 {
		return false
	}
	for _, m := range ms {
		if !takesA8(m) {
			return false
		}
	}
	return true
}

// normRounds is rounds where a norm's rounding costs no more than the
// quantize dispatch it saves: not on software adapters, where rmsnorm.wgsl's
// main_q8 took 2–6 ms for one Qwen2.5-0.5B row on lavapipe against 0.08
// for main and 0.08 for quantize (the work after its barrier runs slowly
// there); on a real GPU one block of 32 an invocation is nothing beside a
// dispatch.
func (e *State) normRounds(ms ...matrix) bool {
	return !e.dev.Info().Software && e.rounds(ms...)
}

// roundOp runs elementwise.wgsl's quantize (a (T, cols) from element
// off(s) rounded to 8-bit blocks into xq and xd, for the a8 products that
// follow) or a *_q8 entry point (silu_mul or gelu_tanh_mul, then the
// same), an invocation per block.
func (e *State) roundOp(entry string, a, b gpu.Buffer, cols int, off func(step) int, tokens func(step) int) pending {
	bindings := []gpu.Binding{{Binding: 0, Buffer: a}, {Binding: 4, Buffer: e.xq}, {Binding: 5, Buffer: e.xd}}
	if b != 0 {
		bindings = append(bindings, gpu.Binding{Binding: 1, Buffer: b})
	}
	return pending{
		op: op{
			name: entry, family: entry, pipe: e.kernel("elementwise", shaders.Elementwise(), entry),
			dims: func(s step) (uint32, uint32, uint32) {
				return ceilDiv(tokens(s)*cols/32, shaders.Workgroup), 1, 1
			},
			params: func(s step) []uint32 { return []uint32{uint32(tokens(s) * cols), 0, uint32(cols), uint32(off(s))} },
		},
		bindings: bindings,
		paramsAt: 2,
	}
}

func (e *State) embedOps(E matrix) []pending {
	var out []pending
	for i, p := range E.pieces {
		pipe := e.kernel("embed-"+p.Format.String(), shaders.Embed(p.Format), "main")
		base, _ := p.scaleBase()
		groups := (p.Cols + 31) / 32
		out = append(out, pending{
			op: op{
				name: fmt.Sprintf("embed[%d]", i), family: "embed", pipe: pipe,
				dims: func(s step) (uint32, uint32, uint32) { return ceilDiv(groups, shaders.Workgroup), uint32(s.T), 1 },
				params: func(step) []uint32 {
					return []uint32{uint32(p.Rows), uint32(p.Cols), uint32(groups), base, uint32(p.Row0)}
				},
			},
			bindings: []gpu.Binding{{Binding: 0, Buffer: E.bufs[i]}, {Binding: 1, Buffer: e.ids}, {Binding: 2, Buffer: e.x}},
			paramsAt: 4,
		})
	}
	return out
}

// blockOut is where a block's last product (attention's o, the MLP's
// down) goes: onto the residual stream x itself, x += W h + b, the add
// kernel's one rounding without its dispatch; into o where a post norm
// (Gemma 3's post_attention_layernorm and post_feedforward_layernorm)
// comes between.
func (e *State) blockOut(postNorm gpu.Buffer) out {
	zero := func(step) int { return 0 }
	if postNorm == 0 {
		return out{e.x, zero, e.g.Dim, true}
	}
	return out{e.o, zero, e.g.Dim, false}
}

// residualOps adds the block output y to the residual stream x, unless
// the product added itself (blockOut); with a post norm, x += norm(o)
// through h.
func (e *State) residualOps(name string, postNorm gpu.Buffer, y out) []pending {
	d := e.g.Dim
	if y.add {
		return nil
	}
	if postNorm == 0 {
		return []pending{e.elementwiseOp("add", e.x, y.buf, d)}
	}
	T, zero := func(s step) int { return s.T }, func(step) int { return 0 }
	return []pending{e.rmsnormOp(name, e.o, postNorm, e.h, T, zero, false), e.elementwiseOp("add", e.x, e.h, d)}
}

// unit is rmsnorm.wgsl's unit param: 1 where norms scale by 1 + w.
func (e *State) unit() uint32 {
	if e.g.NormUnitOffset {
		return 1
	}
	return 0
}

// rmsnormOp normalizes rows(s) rows of x starting at element xOff(s) into
// out's first rows; with round, also into xq and xd for the products that
// follow (rmsnorm.wgsl's main_q8).
func (e *State) rmsnormOp(name string, x, w, out gpu.Buffer, rows func(step) int, xOff func(step) int, round bool) pending {
	d := e.g.Dim
	entry, bindings := "main", []gpu.Binding{{Binding: 0, Buffer: x}, {Binding: 1, Buffer: w}, {Binding: 2, Buffer: out}}
	if round {
		entry, bindings = "main_q8", append(bindings, gpu.Binding{Binding: 4, Buffer: e.xq}, gpu.Binding{Binding: 5, Buffer: e.xd})
	}
	return pending{
		op: op{
			name: name, family: "rmsnorm", pipe: e.kernel("rmsnorm", shaders.RMSNorm(), entry),
			dims: func(s step) (uint32, uint32, uint32) { return uint32(rows(s)), 1, 1 },
			params: func(s step) []uint32 {
				return []uint32{uint32(d), math.Float32bits(e.g.NormEps), uint32(xOff(s)), 0, e.unit()}
			},
		},
		bindings: bindings,
		paramsAt: 3,
	}
}

// headNormOp RMS-normalizes v's T*heads head vectors (hd,) from element
// off(s) on, in place: Qwen3's and Gemma 3's q_norm on q and k_norm on the keys just
// written to the KV cache, before RoPE.
func (e *State) headNormOp(name string, v, w gpu.Buffer, heads int, off func(step) int) pending {
	hd := e.g.HeadDim
	return pending{
		op: op{
			name: name, family: "qk-norm", pipe: e.kernel("rmsnorm", shaders.RMSNorm(), "in_place"),
			dims: func(s step) (uint32, uint32, uint32) { return uint32(s.T * heads), 1, 1 },
			params: func(s step) []uint32 {
				return []uint32{uint32(hd), math.Float32bits(e.g.NormEps), uint32(off(s)), 0, e.unit()}
			},
		},
		bindings: []gpu.Binding{{Binding: 1, Buffer: w}, {Binding: 2, Buffer: v}},
		paramsAt: 3,
	}
}

// ropeOp rotates q's T*Heads head vectors and those of the k rows from
// kOff (KVHeads a row) with the cos/sin table, in one dispatch: the first
// RopeDim values of each head (all of it but with a partial_rotary_factor).
func (e *State) ropeOp(table, k gpu.Buffer, kOff func(step) int) pending {
	g := e.g
	hd, rd, qDim, kvDim := g.HeadDim, g.RopeDim(), g.Heads*g.HeadDim, g.KVHeads*g.HeadDim
	return pending{
		op: op{
			name: "rope", family: "rope", pipe: e.kernel("rope", shaders.RoPE(), "main"),
			dims: func(s step) (uint32, uint32, uint32) {
				return ceilDiv((g.Heads+g.KVHeads)*rd/2, shaders.Workgroup), uint32(s.T), 1
			},
			params: func(s step) []uint32 {
				return []uint32{uint32(g.Heads), uint32(hd), uint32(s.pos0), 0, uint32(qDim), uint32(g.KVHeads), uint32(kOff(s)), uint32(kvDim), uint32(rd)}
			},
		},
		bindings: []gpu.Binding{{Binding: 0, Buffer: e.q}, {Binding: 1, Buffer: table}, {Binding: 3, Buffer: k}},
		paramsAt: 2,
	}
}

func (e *State) attentionOp(l int) pending {
	g := e.g
	scale := g.AttnScale()
	window := 0
	if g.Window != nil {
		window = g.Window[l]
	}
	return pending{
		op: op{
			name: fmt.Sprintf("attention.%d", l), family: "attention", pipe: e.kernel("attention", shaders.Attention(), "main"),
			dims: func(s step) (uint32, uint32, uint32) { return uint32(g.Heads), uint32(s.T), 1 },
			params: func(s step) []uint32 {
				return []uint32{uint32(g.Heads), uint32(g.KVHeads), uint32(g.HeadDim), uint32(s.pos0), uint32(e.capacity), math.Float32bits(scale), uint32(window)}
			},
		},
		bindings: []gpu.Binding{{Binding: 0, Buffer: e.q}, {Binding: 1, Buffer: e.kc[l]}, {Binding: 2, Buffer: e.vc[l]},
			{Binding: 3, Buffer: e.att}, {Binding: 4, Buffer: e.scores}},
		paramsAt: 5,
	}
}

// elementwiseOp runs entry (add, silu_mul or gelu_tanh_mul) over T rows of
// width n.
func (e *State) elementwiseOp(entry string, a, b gpu.Buffer, width int) pending {
	return pending{
		op: op{
			name: entry, family: entry, pipe: e.kernel("elementwise", shaders.Elementwise(), entry),
			dims:   func(s step) (uint32, uint32, uint32) { return ceilDiv(s.T*width, shaders.Workgroup), 1, 1 },
			params: func(s step) []uint32 { return []uint32{uint32(s.T * width)} },
		},
		bindings: []gpu.Binding{{Binding: 0, Buffer: a}, {Binding: 1, Buffer: b}},
		paramsAt: 2,
	}
}

// scaleOp multiplies T rows of width n of a by s (Gemma 3's embeddings).
func (e *State) scaleOp(name string, a gpu.Buffer, s float32, width int) pending {
	return pending{
		op: op{
			name: name, family: "scale", pipe: e.kernel("elementwise", shaders.Elementwise(), "scale"),
			dims:   func(st step) (uint32, uint32, uint32) { return ceilDiv(st.T*width, shaders.Workgroup), 1, 1 },
			params: func(st step) []uint32 { return []uint32{uint32(st.T * width), math.Float32bits(s)} },
		},
		bindings: []gpu.Binding{{Binding: 0, Buffer: a}},
		paramsAt: 2,
	}
}
