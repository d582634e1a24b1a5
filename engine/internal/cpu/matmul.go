package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"

	"logitscope/ggml"
	"logitscope/model"
	"logitscope/quant"
)

// matmul: out (T, W.Rows) = x (T, W.Cols) @ Wᵀ + b, each element in the
// order of kernel.go, whatever T: KV-cache decode and teacher forcing
// agree bit for bit. W's rows go in blocks to the cores, each block
// decoded from its stored format once into float32 scratch (a float32
// matrix is read in place) and then multiplied with all T tokens, four
// rows by four tokens at a time: prefill decodes the weights once per
// submission, not once per token.
func matmul(out, x []float32, W *model.Matrix, b []float32, T int) {
	n, k := W.Rows, W.Cols
	rb := blockRows(k)
	nb := 0
	if W.Data != nil {
		nb = (n + rb - 1) / rb
	}
	for _, p := range W.Pieces {
		nb += (p.Rows + rb - 1) / rb
	}
	workers := runtime.GOMAXPROCS(0)
	if n*k*T < serialWork {
		workers = 1
	}
	// scratch: the decoded block, the decoder's overrun, 4 padded rows.
	slack := 2 * quant.GroupSize
	parallelBlocks(nb, workers, (rb+4)*k+slack, func(blk int, scratch []float32) {
		// W's block blk: rows [r0, r1) in W.Data, or in a piece.
		var w []float32
		var r0, r1 int
		if W.Data != nil {
			r0, r1 = blk*rb, min(n, (blk+1)*rb)
			w = W.Data[r0*k : r1*k]
		} else {
			for i := range W.Pieces {
				p := &W.Pieces[i]
				pb := (p.Rows + rb - 1) / rb
				if blk >= pb {
					blk -= pb
					continue
				}
				a, z := blk*rb, min(p.Rows, (blk+1)*rb)
				decodeRows(p, k, a, z, scratch)
				r0, r1, w = p.Row0+a, p.Row0+z, scratch[:(z-a)*k]
				break
			}
		}
		gemm(out, n, r0, w, r1-r0, x, T, k, b, scratch[rb*k+slack:(rb+4)*k+slack])
	})
}

// serialWork is the product size (rows × cols × tokens) below which a
// matmul runs on the calling goroutine: waking the other cores costs more
// than the work (a decode step's k and v projections).
const serialWork = 1 << 17

// blockRows is how many rows of k columns a block holds: a multiple of 4
// whose float32 scratch stays about 32 KiB, within the L1 cache of a
// current core, at most 64.
func blockRows(k int) int {
	return min(64, max(4, 8192/k/4*4))
}

// gemm: y[t*n + r0 + i] = w_i · x_t + b[r0+i] for rows i < rows of w
// (stride k) and tokens t < T of x (stride k). pad (4k values) holds the
// last rows when fewer than 4 remain.
func gemm(y []float32, n, r0 int, w []float32, rows int, x []float32, T, k int, b, pad []float32) {
	var t16 [16]float32
	var t4 [4]float32
	for i := 0; i < rows; i += 4 {
		wi, nr := w[i*k:], min(4, rows-i)
		if nr < 4 {
			copy(pad, wi[:nr*k])
			clear(pad[nr*k:])
			wi = pad
		}
		put := func(t, r int, v float32) {
			if b != nil {
				v += b[r0+i+r]
			}
			y[t*n+r0+i+r] = v
		}
		t := 0
		for ; t+4 <= T; t += 4 {
			tile4x4(wi, k, x[t*k:], k, k, &t16)
			for r := range nr {
				for j := range 4 {
					put(t+j, r, t16[4*r+j])
				}
			}
		}
		for ; t < T; t++ {
			tile4x1(wi, k, x[t*k:], k, &t4)
			for r := range nr {
				put(t, r, t4[r])
			}
		}
	}
}

// decodeRows decodes rows [a, b) of piece p (k columns) into dst as
// float32, row r at dst[(r-a)*k:]. dst has room for 2·GroupSize values
// more: a quant decoder may write a last group's padding past the row.
func decodeRows(p *model.Piece, k, a, b int, dst []float32) {
	if s := p.Format.Scheme; s != "" {
		l, _ := quant.NewLayout(s, p.Rows, k) // checked by model.CheckPieces
		fast := quantRows[s]
		qw, sw := 4*l.QuantWordsPerRow, 4*l.ScaleWordsPerRow
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

// The assembly row decoders (kernel_amd64.go), by format; a format
// without one is decoded by its reference decoder (quant, ggml), which
// gives the same bits. A quant decoder writes groups·32 values of dst.
var (
	quantRows = map[quant.Scheme]func(codes, scales []byte, groups int, dst []float32){}
	ggmlRows  = map[ggml.Type]func(src []byte, dst []float32){}
)

// row writes row r (Cols,) of W into dst: the embedding lookup decodes
// just that row.
func row(W *model.Matrix, r int, dst []float32) {
	k := W.Cols
	if W.Data != nil {
		copy(dst, W.Row(r))
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

// scratchPool holds the blocks' float32 scratch between matmuls.
var scratchPool sync.Pool

// parallelBlocks runs fn on blocks 0..n-1 on up to workers goroutines,
// the caller's one of them, each taking the next block when it is free
// (a core slowed by other work takes fewer) and holding its own scratch
// of at least size values.
func parallelBlocks(n, workers, size int, fn func(blk int, scratch []float32)) {
	var next atomic.Int64
	work := func() {
		sp, _ := scratchPool.Get().(*[]float32)
		if sp == nil || len(*sp) < size {
			s := make([]float32, size)
			sp = &s
		}
		for {
			blk := int(next.Add(1) - 1)
			if blk >= n {
				break
			}
			fn(blk, *sp)
		}
		scratchPool.Put(sp)
	}
	workers = min(workers, n)
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// parallel runs fn over [0,n) in contiguous chunks of at least grain items,
// one goroutine per CPU.
func parallel(n, grain int, fn func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), (n+grain-1)/grain)
	if workers <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, min(lo+chunk, n))
	}
	wg.Wait()
}

// dot accumulates in float32 in four interleaved partial sums: the order a
// GPU reduction uses too, and four times the Go compiler's scalar
// throughput. Attention's q·k uses it; weights use the order of kernel.go.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}
