package cpu

import (
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"

	"logitscope/internal/format/ggml"
	"logitscope/internal/model"
	"logitscope/internal/quant"
)

// The assembly kernels (kernel_amd64.s). They index memory through raw
// pointers; the Go wrappers below check every bound first.

//go:noescape
func tile4x4AVX512(w *float32, ldw int, x *float32, ldx, k int, acc *[16][lanes]float32, out *[16]float32, flags int)

//go:noescape
func tile4x1AVX512(w *float32, ldw int, x *float32, k int, out *[4]float32)

//go:noescape
func decodeQ4AVX512(codes, scales *byte, groups int, dst *float32)

//go:noescape
func decodeQ8AVX512(codes, scales *byte, groups int, dst *float32)

//go:noescape
func decodeLookup4AVX512(codes *byte, table, scales, offsets *float32, n, per int, dst *float32)

//go:noescape
func decodeLookup8AVX512(codes *byte, table, scales, offsets *float32, n, per int, dst *float32)

//go:noescape
func decodeLookup8AffineAVX512(codes *byte, base int32, scales, offsets *float32, n, per int, dst *float32)

//go:noescape
func decodeQ4_0AVX512(blocks *byte, n int, dst *float32)

//go:noescape
func decodeQ8_0AVX512(blocks *byte, n int, dst *float32)

//go:noescape
func decodeBF16AVX512(src *byte, chunks int, dst *float32)

//go:noescape
func decodeF16AVX512(src *byte, chunks int, dst *float32)

//go:noescape
func dot4Q4AVX512(w *byte, ldw int, s *float32, lds int, n int, x *float32, out *[4]float32)

//go:noescape
func dot4Q8AVX512(w *byte, ldw int, s *float32, lds int, n int, x *float32, out *[4]float32)

//go:noescape
func dot4Q4_0AVX512(w *byte, ldw int, s *byte, lds int, n int, x *float32, out *[4]float32)

//go:noescape
func dot4Q8_0AVX512(w *byte, ldw int, s *byte, lds int, n int, x *float32, out *[4]float32)

//go:noescape
func dot4BF16AVX512(w *byte, ldw int, s *byte, lds int, n int, x *float32, out *[4]float32)

//go:noescape
func a8Q4AVX512(codes *byte, ldc int, scales *byte, lds int, chunks int, acts *int8, sums *int32, dx *float32, masks *[2][16]uint16, out *[4]float32)

//go:noescape
func a8Q8AVX512(codes *byte, ldc int, scales *byte, lds int, chunks int, acts *int8, sums *int32, dx *float32, masks *[2][16]uint16, out *[4]float32)

//go:noescape
func a8Q4_0AVX512(codes *byte, ldc int, scales *byte, lds int, chunks int, acts *int8, sums *int32, dx *float32, masks *[2][32]uint64, out *[4]float32)

//go:noescape
func a8Q8_0AVX512(codes *byte, ldc int, scales *byte, lds int, chunks int, acts *int8, sums *int32, dx *float32, masks *[2][32]uint64, out *[4]float32)

//go:noescape
func a8Q4TokensAVX512(codes *byte, ldc int, scales *byte, lds int, chunks int, acts *int8, sums *int32, dx *float32, n int, masks unsafe.Pointer, lanes *float32, out *float32, ldo int)

//go:noescape
func a8Q8TokensAVX512(codes *byte, ldc int, scales *byte, lds int, chunks int, acts *int8, sums *int32, dx *float32, n int, masks unsafe.Pointer, lanes *float32, out *float32, ldo int)

//go:noescape
func a8Q4_0TokensAVX512(codes *byte, ldc int, scales *byte, lds int, chunks int, acts *int8, sums *int32, dx *float32, n int, masks unsafe.Pointer, lanes *float32, out *float32, ldo int)

//go:noescape
func a8Q8_0TokensAVX512(codes *byte, ldc int, scales *byte, lds int, chunks int, acts *int8, sums *int32, dx *float32, n int, masks unsafe.Pointer, lanes *float32, out *float32, ldo int)

