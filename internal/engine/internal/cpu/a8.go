package cpu

import (
	"math"
	"runtime"
	"sync"

	"github.com/x448/float16"

	"logitscope/internal/format/ggml"
	"logitscope/internal/model"
	"logitscope/internal/quant"
)

// The order of a product with 8-bit activations (engine option
// Activations "q8", llama.cpp's CPU arithmetic). llama.cpp's CPU backend
// multiplies a Q4_0 or Q8_0 matrix by activations it first rounds to
// Q8_0 blocks, in integer arithmetic; the float order of kernel.go keeps
// the activations in float32. With a8 each output y = w · x + b, for a
// weight row w of k columns (k a multiple of 32) stored in blocks of 32
// with integer codes c_j and a scale s_b (quant's q8/q6/q4, ggml's
// Q8_0/Q4_0), is computed in exactly this order on every path:
//
//  1. x is rounded per block b of 32 columns as llama.cpp's
//     quantize_row_q8_0 rounds it: amax = max_j |x_j|, q_j = x_j ·
//     float32(127 / amax) rounded to float32 and then to the nearest
//     integer, ties to even, and dx_b = float32(amax / 127) rounded to
//     f16, as a Q8_0 block stores it (infinite past f16's range, amax
//     above 8.3e6, as in llama.cpp; all zeros when amax is 0; all zeros
//     and dx_b NaN when amax is infinite or NaN, so that the output is
//     NaN). A block whose 127/amax overflows float32 (amax below about
//     3.7e-37) is all zeros with dx_b = 0 too: its x_j·127/amax would be
//     infinite or NaN, which Go converts to an integer differently on
//     each platform (llama.cpp's C leaves it undefined).
//  2. S_b = Σ_j c_j · q_j over the block's 32 columns, in integers: exact,
//     so any order of the products gives the same S_b.
//  3. Sixteen float32 lanes start at +0. For b = 0, 1, … in order, lane
//     b mod 16 becomes lane + float32(float32(S_b) · float32(s_b · dx_b)),
//     each product rounded to float32 (a multiply and an add, not fused).
//  4. The lanes are summed as kernel.go's step 3 says, and the bias, if
//     any, is added.
//
// As with the float order, one output never depends on another: decode
// and teacher forcing agree bit for bit, and so do the assembly and the
// pure Go here.

// a8Block is the columns of one activation block (ggml's QK8_0).
const a8Block = quant.GroupSize

