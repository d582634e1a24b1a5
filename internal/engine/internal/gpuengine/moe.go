package gpuengine

import (
	"fmt"
	"math"

	"logitscope/internal/gpu"
	"logitscope/internal/model"
	"logitscope/shaders"
)

// A sparse layer's MLP runs in one submission with the rest of the step:
// the router's logits (a matmul), the route kernel (softmax, top-k, the
// ids into the logit rows' route tail), each routed expert's SwiGLU as
// dispatches over (row blocks, K, T) that read the chosen expert from the
// route buffer, and the combine kernel (shaders/moe.wgsl). Go never reads
// the routes back: the chosen experts' matrices are found in banks.

// bank is routed experts [first, first+count) of one matrix of a sparse
// layer (gate, up or down), rows [piece.Row0, piece.Row0+piece.Rows) of
// each: pieces of one format and byte size, stride bytes apart in one
// buffer of at most one binding, so that a dispatch per bank serves every
// token whichever of its experts the router chose. A quantized piece's
// layout depends only on its shape, so one offset per expert finds it.
type bank struct {
	first, count int
	piece        Piece // the layout every expert's piece shares
	stride       int64 // bytes from one expert's piece to the next
	buf          gpu.Buffer
}

// moeLayer is a sparse layer's uploaded MLP.
type moeLayer struct {
	router         matrix
	gate, up, down []bank
	shared         *mlp       // Qwen2-MoE's shared expert, GLM's shared experts; nil without
	sharedGate     matrix     // (1, d); no pieces where the shared expert is ungated (GLM)
	bias           gpu.Buffer // GLM's e_score_correction_bias (E,); e.none with a softmax router
	sparse         int        // the layer's index among the sparse layers
}

func (u *uploader) moe(n model.LayerNames, sparse int) moeLayer {
	g := u.e.g
	L := moeLayer{router: u.matrix(n.Router), bias: u.e.none, sparse: sparse}
	if g.Sigmoid {
		L.bias = u.vector(n.ScoreBias)
	}
	names := func(pick func(model.ExpertNames) string) []string {
		out := make([]string, g.Experts)
		for e := range out {
			out[e] = pick(n.Expert(e))
		}
		return out
	}
	L.gate = u.experts(names(func(x model.ExpertNames) string { return x.Wgate }))
	L.up = u.experts(names(func(x model.ExpertNames) string { return x.Wup }))
	L.down = u.experts(names(func(x model.ExpertNames) string { return x.Wdown }))
	if g.SharedIntermediate > 0 {
		shared := u.mlp([3]string{n.Shared.Wgate, n.Shared.Wup, n.Shared.Wdown}, [3]string{})
		L.shared = &shared
		if !g.SharedUngated {
			L.sharedGate = u.matrix(n.SharedGate)
		}
	}
	return L
}

// experts uploads one matrix of every routed expert of a layer into
// banks. Each expert's piece j (the same rows in every expert) goes to a
// bank of piece j; a bank holds consecutive experts of the same format
// and size, as many as one binding takes, and a change of format (a
// variant may store experts in different schemes) starts a new one.
func (u *uploader) experts(names []string) []bank {
	if u.err != nil {
		return nil
	}
	pieces := make([][]Piece, len(names))
	for e, name := range names {
		if pieces[e], u.err = u.src.Matrix(name, u.e.maxPiece); u.err != nil {
			return nil
		}
		for _, p := range pieces[e] {
			switch {
			case p.Interleaved != 0:
				u.err = fmt.Errorf("%s: an expert's rows are not q/k rows to de-interleave", name)
			case p.Format == shaders.EXL3:
				if u.err = p.check(); u.err == nil {
					u.err = u.e.exl3Scratch()
				}
			default:
				u.err = p.check()
			}
			if u.err == nil && p.Acts != "" {
				u.err = u.e.actsScratch()
			}
			if u.err != nil {
				return nil
			}
		}
		if !sameRows(pieces[e], pieces[0]) {
			u.err = fmt.Errorf("%s is split into other rows than %s: the GPU needs a layer's experts split alike", name, names[0])
			return nil
		}
	}
	var banks []bank
	for j := range pieces[0] {
		for e := 0; e < len(names); {
			p := pieces[e][j]
			stride := (p.Length + 3) / 4 * 4
			n := 1
			for e+n < len(names) && int64(n+1)*stride <= u.e.maxPiece &&
				pieces[e+n][j].Format == p.Format && pieces[e+n][j].EXL3 == p.EXL3 && pieces[e+n][j].Length == p.Length &&
				pieces[e+n][j].Acts == p.Acts {
				n++
			}
			b := bank{first: e, count: n, piece: p, stride: stride}
			label := fmt.Sprintf("%s..%d[%d]", names[e], e+n-1, j)
			if b.buf, u.err = u.e.weightBuffer(label, int64(n)*stride, p.Format); u.err != nil {
				return nil
			}
			for i := 0; i < n; i++ {
				if u.err = u.e.writePiece(b.buf, int64(i)*stride, label, pieces[e+i][j]); u.err != nil {
					return nil
				}
			}
			banks = append(banks, b)
			e += n
		}
	}
	for range names {
		u.tick()
	}
	return banks
}

