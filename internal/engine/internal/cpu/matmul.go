package cpu

import (
	"slices"
	"unsafe"

	"logitscope/internal/format/ggml"
	"logitscope/internal/model"
	"logitscope/internal/quant"
)

// matmul: out (T, W.Rows) = x (T, W.Cols) @ Wᵀ + b, each element in the
// order of kernel.go, whatever T: KV-cache decode and teacher forcing
// agree bit for bit. W's rows go in blocks to the cores. For several
// tokens each block is decoded from its stored format once into float32
// scratch (a float32 matrix is read in place) and then multiplied with all
// T tokens, four rows by four tokens at a time, in panels of columns that
// stay in the L1 cache: prefill decodes the weights once per submission,
// not once per token. For one token a fused kernel, where the format has
// one, decodes four rows at a time in registers and multiplies them at
// once; other formats are decoded a few rows at a time.
// An EXL3 layer goes through matmulEXL3, which calls matmulRows with the
// inner matrix its blocks decode. A lookup matrix with an activation
// quantization (model.Format.Acts) takes the tokens' rows rounded.
func matmul(out, x []float32, W *model.Matrix, b []float32, T int) {
	if mode := lookupActs(W); mode != "" {
		x = roundActs(mode, x, T, W.Cols)
	}
	if exl3Piece(W) != nil {
		matmulEXL3(out, x, W, b, T)
		return
	}
	matmulRows(out, x, W, b, T)
}

func matmulRows(out, x []float32, W *model.Matrix, b []float32, T int) {
	n, k := W.Rows, W.Cols
	fused := T == 1 && W.Data == nil
	for _, p := range W.Pieces {
		fused = fused && rowDots[p.Format] != nil && k%quant.GroupSize == 0
	}
	rb := prefillRows
	switch {
	case T == 1 && (fused || W.Data != nil):
		rb = streamBlock(W)
	case T == 1:
		rb = max(4, min(streamRows, scratchFloats/k/4*4))
	}
	if W.Pieces != nil && W.Pieces[0].Format.EXL3.K != 0 {
		rb = (rb + 15) / 16 * 16 // blocks of whole tiles
	}
	// The tiles take tokens four at a time: a partial last quad is
	// padded with zero tokens, whose outputs are dropped.
	tq := T
	if T > 1 && T%4 != 0 {
		tq = (T + 3) / 4 * 4
		xp := make([]float32, tq*k)
		copy(xp, x[:T*k])
		x = xp
	}
	nb := blocks(W, rb)
	if W.Data != nil {
		nb = (n + rb - 1) / rb
	}
	// A worker's scratch: the decoded block and the decoder's overrun
	// (for the fused kernels: the block's scales widened, and its last
	// rows when fewer than 4; nothing for float32 rows), then 4 padded
	// rows; the lanes of the block's tiles between panels.
	const slack = 2 * quant.GroupSize
	decoded := rb*k + slack
	switch {
	case W.Data != nil:
		decoded = 0
	case fused:
		decoded = max(rb*(k/quant.GroupSize+1), 3*k+slack)
	}
	size, tiles := decoded+4*k, (rb+3)/4*(tq/4)
	parallelBlocks(nb, n*k*T >= serialWork, size, tiles, func(blk int, sc *scratch) {
		pad, acc := sc.w[decoded:size], sc.acc[:tiles]
		if W.Data != nil {
			r0, r1 := blk*rb, min(n, (blk+1)*rb)
			gemm(out, n, r0, W.Data[r0*k:r1*k], r1-r0, x, T, tq, k, b, pad, acc)
			return
		}
		p, a, z := block(W, rb, blk)
		if fused {
			// Whole quads of rows; the rest below.
			e := a + (z-a)/4*4
			if e > a {
				y := out[p.Row0+a : p.Row0+e]
				rowDots[p.Format](p, k, a, e, x, y, sc.w)
				if b != nil {
					for i := range y {
						y[i] += b[p.Row0+a+i]
					}
				}
			}
			a = e
		}
		if a < z {
			decodeRows(p, k, a, z, sc.w)
			gemm(out, n, p.Row0+a, sc.w[:(z-a)*k], z-a, x, T, tq, k, b, pad, acc)
		}
	})
}

// blocks is how many blocks of rb rows W's pieces cut into, a piece's
// last block holding what is left of its rows.
func blocks(W *model.Matrix, rb int) int {
	n := 0
	for _, p := range W.Pieces {
		n += (p.Rows + rb - 1) / rb
	}
	return n
}

// block is block blk of blocks(W, rb): rows [a, z) of piece p.
func block(W *model.Matrix, rb, blk int) (p *model.Piece, a, z int) {
	for i := range W.Pieces {
		p = &W.Pieces[i]
		pb := (p.Rows + rb - 1) / rb
		if blk < pb {
			return p, blk * rb, min(p.Rows, (blk+1)*rb)
		}
		blk -= pb
	}
	panic("cpu: block past the matrix's pieces")
}