// quantizeActsGo rounds x (k,) to q (k,) and dx (k/32,) per block, as the
// order's step 1 says.
func quantizeActsGo(x []float32, q []int8, dx []float32) {
	for b := range dx {
		xb, qb := x[b*a8Block:(b+1)*a8Block], q[b*a8Block:(b+1)*a8Block]
		var amax float32
		for _, v := range xb {
			amax = max(amax, abs32(v))
		}
		if amax == 0 || amax > math.MaxFloat32 || amax != amax {
			// Zeros give zero; an infinite or NaN activation gives a
			// NaN output, whatever the weights (Go leaves converting
			// NaN to an integer to the platform).
			dx[b] = 0
			if amax != 0 {
				dx[b] = float32(math.NaN())
			}
			clear(qb)
			continue
		}
		id := 127 / amax
		if id > math.MaxFloat32 { // see the order's step 1
			dx[b] = 0
			clear(qb)
			continue
		}
		dx[b] = float16.Fromfloat32(amax / 127).Float32()
		for j, v := range xb {
			qb[j] = int8(math.RoundToEven(float64(v * id)))
		}
	}
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// dotA8 sums the blocks of one row as the order's steps 3 and 4 say
// (without the bias): sums[b] is S_b, ws[b] the row's scale s_b.
func dotA8(sums []int32, ws, dx []float32) float32 {
	var acc [lanes]float32
	for b, s := range sums {
		acc[b%lanes] += float32(float32(s) * float32(ws[b]*dx[b]))
	}
	return reduce(&acc)
}

// blockSums writes S_b of row r of piece p (k columns) against the
// rounded activations q into sums (k/32,) and the row's block scales into
// ws (k/32,): the order's step 2 for each stored format.
func blockSums(p *model.Piece, k, r int, q []int8, sums []int32, ws []float32) {
	if s := p.Format.Scheme; s != "" {
		l, _ := quant.NewLayout(s, p.Rows, k)
		if s != quant.Q4 && s != quant.Q8 { // q6: the reference unpacker
			l.Codes(p.Data, r, func(b int, scale uint16, w *[quant.GroupSize]int8) {
				ws[b] = float16.Frombits(scale).Float32()
				var sum int32
				for j, c := range w {
					sum += int32(c) * int32(q[b*a8Block+j])
				}
				sums[b] = sum
			})
			return
		}
		qw, sw := 4*l.QuantWordsPerRow, 4*l.ScaleWordsPerRow
		codes := p.Data[r*qw : (r+1)*qw]
		scales := p.Data[l.QuantBytes()+r*sw : l.QuantBytes()+(r+1)*sw]
		bits := s.Bits() * 4 // code bytes per group
		for b := range sums {
			ws[b] = half(scales[2*b:])
			c, x := codes[b*bits:(b+1)*bits], q[b*a8Block:(b+1)*a8Block:(b+1)*a8Block]
			var sum int32
			switch s {
			case quant.Q4:
				for i := range 16 {
					sum += (int32(c[i]&15)-8)*int32(x[2*i]) + (int32(c[i]>>4)-8)*int32(x[2*i+1])
				}
			case quant.Q8:
				for j := range a8Block {
					sum += int32(int8(c[j])) * int32(x[j])
				}
			}
			sums[b] = sum
		}
		return
	}
	t := p.Format.Type
	rb, _ := t.RowBytes(k)
	src := p.Data[int64(r)*rb : int64(r+1)*rb]
	bb := t.BlockBytes()
	for b := range sums {
		blk, x := src[b*bb:(b+1)*bb], q[b*a8Block:(b+1)*a8Block:(b+1)*a8Block]
		ws[b] = half(blk)
		var sum int32
		switch t {
		case ggml.Q4_0:
			for j := range 16 {
				sum += (int32(blk[2+j]&15)-8)*int32(x[j]) + (int32(blk[2+j]>>4)-8)*int32(x[j+16])
			}
		case ggml.Q8_0:
			for j := range a8Block {
				sum += int32(int8(blk[2+j])) * int32(x[j])
			}
		}
		sums[b] = sum
	}
}

// a8Format is whether a piece of k columns can take 8-bit activations:
// whole blocks of a format with integer codes.
func a8Format(f model.Format, k int) bool {
	if k%a8Block != 0 {
		return false
	}
	switch {
	case f.Scheme != "":
		return true
	case f.Type == ggml.Q4_0, f.Type == ggml.Q8_0:
		return true
	}
	return false
}

// takesA8 is whether every piece of W takes 8-bit activations.
func takesA8(W *model.Matrix) bool {
	ok := W.Data == nil && len(W.Pieces) > 0
	for _, p := range W.Pieces {
		ok = ok && a8Format(p.Format, W.Cols)
	}
	return ok
}

// a8Acts is one token's activations rounded as the order's step 1 says:
// q (k,) and dx (k/32,). Where the assembly is installed, packA8 also
// lays them out as its kernels read them (kernel_amd64.go): q and dx
// then have zeros past their ends up to a multiple of 16 blocks (the
// kernels read whole chunks of 16), nib and halves are q in the orders
// of 4-bit codes' nibbles (quant's q4, ggml's Q4_0), sum holds Σ_j
// q_j per block, masks and blockMasks the kernels' masks for this row
// length (q4 and q8, Q4_0 and Q8_0).
type a8Acts struct {
	q          []int8
	dx         []float32
	nib        []int8
	halves     []int8
	sum        []int32
	masks      *[2][2][16]uint16
	blockMasks *[2][2][32]uint64
}

// newA8Acts rounds x (k,) as the order's step 1 says.
func newA8Acts(x []float32) *a8Acts {
	a := makeA8Acts(nil, len(x))
	a.round(x)
	return a
}

// makeA8Acts makes room for a token of k activations from ar, padded
// and packed where the assembly is installed (a8Acts).
func makeA8Acts(ar *a8Arena, k int) *a8Acts {
	nb := k / a8Block
	padded := nb
	if packA8 != nil {
		padded = (nb + lanes - 1) / lanes * lanes
	}
	a := &a8Acts{q: ar.int8s(padded * a8Block)[:k], dx: ar.float32s(padded)[:nb]}
	// Zeros past the ends (round writes the rest).
	clear(a.q[k:cap(a.q)])
	clear(a.dx[nb:cap(a.dx)])
	if packA8 != nil {
		n := padded * a8Block
		buf := ar.int8s(2 * n)
		a.nib, a.halves, a.sum = buf[:n], buf[n:], ar.int32s(padded)
	}
	return a
}

// round rounds x (k,) into a, as the order's step 1 says.
func (a *a8Acts) round(x []float32) {
	quantizeActs(x, a.q, a.dx)
	if packA8 != nil {
		packA8(a)
	}
}

// a8Arena hands out a product's activation memory (its tokens' a8Acts,
// its prefill batches) from slabs that the next product reuses
// (a8Arenas), each slice written whole before it is read: rounding a
// prefill's tokens made about 3.5 KB of garbage per token and product
// (k = 896), and the collector's work on it cost four times the
// rounding. A nil arena makes each slice. One goroutine at a time: a
// product takes what it needs before its work goes to the cores.
type a8Arena struct {
	i8  []int8
	i32 []int32
	f32 []float32
}

var a8Arenas = sync.Pool{New: func() any { return new(a8Arena) }}

func (ar *a8Arena) reset() { ar.i8, ar.i32, ar.f32 = ar.i8[:0], ar.i32[:0], ar.f32[:0] }

func (ar *a8Arena) int8s(n int) []int8 {
	if ar == nil {
		return make([]int8, n)
	}
	return take(&ar.i8, n)
}

func (ar *a8Arena) int32s(n int) []int32 {
	if ar == nil {
		return make([]int32, n)
	}
	return take(&ar.i32, n)
}

func (ar *a8Arena) float32s(n int) []float32 {
	if ar == nil {
		return make([]float32, n)
	}
	return take(&ar.f32, n)
}

// take hands out the next n elements of slab, on a larger one where it
// is full (what was handed out keeps the old one): not zeros, but what
// the last product left there.
func take[T any](slab *[]T, n int) []T {
	l := len(*slab)
	if l+n > cap(*slab) {
		*slab, l = make([]T, 0, max(2*cap(*slab), n)), 0
	}
	s := (*slab)[l : l+n : l+n]
	*slab = (*slab)[:l+n]
	return s
}

// packA8 lays out a token's activations for the assembly kernels, where
// they are installed.
var packA8 func(*a8Acts)

// rowsA8Go: out[i] = w_{a+i} · x for rows [a, z) of piece p (k columns),
// x rounded, in the order above; scratch holds k/32 int32 sums and k/32
// float32 scales.
func rowsA8Go(p *model.Piece, k, a, z int, x *a8Acts, out []float32, sums []int32, ws []float32) {
	for r := a; r < z; r++ {
		blockSums(p, k, r, x.q, sums, ws)
		out[r-a] = dotA8(sums, ws, x.dx)
	}
}

// a8Batch is a few tokens of a prefill laid out for a kernel that
// multiplies each row with all of them at once, loading and unpacking
// its codes once: put lays out its token t, rows sets out[t·ldo+r−a] =
// w_r · x_t (no bias) for rows [a, z) of a piece and the batch's n
// tokens, in the order above, on the worker's scratch sc.
type a8Batch interface {
	tokens() int
	put(t int, x *a8Acts)
	rows(p *model.Piece, k, a, z int, out []float32, ldo int, sc *scratch)
}

// makeA8Batch makes room from ar for n tokens of nb blocks for format
// f's prefill kernel, or gives nil where there is none: noA8Batch, or
// the assembly's (kernel_amd64.go).
var makeA8Batch = noA8Batch

func noA8Batch(model.Format, int, int, *a8Arena) a8Batch { return nil }

// newA8Batch lays out tokens' activations for format f's prefill kernel,
// or gives nil where there is none.
func newA8Batch(f model.Format, acts []*a8Acts) a8Batch {
	b := makeA8Batch(f, len(acts), len(acts[0].dx), nil)
	if b != nil {
		for t, x := range acts {
			b.put(t, x)
		}
	}
	return b
}

// a8Split is a prefill's tokens cut into batches, in order.
type a8Split []a8Batch

// a8Batches cuts a prefill's T ≥ 2 tokens of nb blocks into batches of
// at most a8Tokens, of sizes as even as can be, for matrix W's format,
// to be filled by put, their memory from ar; nil where the pieces
// differ in format or it has no prefill kernel.
func a8Batches(W *model.Matrix, T, nb int, ar *a8Arena) a8Split {
	if T < 2 {
		return nil
	}
	f := W.Pieces[0].Format
	for _, p := range W.Pieces {
		if p.Format != f {
			return nil
		}
	}
	n := (T + a8Tokens - 1) / a8Tokens
	out := make(a8Split, n)
	for i := range n {
		out[i] = makeA8Batch(f, (i+1)*T/n-i*T/n, nb, ar)
		if out[i] == nil {
			return nil
		}
	}
	return out
}

// put lays out the prefill's token t in its batch.
func (s a8Split) put(t int, x *a8Acts) {
	for _, b := range s {
		if t < b.tokens() {
			b.put(t, x)
			return
		}
		t -= b.tokens()
	}
	panic("cpu: a8 token past its batches")
}

// matmulA8 is matmul with 8-bit activations (the order above) for a
// matrix whose every piece takes them; matmul's other cases stay float.
// W's rows go in blocks to the cores; each block's rows are multiplied
// with every token, a batch of tokens at a time where a prefill kernel
// takes the format (a8Batch), else one token at a time, so that a
// prefill reads a block's weights from the cache once per batch or
// token.
func matmulA8(out, x []float32, W *model.Matrix, b []float32, T int) {
	n, k := W.Rows, W.Cols
	nbk := k / a8Block
	shared := n*k*T >= serialWork
	// A prefill's tokens are rounded and laid out for their batches on
	// all the cores, as they are multiplied.
	ar := a8Arenas.Get().(*a8Arena)
	ar.reset()
	defer a8Arenas.Put(ar)
	acts := make([]*a8Acts, T)
	for t := range acts {
		acts[t] = makeA8Acts(ar, k)
	}
	batches := a8Batches(W, T, nbk, ar)
	parallel(T, max(1, T/runtime.GOMAXPROCS(0)), func(lo, hi int) {
		for t := lo; t < hi; t++ {
			acts[t].round(x[t*k : (t+1)*k])
			if batches != nil {
				batches.put(t, acts[t])
			}
		}
	})
	rb := a8Rows
	if T == 1 {
		rb = streamBlock(W)
	}
	parallelBlocks(blocks(W, rb), shared, rb+nbk, 0, func(blk int, sc *scratch) {
		p, a, z := block(W, rb, blk)
		if batches != nil {
			t0 := 0
			for _, bt := range batches {
				bt.rows(p, k, a, z, out[t0*n+p.Row0+a:], n, sc)
				t0 += bt.tokens()
			}
			if b != nil {
				for t := range T {
					o := out[t*n+p.Row0+a : t*n+p.Row0+z]
					for i, v := range b[p.Row0+a : p.Row0+z] {
						o[i] += v
					}
				}
			}
			return
		}
		y, ws := sc.w[:rb], sc.w[rb:rb+nbk]
		sums := sc.ints(nbk)
		for t := range T {
			rowsA8(p, k, a, z, acts[t], y[:z-a], sums, ws)
			row0 := t*n + p.Row0 + a
			for i, v := range y[:z-a] {
				if b != nil {
					v += b[p.Row0+a+i]
				}
				out[row0+i] = v
			}
		}
	})
}

// a8Tokens is the most tokens a prefill kernel (a8Batch) takes per call.
// Their activations (k bytes each) are read again for every row, from L1
// or L2. On 64 rows of 896 and 4864 columns, one core
// (BenchmarkA8Batch), the cost per weight against the one-token kernel
// at 2, 4, 8, 16 tokens was about 0.8–1.3×, 0.6×, 0.5×, 0.4× (quant q4)
// and down to 0.3–0.5× at 16 for q8, Q4_0 and Q8_0: most of the gain is
// in by 8. A whole Qwen2.5-0.5B q4 prefill of 79 tokens, in batches of
// up to 32 rather than 16, ran 3–6% faster (three runs each, alternating).
const a8Tokens = 32

// a8Rows is a block of matmulA8 in rows: 64 rows of 896 q4 columns are
// 28 KiB, which a prefill's tokens read from L1 and L2.
const a8Rows = 64

// quantizeActs is the rounding in use: quantizeActsGo, or assembly where
// the CPU has it (kernel_amd64.go).
var quantizeActs = quantizeActsGo

// rowsA8 is the kernel in use: rowsA8Go, or assembly where the CPU has
// it (kernel_amd64.go).
var rowsA8 = rowsA8Go

// MatmulA8 is out (T, n) = x (T, k) @ Wᵀ + b (b nil: none) with 8-bit
// activations, in this file's order: the reference that the GPU's a8
// kernels are checked against. Every piece of W must take them (a
// format with integer codes, k a multiple of 32).
func MatmulA8(out, x []float32, W *model.Matrix, b []float32, T int) {
	if !takesA8(W) {
		panic("cpu: MatmulA8 of a matrix without integer codes in whole blocks")
	}
	matmulA8(out, x, W, b, T)
}

// RoundActs is x (k,) rounded as this file's step 1 says: q (k,) and dx
// (k/32,).
func RoundActs(x []float32) (q []int8, dx []float32) {
	q, dx = make([]int8, len(x)), make([]float32, len(x)/a8Block)
	quantizeActs(x, q, dx)
	return q, dx
}