// sameRows tells whether two matrices are split into the same row pieces.
func sameRows(a, b []Piece) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Row0 != b[i].Row0 || a[i].Rows != b[i].Rows || a[i].Cols != b[i].Cols {
			return false
		}
	}
	return true
}

// moeOps is a sparse layer's MLP, from the normalized h to its output in o.
func (e *State) moeOps(L moeLayer, act string) []pending {
	g := e.g
	E, K, ff, d := g.Experts, g.TopK, g.ExpertIntermediate, g.Dim
	zero := func(step) int { return 0 }
	T := func(s step) int { return s.T }
	prog := e.matmulOps("router", L.router, e.h, zero, e.router, zero, E, e.none, T)
	prog = append(prog, e.routeOp(L))
	prog = append(prog, e.expertOps("expert-gate", L.gate, e.h, false, e.eg, ff)...)
	prog = append(prog, e.expertOps("expert-up", L.up, e.h, false, e.eu, ff)...)
	prog = append(prog, e.elementwiseOp(act, e.eg, e.eu, K*ff))
	prog = append(prog, e.expertOps("expert-down", L.down, e.eg, true, e.ey, d)...)
	shared, sgate := e.none, e.none
	if L.shared != nil {
		shared, sgate = e.shared, e.sgate
		prog = append(prog, e.swigluOps("shared-", *L.shared, g.SharedIntermediate, act, out{e.shared, zero, d, false}, false)...)
		if !g.SharedUngated {
			prog = append(prog, e.matmulOps("shared-expert-gate", L.sharedGate, e.h, zero, e.sgate, zero, 1, e.none, T)...)
		}
	}
	return append(prog, e.combineOp(L, shared, sgate))
}

// moeParams is moe.wgsl's Params for sparse layer L in step s.
func (e *State) moeParams(L moeLayer, s step, hasShared bool) []uint32 {
	g := e.g
	norm, sh := uint32(0), uint32(0)
	if g.NormTopK {
		norm = 1
	}
	switch {
	case hasShared && g.SharedUngated:
		sh = 2
	case hasShared:
		sh = 1
	}
	return []uint32{uint32(g.Experts), uint32(g.TopK), norm, uint32(s.T - s.rows),
		uint32(g.Vocab + g.Routes()), uint32(g.Vocab + L.sparse*g.TopK), uint32(g.Dim), sh,
		uint32(g.Groups), uint32(g.TopKGroup), math.Float32bits(g.RoutedScale)}
}

// routeOp turns the router's logits into each token's K experts and
// weights, and writes the ids into the wanted rows' route tails: the
// softmax router (route) or GLM's grouped sigmoid one (route_grouped).
func (e *State) routeOp(L moeLayer) pending {
	entry := "route"
	if e.g.Sigmoid {
		entry = "route_grouped"
	}
	return pending{
		op: op{
			name: fmt.Sprintf("route.%d", L.sparse), family: "route", pipe: e.kernel("moe", shaders.MoE(), entry),
			dims:   func(s step) (uint32, uint32, uint32) { return uint32(s.T), 1, 1 },
			params: func(s step) []uint32 { return e.moeParams(L, s, false) },
		},
		bindings: []gpu.Binding{{Binding: 0, Buffer: e.router}, {Binding: 1, Buffer: e.routeIDs},
			{Binding: 2, Buffer: e.routeW}, {Binding: 3, Buffer: e.logits}, {Binding: 8, Buffer: L.bias}},
		paramsAt: 7,
	}
}

// combineOp sums the experts' outputs by their weights into o, with the
// gated shared expert when shared is not e.none.
func (e *State) combineOp(L moeLayer, shared, sgate gpu.Buffer) pending {
	d := e.g.Dim
	return pending{
		op: op{
			name: fmt.Sprintf("combine.%d", L.sparse), family: "combine", pipe: e.kernel("moe", shaders.MoE(), "combine"),
			dims:   func(s step) (uint32, uint32, uint32) { return ceilDiv(d, shaders.Workgroup), uint32(s.T), 1 },
			params: func(s step) []uint32 { return e.moeParams(L, s, shared != e.none) },
		},
		bindings: []gpu.Binding{{Binding: 2, Buffer: e.routeW}, {Binding: 3, Buffer: e.o}, {Binding: 4, Buffer: e.ey},
			{Binding: 5, Buffer: shared}, {Binding: 6, Buffer: sgate}},
		paramsAt: 7,
	}
}