//go:noescape
func a8TransposeAVX512(src *int8, chunks int, dst *int8, ldd, step, second int)

//go:noescape
func quantizeActsAVX512(x *float32, blocks int, q *int8, dx *float32)

//go:noescape
func packA8AVX512(q *int8, groups int, nib, halves *int8, sum *int32)

//go:noescape
func axpyAVX512(out *float32, n int, p *float32, m int, v *float32, ldv int)

// hasAVX512 is whether this CPU runs the kernels: AVX-512 Foundation for
// the 512-bit work and VL for the reduction's EVEX-encoded 128- and
// 256-bit instructions (every AVX-512 CPU has both, and F16C, which
// VCVTPH2PS needs, and AVX2).
var hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL

func init() {
	if hasAVX512 {
		useAVX512()
	}
}

// useAVX512 installs the assembly kernels.
func useAVX512() {
	tile4x4, tile4x1 = tile4x4Asm, tile4x1Asm
	axpy = func(out, p, v []float32, ldv int) {
		if len(out) == 0 || len(p) == 0 {
			return
		}
		_ = v[(len(p)-1)*ldv+len(out)-1]
		axpyAVX512(&out[0], len(out), &p[0], len(p), &v[0], ldv)
	}
	quantRows[quant.Q4] = func(codes, scales []byte, groups int, dst []float32) {
		_, _, _ = codes[16*groups-1], scales[2*groups-1], dst[32*groups-1]
		decodeQ4AVX512(&codes[0], &scales[0], groups, &dst[0])
	}
	quantRows[quant.Q8] = func(codes, scales []byte, groups int, dst []float32) {
		_, _, _ = codes[32*groups-1], scales[2*groups-1], dst[32*groups-1]
		decodeQ8AVX512(&codes[0], &scales[0], groups, &dst[0])
	}
	lookupRowAsm = func(bits, groupSize int, table []float32, base int32, affine bool, codes []byte, scales, offsets, dst []float32) bool {
		run := 32 // columns a 4-bit loop iteration decodes
		decode := decodeLookup4AVX512
		switch {
		case bits == 8 && affine:
			run, decode = 16, func(codes *byte, _, scales, offsets *float32, n, per int, dst *float32) {
				decodeLookup8AffineAVX512(codes, base, scales, offsets, n, per, dst)
			}
		case bits == 8:
			run, decode = 16, decodeLookup8AVX512
		}
		if groupSize%run != 0 || len(dst)%run != 0 || len(table) != 1<<bits {
			return false
		}
		n, per := len(dst)/run, groupSize/run
		if n > 0 {
			groups := (n-1)/per + 1
			_, _, _ = codes[len(dst)*bits/8-1], scales[groups-1], offsets[groups-1]
			decode(&codes[0], &table[0], &scales[0], &offsets[0], n, per, &dst[0])
		}
		return true
	}
	ggmlRows[ggml.Q4_0] = blockDecoder(18, decodeQ4_0AVX512)
	ggmlRows[ggml.Q8_0] = blockDecoder(34, decodeQ8_0AVX512)
	ggmlRows[ggml.BF16] = halfDecoder(ggml.BF16, decodeBF16AVX512)
	ggmlRows[ggml.F16] = halfDecoder(ggml.F16, decodeF16AVX512)
	if cpu.X86.HasAVX512VBMI { // VPERMB
		rowDots[model.Format{Scheme: quant.Q4}] = quantDot(quant.Q4, dot4Q4AVX512)
	}
	rowDots[model.Format{Scheme: quant.Q8}] = quantDot(quant.Q8, dot4Q8AVX512)
	rowDots[model.Format{Type: ggml.Q4_0}] = ggmlDot(ggml.Q4_0, 32, dot4Q4_0AVX512)
	rowDots[model.Format{Type: ggml.Q8_0}] = ggmlDot(ggml.Q8_0, 32, dot4Q8_0AVX512)
	rowDots[model.Format{Type: ggml.BF16}] = ggmlDot(ggml.BF16, 16, dot4BF16AVX512)
	if cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VNNI {
		packA8 = packA8Acts
		rowsA8 = rowsA8Asm
		makeA8Batch = makeA8BatchAsm
	}
	quantizeActs = func(x []float32, q []int8, dx []float32) {
		if len(dx) == 0 {
			return
		}
		_, _ = x[32*len(dx)-1], q[32*len(dx)-1]
		quantizeActsAVX512(&x[0], len(dx), &q[0], &dx[0])
	}
}