// streamBlock is a decode step's block of W in rows where the rows are
// read once, straight from memory: about streamBytes of them (whole
// quads, at least 64 rows). Long runs read memory in long streams, and a
// core takes a block at a time: on 4864 rows of 896 q4 columns, from
// memory on two cores, blocks of 64 rows (28 KiB) read 18 GB/s and of 256
// rows 27.
func streamBlock(W *model.Matrix) int {
	bytes := 4 * W.Cols
	if W.Data == nil {
		p := &W.Pieces[0]
		bytes = max(1, len(p.Data)/max(1, p.Rows))
	}
	return max(64, streamBytes/bytes/4*4)
}

// Block sizes in rows. streamRows: a decode step's blocks that decode
// into scratch. prefillRows and panel: a prefill's blocks and the columns
// of their panels, so that a block's panel and a quad of tokens' (32 and
// 16 KiB) stay in L1 while the quads of rows take turns (the best of 4 to
// 16 rows and 256 to 1024 columns, within the noise of a shared machine).
// scratchFloats: at most what a decode step's block decodes into scratch
// (32 KiB), so that it is read back from L1.
const (
	streamBytes   = 256 << 10
	streamRows    = 128
	prefillRows   = 8
	panel         = 1024
	scratchFloats = 8192
)

// serialWork is the product size (rows × cols × tokens) below which a
// matmul runs on the calling goroutine: waking the other cores costs more
// than the work (a decode step's k and v projections).
const serialWork = 1 << 17

// gemm: y[t*n + r0 + i] = w_i · x_t + b[r0+i] for rows i < rows of w
// (stride k) and tokens t < T of x (stride k; tq ≥ T tokens, a multiple
// of 4, when T > 1). pad (4k values) holds the last rows when fewer than
// 4 remain; acc holds the lanes of each quad of rows and of tokens
// between panels.
func gemm(y []float32, n, r0 int, w []float32, rows int, x []float32, T, tq, k int, b, pad []float32, acc [][16][lanes]float32) {
	quads := (rows + 3) / 4
	if nr := rows % 4; nr != 0 {
		copy(pad, w[(rows-nr)*k:rows*k])
		clear(pad[nr*k:])
	}
	quad := func(q int) []float32 {
		if 4*q+4 > rows {
			return pad
		}
		return w[4*q*k:]
	}
	// put stores tile (quad q of rows, rows r, and tokens t0.., 4 each,
	// tile[4r+t]) into y with the bias, dropping padded rows and tokens.
	put := func(q, t0 int, tile []float32) {
		nr, nt := min(4, rows-4*q), min(4, T-t0)
		for r := range nr {
			i := r0 + 4*q + r
			var bias float32
			if b != nil {
				bias = b[i]
			}
			for t, v := range tile[4*r : 4*r+nt] {
				if b != nil {
					v += bias
				}
				y[(t0+t)*n+i] = v
			}
		}
	}
	if T == 1 {
		// The whole quads in one call (a host's kernel in engine.wasm
		// does the block at once), then the padded one.
		full := rows / 4 * 4
		dst := y[r0 : r0+full]
		dotRows(w, k, x, k, dst)
		if b != nil {
			for i := range dst {
				dst[i] += b[r0+i]
			}
		}
		if full < rows {
			var t4 [4]float32
			var tile [16]float32
			tile4x1(pad, k, x, k, &t4)
			for r, v := range t4 {
				tile[4*r] = v
			}
			put(full/4, 0, tile[:])
		}
		return
	}
	// Panel by panel: a quad of tokens is read from L1 for every quad of
	// rows, which the block's panel keeps in L1 too.
	var t16 [16]float32
	for p0 := 0; p0 < k; p0 += panel {
		kk, flags := min(panel, k-p0), 0
		if p0 == 0 {
			flags |= first
		}
		if p0+kk == k {
			flags |= last
		}
		for t := 0; t < tq; t += 4 {
			for q := range quads {
				tile4x4(quad(q)[p0:], k, x[t*k+p0:], k, kk, &acc[q*tq/4+t/4], &t16, flags)
				if flags&last != 0 {
					put(q, t, t16[:])
				}
			}
		}
	}
}

