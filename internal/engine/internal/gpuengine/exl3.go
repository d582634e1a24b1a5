package gpuengine

import (
	"fmt"

	"logitscope/internal/format/exl3"
	"logitscope/internal/gpu"
	"logitscope/shaders"
)

// exl3Ops: Y (rows, y.ld) at y.off = X @ W + b for an EXL3 layer (piece
// p, its blob in w): exl3.wgsl's rotate_in into e.exl3x, product into
// e.exl3y, rotate_out into Y. For a bank of experts (b not nil) a row is
// a (token, slot), run by the expert the router put there, and X's rows
// are the tokens' when perToken, else the rows' own.
func (e *State) exl3Ops(name string, p Piece, w gpu.Buffer, rows func(step) int, b *bank, perToken bool, x gpu.Buffer, xOff func(step) int, y out, bias gpu.Buffer) []pending {
	inP, onP := exl3.Pad(p.Cols), exl3.Pad(p.Rows)
	slots, first, count, blobWords, tok := 0, 0, 0, 0, 0
	ids := e.none
	if b != nil {
		slots, first, count, blobWords, ids = e.g.TopK, b.first, b.count, int(b.stride/4), e.routeIDs
		if perToken {
			tok = 1
		}
	}
	hasBias, add := 0, 0
	if bias != e.none {
		hasBias = 1
	}
	if y.add {
		add = 1
	}
	src := shaders.EXL3Product()
	// params are exl3.wgsl's Params with the source and destination rows.
	params := func(s step, srcOff, ldSrc, dstOff, ldDst int) []uint32 {
		v := []int{p.EXL3.K, int(p.EXL3.Codebook), p.Cols, p.Rows, inP, onP, rows(s), slots, first, count, blobWords, tok,
			srcOff, ldSrc, dstOff, ldDst, hasBias, add}
		out := make([]uint32, len(v))
		for i, x := range v {
			out[i] = uint32(x)
		}
		return out
	}
	// A pipeline's layout has the bindings its entry point uses: the
	// bias only rotate_out's.
	op := func(entry string, dims func(step) (uint32, uint32, uint32), ps func(step) []uint32, from, to, b gpu.Buffer) pending {
		bindings := []gpu.Binding{{Binding: 0, Buffer: w}, {Binding: 1, Buffer: from}, {Binding: 2, Buffer: to}, {Binding: 4, Buffer: ids}}
		if b != 0 {
			bindings = append(bindings, gpu.Binding{Binding: 3, Buffer: b})
		}
		return pending{
			op:       op{name: fmt.Sprintf("%s.%s", name, entry), family: "exl3 " + entry, pipe: e.kernel("exl3", src, entry), dims: dims, params: ps},
			bindings: bindings,
			paramsAt: 5,
		}
	}
	return []pending{
		op("rotate_in", func(s step) (uint32, uint32, uint32) { return uint32(inP / 128), uint32(rows(s)), 1 },
			func(s step) []uint32 { return params(s, xOff(s), p.Cols, 0, inP) }, x, e.exl3x, 0),
		op("product", func(s step) (uint32, uint32, uint32) { return ceilDiv(onP, shaders.Workgroup), uint32(rows(s)), 1 },
			func(s step) []uint32 { return params(s, 0, inP, 0, onP) }, e.exl3x, e.exl3y, 0),
		op("rotate_out", func(s step) (uint32, uint32, uint32) { return uint32(onP / 128), uint32(rows(s)), 1 },
			func(s step) []uint32 { return params(s, 0, onP, y.off(s), y.ld) }, e.exl3y, y.buf, bias),
	}
}

// exl3Scratch makes e.exl3x and e.exl3y once, each as large as an EXL3
// product of the model can need: a chunk's rows (times TopK for experts)
// by the widest padded dim.
func (e *State) exl3Scratch() error {
	if e.exl3x != 0 {
		return nil
	}
	g := e.g
	dense := exl3.Pad(max(g.Dim, g.Heads*g.HeadDim, g.KVHeads*g.HeadDim, g.Intermediate, g.SharedIntermediate, g.Vocab))
	size := int64(e.chunk) * int64(max(dense, g.TopK*exl3.Pad(max(g.Dim, g.ExpertIntermediate)))) * 4
	var err error
	if e.exl3x, err = e.buffer("exl3-x", size); err != nil {
		return err
	}
	e.exl3y, err = e.buffer("exl3-y", size)
	return err
}