// rowsA8Asm is rowsA8 with the assembly for quant's q4 and q8 and ggml's
// Q4_0 and Q8_0, four rows at a time: the last (z−a) mod 4 rows come
// with the quad that ends at z, or, in a range of fewer than four rows,
// each as four copies of itself (stride 0). q6 takes rowsA8Go.
func rowsA8Asm(p *model.Piece, k, a, z int, x *a8Acts, out []float32, sums []int32, ws []float32) {
	nb := k / a8Block
	chunks := (nb + lanes - 1) / lanes
	// The kernels read whole chunks of the activations, and the codes
	// and scales of each row's nb blocks only (x's masks).
	if len(x.dx) != nb {
		panic("cpu: a8 activations of another length than the rows")
	}
	all := chunks * lanes * a8Block
	_, _, _ = x.q[:all][all-1], x.nib[all-1], x.halves[all-1]
	_, _ = x.sum[chunks*lanes-1], x.dx[:chunks*lanes][chunks*lanes-1]
	// quad(i, ld): out[i..] of up to four rows from row a+i, ld rows
	// apart (0 or 1).
	var quad func(i, ld int)
	var t4 [4]float32
	switch s, t := p.Format.Scheme, p.Format.Type; {
	case s == quant.Q4 || s == quant.Q8:
		l, _ := quant.NewLayout(s, p.Rows, k)
		qw, sw := 4*l.QuantWordsPerRow, 4*l.ScaleWordsPerRow
		codes := p.Data[a*qw : z*qw]
		scales := p.Data[l.QuantBytes()+a*sw : l.QuantBytes()+z*sw]
		kern, acts, masks := a8Q4AVX512, x.nib, &x.masks[0]
		if s == quant.Q8 {
			kern, acts, masks = a8Q8AVX512, x.q[:cap(x.q)], &x.masks[1]
		}
		quad = func(i, ld int) {
			_, _ = codes[(i+3*ld+1)*qw-1], scales[(i+3*ld)*sw+2*nb-1]
			kern(&codes[i*qw], ld*qw, &scales[i*sw], ld*sw, chunks, &acts[0], &x.sum[0], &x.dx[0], masks, &t4)
		}
	case (t == ggml.Q4_0 || t == ggml.Q8_0) && cpu.X86.HasAVX512VBMI:
		rb64, _ := t.RowBytes(k)
		rb := int(rb64)
		rows := p.Data[a*rb : z*rb]
		kern, acts, masks := a8Q4_0AVX512, x.halves, &x.blockMasks[0]
		if t == ggml.Q8_0 {
			kern, acts, masks = a8Q8_0AVX512, x.q[:cap(x.q)], &x.blockMasks[1]
		}
		quad = func(i, ld int) {
			_ = rows[(i+3*ld+1)*rb-1]
			kern(&rows[i*rb], ld*rb, &rows[i*rb], ld*rb, chunks, &acts[0], &x.sum[0], &x.dx[0], masks, &t4)
		}
	default:
		rowsA8Go(p, k, a, z, x, out, sums, ws)
		return
	}
	n := z - a
	for i := 0; i+4 <= n; i += 4 {
		quad(i, 1)
		copy(out[i:i+4], t4[:])
	}
	switch left := n % 4; {
	case left == 0:
	case n >= 4:
		quad(n-4, 1)
		copy(out[n-left:n], t4[4-left:])
	default:
		for i := range n {
			quad(i, 0)
			out[i] = t4[0]
		}
	}
}