// decodeRows decodes rows [a, b) of piece p (k columns) into dst as
// float32, row r at dst[(r-a)*k:]. dst has room for 2·GroupSize values
// more: a quant decoder may write a last group's padding past the row.
func decodeRows(p *model.Piece, k, a, b int, dst []float32) {
	if p.Format.Lookup != nil {
		decodeLookup(p, k, a, b, dst)
		return
	}
	if p.Format.EXL3.K != 0 {
		decodeEXL3(p, k, a, b, dst)
		return
	}
	if s := p.Format.Scheme; s != "" {
		l, _ := quant.NewLayout(s, p.Rows, k) // checked by model.CheckPieces
		qw, sw := 4*l.QuantWordsPerRow, 4*l.ScaleWordsPerRow
		if blk := quantBlocks[s]; blk != nil {
			if b > a {
				blk(p.Data[a*qw:b*qw], p.Data[l.QuantBytes()+a*sw:l.QuantBytes()+b*sw], qw, sw, l.Groups, dst, k)
			}
			return
		}
		fast := quantRows[s]
		for r := a; r < b; r++ {
			out := dst[(r-a)*k:]
			if fast != nil {
				fast(p.Data[r*qw:(r+1)*qw], p.Data[l.QuantBytes()+r*sw:l.QuantBytes()+(r+1)*sw], l.Groups, out)
			} else {
				l.DequantizeRow(p.Data, r, out[:k])
			}
		}
		return
	}
	t := p.Format.Type
	rb, _ := t.RowBytes(k)
	if blk := ggmlBlocks[t]; blk != nil {
		if b > a {
			blk(p.Data[int64(a)*rb:int64(b)*rb], int(rb), dst, k)
		}
		return
	}
	fast := ggmlRows[t]
	for r := a; r < b; r++ {
		src, out := p.Data[int64(r)*rb:int64(r+1)*rb], dst[(r-a)*k:(r-a+1)*k]
		if fast != nil {
			fast(src, out)
		} else {
			ggml.Dequantize(t, src, out)
		}
	}
}

// The row decoders by format, pure Go (decode.go) or assembly
// (kernel_amd64.go). A format without one is decoded by its reference
// decoder (quant, ggml), which gives the same bits; a quant decoder
// writes groups·32 values of dst.
// quantBlocks and ggmlBlocks decode a block of rows in one call where a
// host's kernels do (engine.wasm: kernel_wasip1.go): the rows' codes and
// scales (qw and sw bytes a row) or the rows (rb bytes each), row r at
// dst[r*k:], in row order.
// rowDots are the fused one-token kernels: out[i] = w_{a+i} · x for rows
// [a, z) of a piece of k columns, z−a and k multiples of 4 and 32, with
// scratch of (z−a)·k floats.
var (
	quantRows   = goQuantRows()
	quantBlocks = map[quant.Scheme]func(codes, scales []byte, qw, sw, groups int, dst []float32, k int){}
	ggmlRows    = goGGMLRows()
	ggmlBlocks  = map[ggml.Type]func(rows []byte, rb int, dst []float32, k int){}
	rowDots     = map[model.Format]func(p *model.Piece, k, a, z int, x, out, scratch []float32){}
)

// row writes row r (Cols,) of W into dst: the embedding lookup decodes
// just that row.
func row(W *model.Matrix, r int, dst []float32) {
	k := W.Cols
	if W.Data != nil {
		copy(dst, W.Row(r))
		return
	}
	if exl3Piece(W) != nil { // its rows mix in the Hadamards: all of them
		copy(dst, denseEXL3(W)[r*k:(r+1)*k])
		return
	}
	for i := range W.Pieces {
		p := &W.Pieces[i]
		if r < p.Row0+p.Rows {
			buf := make([]float32, k+2*quant.GroupSize)
			decodeRows(p, k, r-p.Row0, r-p.Row0+1, buf)
			copy(dst, buf[:k])
			return
		}
	}
}

// scratch is a worker's: float32 rows (w), tiles' lanes (acc) and
// 8-bit activations' block sums (sums).
type scratch struct {
	w     []float32
	acc   [][16][lanes]float32
	sums  []int32
	lanes []float32 // a8Lanes's
}

// a8Lanes is a prefill kernel's scratch (a8Batch.rows), made once per
// worker: the lanes of two rows by a8Tokens tokens, 64-byte aligned for
// their vector loads and stores, then a last odd row's sums. Made per
// call (4 KiB on the heap: the kernel's pointer escapes), it was a
// prefill's garbage by the tens of megabytes, and two cores each
// multiplying 64 rows of 896 q4 columns by 32 tokens ran 35% slower
// than with it made once.
func (sc *scratch) a8Lanes() []float32 {
	const n = 2*a8Tokens*lanes + 2*a8Tokens
	if sc.lanes == nil {
		buf := make([]float32, n+lanes)
		skip := (64 - int(uintptr(unsafe.Pointer(&buf[0])))%64) % 64 / 4
		sc.lanes = buf[skip : skip+n : skip+n]
	}
	return sc.lanes
}

// ints is n int32s of the worker's scratch.
func (sc *scratch) ints(n int) []int32 {
	if len(sc.sums) < n {
		sc.sums = make([]int32, n)
	}
	return sc.sums[:n]
}

// Decode is W (Rows, Cols) as float32, row-major: the stored rows decoded
// as the products decode them.
func Decode(W *model.Matrix) []float32 {
	k := W.Cols
	if W.Data != nil {
		return slices.Clone(W.Data)
	}
	if exl3Piece(W) != nil {
		return denseEXL3(W)
	}
	out := make([]float32, W.Rows*k+2*quant.GroupSize)
	for i := range W.Pieces {
		p := &W.Pieces[i]
		decodeRows(p, k, 0, p.Rows, out[p.Row0*k:])
	}
	return out[: W.Rows*k : W.Rows*k]
}