// expertOps: Y (T, K, ldy) = for each token t and slot k, X row (t, or
// (t, k) with perSlot) @ W_eᵀ for the expert e the router put in slot k:
// one dispatch per bank, whose workgroups return at once for the slots
// of experts it does not hold.
func (e *State) expertOps(name string, banks []bank, x gpu.Buffer, perSlot bool, y gpu.Buffer, ldy int) []pending {
	K := e.g.TopK
	xSlot := uint32(0)
	if perSlot {
		xSlot = 1
	}
	var ops []pending
	// Lookup experts rounding their activations: X rounded into e.actsX
	// before the first bank of each mode (a bank's experts share theirs).
	rows := func(s step) int { return s.T }
	if perSlot {
		rows = func(s step) int { return s.T * K }
	}
	plain, rounded := x, ""
	software := e.dev.Info().Software
	for i, b := range banks {
		p := b.piece
		x = plain
		if p.Acts != "" {
			if p.Acts != rounded {
				ops = append(ops, e.actsOp(fmt.Sprintf("%s[%d]", name, i), p.Acts, plain, func(step) int { return 0 }, p.Cols, rows))
				rounded = p.Acts
			}
			x = e.actsX
		}
		if p.Format == shaders.EXL3 {
			rows := func(s step) int { return s.T * K }
			ops = append(ops, e.exl3Ops(fmt.Sprintf("%s[%d]", name, i), p, b.buf, rows, &b, !perSlot,
				x, func(step) int { return 0 }, out{y, func(step) int { return 0 }, ldy, false}, e.none)...)
			continue
		}
		v := e.matmulVariant(false, false, e.wg.decode)
		entry, perGroup := expertEntry(v, p.Cols, software)
		pipe := e.kernel(v.Name(p.Format), shaders.Matmul(p.Format, v), entry)
		base, _ := p.scaleBase()
		groups := uint32((p.Cols + 31) / 32)
		blocks := ceilDiv(p.Rows, perGroup)
		ops = append(ops, pending{
			op: op{
				name: fmt.Sprintf("%s[%d]", name, i), family: "matmul " + name, pipe: pipe,
				dims: func(s step) (uint32, uint32, uint32) { return blocks, uint32(K), uint32(s.T) },
				params: func(step) []uint32 {
					return []uint32{uint32(p.Rows), uint32(p.Cols), groups, base, uint32(ldy), uint32(p.Row0), 0, 0, 0,
						uint32(b.first), uint32(b.count), uint32(b.stride / 4), uint32(K), xSlot}
				},
			},
			bindings: []gpu.Binding{{Binding: 0, Buffer: b.buf}, {Binding: 1, Buffer: x}, {Binding: 2, Buffer: y}, {Binding: 5, Buffer: e.routeIDs}},
			paramsAt: 4,
		})
	}
	return ops
}

// expertEntry is the matmul.wgsl entry point for a bank of experts with
// cols columns, and the output rows of its workgroup: expert, or on a
// software adapter expert4, four rows per invocation (see matmulEntries).
func expertEntry(v shaders.MatmulVariant, cols int, software bool) (string, int) {
	if software && cols%32 == 0 {
		return "expert4", v.Rows4()
	}
	return "expert", v.Rows()
}

// checkMoE refuses what the sparse kernels cannot dispatch.
func checkMoE(g model.Geometry, lim gpu.Limits) error {
	if g.SparseLayers() == 0 {
		return nil
	}
	maxDim := int(lim.MaxComputeWorkgroupsPerDimension)
	if maxDim == 0 {
		maxDim = 65535
	}
	// The most workgroups: main's, in the smallest workgroups.
	per := shaders.MatmulVariant{Workgroup: workgroupSizes[0]}.Rows()
	if rows := max(g.Dim, g.ExpertIntermediate); (rows+per-1)/per > maxDim {
		return fmt.Errorf("%s: experts of %d rows need more than the device's %d workgroups per dimension", g.Arch, rows, maxDim)
	}
	if g.TopK > maxDim {
		return fmt.Errorf("%s: num_experts_per_tok %d is more than the device's %d workgroups per dimension", g.Arch, g.TopK, maxDim)
	}
	if g.Sigmoid && g.Groups > shaders.Workgroup {
		// route_grouped scores a group per invocation of one workgroup.
		return fmt.Errorf("%s: n_group %d: the GPU router takes at most %d groups", g.Arch, g.Groups, shaders.Workgroup)
	}
	return nil
}