// a8Masks are the masks of the quant kernels for rows of nb blocks of
// bytes code bytes: [0] those of a whole chunk, [1] those of the last
// one; in each, the dword masks of the code loads (64 bytes each), then
// at 8 the chunk's blocks, at 9 the same in the prefill kernel's
// permuted lanes (a8Perm for q4, a8Q8Perm for q8).
func a8Masks(nb, bytes int) [2][16]uint16 {
	perm := a8Perm
	if bytes == 32 {
		perm = a8Q8Perm
	}
	var lane [lanes]int // of each block
	for p := range lanes {
		lane[perm(p)] = p
	}
	var m [2][16]uint16
	for set, blocks := range []int{lanes, a8LastChunk(nb)} {
		for b := range blocks {
			d := b * bytes / 4 // the block's first dword in the chunk
			for j := range bytes / 4 {
				m[set][(d+j)/16] |= 1 << ((d + j) % 16)
			}
			m[set][9] |= 1 << lane[b]
		}
		m[set][8] = uint16(1<<blocks - 1)
	}
	return m
}

// a8Perm is the block in lane p of a chunk in a8Q4TokensAVX512 (block
// 4j+l in lane 4l+j: the transpose that puts each block's sum in one
// dword); it is its own inverse.
func a8Perm(p int) int { return 4*(p%4) + p/4 }

// a8Q8Perm is the block in lane p of a8Q8TokensAVX512 (a8Q8Perm<>).
func a8Q8Perm(p int) int { return 8*(p/8) + 2*(p%4) + p/4%2 }

// a8TokensKernel is a prefill kernel of a format and how its tokens are
// laid out: the activations it reads (a8Acts.nib, halves or q) and their
// transpose (a8TransposeAVX512's step and second), c (the codes'
// offset), its lanes' permutation and its masks.
type a8TokensKernel struct {
	kern         func(codes *byte, ldc int, scales *byte, lds int, chunks int, acts *int8, sums *int32, dx *float32, n int, masks unsafe.Pointer, lanes *float32, out *float32, ldo int)
	acts         func(*a8Acts) []int8
	step, second int
	c            int32
	perm         func(int) int
	masks        func(*a8MaskSet) unsafe.Pointer
}

// a8TokensKernels are the prefill kernels by format; ggml's take VPERMB
// (AVX512_VBMI), as a8Q4_0AVX512 and a8Q8_0AVX512 do.
var a8TokensKernels = map[model.Format]*a8TokensKernel{
	{Scheme: quant.Q4}: {a8Q4TokensAVX512, func(x *a8Acts) []int8 { return x.nib }, 128, 64, 8, a8Perm,
		func(m *a8MaskSet) unsafe.Pointer { return unsafe.Pointer(&m.masks[0]) }},
	{Scheme: quant.Q8}: {a8Q8TokensAVX512, func(x *a8Acts) []int8 { return x.q[:cap(x.q)] }, 64, 256, 128, a8Q8Perm,
		func(m *a8MaskSet) unsafe.Pointer { return unsafe.Pointer(&m.masks[1]) }},
}

func init() {
	if cpu.X86.HasAVX512VBMI {
		a8TokensKernels[model.Format{Type: ggml.Q4_0}] = &a8TokensKernel{a8Q4_0TokensAVX512, func(x *a8Acts) []int8 { return x.halves }, 128, 64, 8, a8Perm,
			func(m *a8MaskSet) unsafe.Pointer { return unsafe.Pointer(&m.blockMasks[0]) }}
		a8TokensKernels[model.Format{Type: ggml.Q8_0}] = &a8TokensKernel{a8Q8_0TokensAVX512, func(x *a8Acts) []int8 { return x.q[:cap(x.q)] }, 64, 256, 128, a8Q8Perm,
			func(m *a8MaskSet) unsafe.Pointer { return unsafe.Pointer(&m.blockMasks[1]) }}
	}
}

// makeA8BatchAsm makes room for n ≤ a8Tokens tokens of nb blocks for
// the prefill kernel of format f, if any.
func makeA8BatchAsm(f model.Format, n, nb int, ar *a8Arena) a8Batch {
	kt := a8TokensKernels[f]
	if kt == nil || n > a8Tokens {
		return nil
	}
	chunks := (nb + lanes - 1) / lanes
	return &a8TokensBatch{
		a8TokensKernel: kt,
		format:         f,
		n:              n,
		nb:             nb,
		acts:           ar.int8s(chunks * n * 512),
		sums:           ar.int32s(chunks * n * lanes),
		dx:             ar.float32s(chunks * n * lanes),
		maskSet:        kt.masks(a8MasksFor(nb)),
	}
}

func (b *a8TokensBatch) put(t int, x *a8Acts) {
	chunks := (b.nb + lanes - 1) / lanes
	if len(x.dx) != b.nb || cap(x.dx) != chunks*lanes {
		panic("cpu: a8 batch of tokens of different lengths")
	}
	if chunks == 0 {
		return
	}
	src := b.a8TokensKernel.acts(x)
	_ = src[chunks*512-1]
	a8TransposeAVX512(&src[0], chunks, &b.acts[t*512], b.n*512, b.step, b.second)
	var perm [lanes]int
	for l := range perm {
		perm[l] = b.perm(l) & (lanes - 1)
	}
	dx, sum := x.dx[:cap(x.dx)], x.sum[:chunks*lanes]
	for c := range chunks {
		o := (c*b.n + t) * lanes
		ts, tdx := b.sums[o:o+lanes:o+lanes], b.dx[o:o+lanes:o+lanes]
		cs, cdx := sum[c*lanes:(c+1)*lanes:(c+1)*lanes], dx[c*lanes:(c+1)*lanes:(c+1)*lanes]
		for l, blk := range perm {
			ts[l] = b.c * cs[blk]
			tdx[l] = cdx[blk]
		}
	}
}

// a8TokensBatch is n tokens laid out for a prefill kernel: per chunk,
// each token's transposed activations, then per chunk each token's c·Σq
// and dx in the kernel's permuted lanes; maskSet the kernel's masks.
type a8TokensBatch struct {
	*a8TokensKernel
	format  model.Format
	n, nb   int
	acts    []int8
	sums    []int32
	dx      []float32
	maskSet unsafe.Pointer
}

func (b *a8TokensBatch) tokens() int { return b.n }

func (b *a8TokensBatch) rows(p *model.Piece, k, a, z int, out []float32, ldo int, sc *scratch) {
	nb := k / a8Block
	if nb != b.nb || p.Format != b.format {
		panic("cpu: a8 batch of another format or length than the rows")
	}
	n := z - a
	_ = out[(b.n-1)*ldo+n-1]
	if nb == 0 {
		for t := range b.n {
			clear(out[t*ldo : t*ldo+n])
		}
		return
	}
	chunks := (nb + lanes - 1) / lanes
	// The kernel reads each row's nb blocks of codes and scales only
	// (the masks), and the batch's whole chunks.
	var codes, scales []byte
	var qw, sw int
	if s := b.format.Scheme; s != "" {
		l, _ := quant.NewLayout(s, p.Rows, k)
		qw, sw = 4*l.QuantWordsPerRow, 4*l.ScaleWordsPerRow
		codes = p.Data[a*qw : z*qw]
		scales = p.Data[l.QuantBytes()+a*sw : l.QuantBytes()+(z-1)*sw+2*nb]
	} else {
		rb, _ := b.format.Type.RowBytes(k)
		qw, sw = int(rb), int(rb)
		codes = p.Data[a*qw : z*qw]
		scales = codes
	}
	_, _, _ = b.acts[chunks*b.n*512-1], b.sums[chunks*b.n*lanes-1], b.dx[chunks*b.n*lanes-1]
	// Two rows a call, the last of an odd count twice (stride 0) into
	// last.
	scr := sc.a8Lanes()
	acc, last := scr[:2*a8Tokens*lanes], scr[2*a8Tokens*lanes:]
	for i := 0; i+2 <= n; i += 2 {
		b.kern(&codes[i*qw], qw, &scales[i*sw], sw, chunks, &b.acts[0], &b.sums[0], &b.dx[0], b.n, b.maskSet, &acc[0], &out[i], ldo)
	}
	if n%2 == 1 {
		i := n - 1
		b.kern(&codes[i*qw], 0, &scales[i*sw], 0, chunks, &b.acts[0], &b.sums[0], &b.dx[0], b.n, b.maskSet, &acc[0], &last[0], 2)
		for t := range b.n {
			out[t*ldo+i] = last[2*t]
		}
	}
}

// a8BlockMasks are those of the ggml kernels for rows of nb blocks of
// size bytes, loaded group blocks at a time: per group the byte masks
// of its first 64 bytes and of the rest, then at 16 the chunk's blocks,
// then from 17 per group the bytes of its scales in 16 f16s, at 25 the
// chunk's blocks in the prefill kernel's permuted lanes (a8Perm for
// Q4_0, a8Q8Perm for Q8_0).
func a8BlockMasks(nb, size, group int) [2][32]uint64 {
	perm := a8Perm
	if size == 34 {
		perm = a8Q8Perm
	}
	var m [2][32]uint64
	for set, blocks := range []int{lanes, a8LastChunk(nb)} {
		for g := range lanes / group {
			// The group's bytes in the row (1<<64 is 0).
			n := uint(size * min(group, max(0, blocks-g*group)))
			m[set][2*g] = 1<<min(n, 64) - 1
			m[set][2*g+1] = 1<<(max(n, 64)-64) - 1
		}
		m[set][16] = 1<<blocks - 1
		for p := range lanes {
			if perm(p) < blocks {
				m[set][25] |= 1 << p
			}
		}
		for g := range lanes / group {
			// The bytes of the group's scales in the register that
			// gathers the chunk's (VPERMB), for any set.
			m[set][17+g] = (1<<(2*group) - 1) << (2 * group * g)
		}
	}
	return m
}

// a8LastChunk is the blocks of a row's last chunk of 16, 1..16.
func a8LastChunk(nb int) int { return nb - (nb-1)/lanes*lanes }

// a8MaskSets holds the kernels' masks (a8MaskSet) of each row length
// met, in blocks: a prefill rounds every token of every product, and the
// masks depend on the length alone.
var a8MaskSets sync.Map

type a8MaskSet struct {
	masks      [2][2][16]uint16
	blockMasks [2][2][32]uint64
}

// a8MasksFor is the masks of rows of nb blocks.
func a8MasksFor(nb int) *a8MaskSet {
	m, ok := a8MaskSets.Load(nb)
	if !ok {
		m, _ = a8MaskSets.LoadOrStore(nb, &a8MaskSet{
			masks:      [2][2][16]uint16{a8Masks(nb, 16), a8Masks(nb, 32)},
			blockMasks: [2][2][32]uint64{a8BlockMasks(nb, 18, 4), a8BlockMasks(nb, 34, 2)},
		})
	}
	return m.(*a8MaskSet)
}

// packA8Acts lays out x for the a8 kernels (a8Acts): per 4 blocks, the
// columns that meet the low nibbles of a 64-byte load of 4-bit codes,
// then those that meet the high ones (quant's q4: a block's even columns,
// then its odd ones; ggml's Q4_0: its first 16 columns, then its last
// 16), Σ q per block and the kernels' masks for rows of len(x.dx)
// blocks, into the room makeA8Acts made (q and dx padded to whole
// chunks).
func packA8Acts(x *a8Acts) {
	m := a8MasksFor(len(x.dx))
	x.masks, x.blockMasks = &m.masks, &m.blockMasks
	nb := cap(x.dx)
	q := x.q[:cap(x.q)]
	if nb == 0 {
		return
	}
	_, _, _, _ = q[nb*a8Block-1], x.nib[nb*a8Block-1], x.halves[nb*a8Block-1], x.sum[nb-1]
	packA8AVX512(&q[0], nb/4, &x.nib[0], &x.halves[0], &x.sum[0])
}

// quantDot wraps a fused kernel of a quant scheme (n: code bytes per
// row): the rows' codes in the piece's first region, their f16 scales
// widened into scratch first, so that the kernel reads each as a float32
// broadcast from memory.
func quantDot(s quant.Scheme, dot func(w *byte, ldw int, s *float32, lds int, n int, x *float32, out *[4]float32)) func(p *model.Piece, k, a, z int, x, out, scratch []float32) {
	half := halfDecoder(ggml.F16, decodeF16AVX512)
	return func(p *model.Piece, k, a, z int, x, out, scratch []float32) {
		l, _ := quant.NewLayout(s, p.Rows, k)
		qw, sw := 4*l.QuantWordsPerRow, 4*l.ScaleWordsPerRow
		codes := p.Data[a*qw : z*qw]
		scales := scratch[:(z-a)*sw/2]
		half(p.Data[l.QuantBytes()+a*sw:l.QuantBytes()+z*sw], scales)
		_, _ = x[32*l.Groups-1], out[z-a-1]
		var t4 [4]float32
		for i := 0; i+4 <= z-a; i += 4 {
			dot(&codes[i*qw], qw, &scales[i*sw/2], sw*2, qw, &x[0], &t4)
			copy(out[i:i+4], t4[:])
		}
	}
}

// ggmlDot wraps a fused kernel of ggml rows (n: chunks of size values
// per row).
func ggmlDot(t ggml.Type, size int, dot func(w *byte, ldw int, s *byte, lds int, n int, x *float32, out *[4]float32)) func(p *model.Piece, k, a, z int, x, out, scratch []float32) {
	return func(p *model.Piece, k, a, z int, x, out, _ []float32) {
		rb, _ := t.RowBytes(k)
		rows := p.Data[int64(a)*rb : int64(z)*rb]
		_, _ = x[k-1], out[z-a-1]
		var t4 [4]float32
		for i := 0; i+4 <= z-a; i += 4 {
			dot(&rows[int64(i)*rb], int(rb), &rows[0], 0, k/size, &x[0], &t4)
			copy(out[i:i+4], t4[:])
		}
	}
}

func tile4x4Asm(w []float32, ldw int, x []float32, ldx, k int, acc *[16][lanes]float32, out *[16]float32, flags int) {
	_, _ = w[3*ldw+k-1], x[3*ldx+k-1]
	tile4x4AVX512(&w[0], ldw, &x[0], ldx, k, acc, out, flags)
}

func tile4x1Asm(w []float32, ldw int, x []float32, k int, out *[4]float32) {
	_, _ = w[3*ldw+k-1], x[k-1]
	tile4x1AVX512(&w[0], ldw, &x[0], k, out)
}

// blockDecoder wraps a decoder of 32-weight blocks of size bytes.
func blockDecoder(size int, dec func(*byte, int, *float32)) func(src []byte, dst []float32) {
	return func(src []byte, dst []float32) {
		n := len(dst) / 32
		if n == 0 {
			return
		}
		_ = src[n*size-1]
		dec(&src[0], n, &dst[0])
	}
}

// halfDecoder wraps a decoder of 16-bit floats in chunks of 16; the
// reference decoder does the rest.
func halfDecoder(t ggml.Type, dec func(*byte, int, *float32)) func(src []byte, dst []float32) {
	return func(src []byte, dst []float32) {
		n := len(dst) / 16
		if n > 0 {
			_ = src[32*n-1]
			dec(&src[0], n, &dst[0])
		}
		if 16*n < len(dst) {
			ggml.Dequantize(t, src[32*n:2*len(dst)], dst[16*n:])
		}
	}
}
