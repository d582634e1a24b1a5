package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/x448/float16"

	"logitscope/internal/format/exl3"
	"logitscope/internal/format/ggml"
	"logitscope/internal/model"
	"logitscope/internal/quant"
	"logitscope/internal/sys/exp64"
)

// withGoKernels runs fn with the pure-Go kernels and decoders installed
// (what engine.wasm and CPUs without AVX-512 run), restoring the others.
func withGoKernels(fn func()) {
	t44, t41, dr, ax := tile4x4, tile4x1, dotRows, axpy
	qr, qb, gr, gb, rd, ra8, qa, ba8, sm, l4 := quantRows, quantBlocks, ggmlRows, ggmlBlocks, rowDots, rowsA8, quantizeActs, makeA8Batch, siluMul, lookupRowAsm
	tile4x4, tile4x1, dotRows, axpy, rowsA8, quantizeActs, makeA8Batch, siluMul, lookupRowAsm = tile4x4Go, tile4x1Go, dotRowsGo, axpyGo, rowsA8Go, quantizeActsGo, noA8Batch, exp64.SiluMulGo, nil
	quantRows, ggmlRows = goQuantRows(), goGGMLRows()
	quantBlocks = map[quant.Scheme]func([]byte, []byte, int, int, int, []float32, int){}
	ggmlBlocks = map[ggml.Type]func([]byte, int, []float32, int){}
	rowDots = map[model.Format]func(*model.Piece, int, int, int, []float32, []float32, []float32){}
	defer func() {
		tile4x4, tile4x1, dotRows, axpy, quantRows, quantBlocks, ggmlRows, ggmlBlocks, rowDots, rowsA8, quantizeActs, makeA8Batch, siluMul, lookupRowAsm = t44, t41, dr, ax, qr, qb, gr, gb, rd, ra8, qa, ba8, sm, l4
	}()
	fn()
}

// withReferenceDecoders runs fn with no row decoders installed, so that
// decodeRows calls the formats' reference decoders (quant, ggml).
func withReferenceDecoders(fn func()) {
	qr, qb, gr, gb := quantRows, quantBlocks, ggmlRows, ggmlBlocks
	quantRows, ggmlRows = map[quant.Scheme]func([]byte, []byte, int, []float32){}, map[ggml.Type]func([]byte, []float32){}
	quantBlocks, ggmlBlocks = map[quant.Scheme]func([]byte, []byte, int, int, int, []float32, int){}, map[ggml.Type]func([]byte, int, []float32, int){}
	defer func() { quantRows, quantBlocks, ggmlRows, ggmlBlocks = qr, qb, gr, gb }()
	fn()
}

// kernelPaths are the implementations a test compares: pure Go always,
// the installed assembly where this CPU runs it.
func kernelPaths() []string {
	if !asmKernels() {
		return []string{"go"}
	}
	return []string{"go", "asm"}
}

func onPath(path string, fn func()) {
	if path == "go" {
		withGoKernels(fn)
		return
	}
	fn()
}

// Every product is rounded before its sum on every path: the Go
// compiler may fuse x*y + z into one instruction (it does on arm64), and
// a fused lane would give other bits than engine.wasm, which has no fused
// multiply-add. Each case's fused and unfused results differ.
func TestProductsNotFused(t *testing.T) {
	u := float32(1.0 / (1 << 23))
	for _, c := range [][3]float32{
		{1 + u, 1 - u, -1},             // fused: −u², unfused: 0
		{3, 1.0 / 3, -1},               // fused: the rounding error of 1/3·3
		{1 + 0x1p-12, 1 + 0x1p-12, -1}, // fused: 2⁻¹¹ + 2⁻²⁴, unfused: the product's tie rounded to even
	} {
		a, b, z := c[0], c[1], c[2]
		want := float32(a*b) + z
		if fused := float32(math.FMA(float64(a), float64(b), float64(z))); fused == want {
			t.Fatalf("case %v: fused and unfused agree (%g): it tests nothing", c, want)
		}
		for _, path := range kernelPaths() {
			onPath(path, func() {
				// z in lane 0 of row 0 and of the value row: the
				// product of column 16 lands on it.
				w, x := make([]float32, 4*17), make([]float32, 17)
				w[0], x[0], w[16], x[16] = z, 1, a, b
				var got [4]float32
				tile4x1(w, 17, x, 17, &got)
				var acc [16][lanes]float32
				var tile [16]float32
				x4 := make([]float32, 4*17)
				copy(x4, x)
				tile4x4(w, 17, x4, 17, 17, &acc, &tile, first|last)
				out := []float32{0}
				axpy(out, []float32{1, a}, []float32{z, b}, 1)
				for what, v := range map[string]float32{"tile4x1": got[0], "tile4x4": tile[0], "axpy": out[0]} {
					if math.Float32bits(v) != math.Float32bits(want) {
						t.Errorf("%s %s: %v → %g, want %g (fused: %g)", path, what, c, v, want, float32(math.FMA(float64(a), float64(b), float64(z))))
					}
				}
			})
		}
	}
}

// The assembly tiles compute the pure-Go order's bits, on shapes with and
// without a partial chunk, with zeros of both signs, underflowing
// products and infinities.
func TestTilesMatchGo(t *testing.T) {
	if !asmKernels() {
		t.Skip("no assembly kernels on this CPU")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for _, k := range []int{1, 7, 15, 16, 17, 31, 32, 33, 100, 901} {
		for trial := range 20 {
			ldw, ldx := k+3, k+1
			w, x := randomValues(rng, 3*ldw+k, trial), randomValues(rng, 3*ldx+k, trial)
			if trial == 4 {
				for i := range w {
					w[i] = -w[i] // lanes of −0, turned +0 by the padding
				}
			}
			// Whole rows, and rows in two panels split at 16 columns.
			var whole [16]float32
			for _, split := range []int{k, min(k, 16)} {
				var accA, accG [16][lanes]float32
				var a, g [16]float32
				flags := first
				if split == k {
					flags |= last
				}
				tile4x4(w, ldw, x, ldx, split, &accA, &a, flags)
				tile4x4Go(w, ldw, x, ldx, split, &accG, &g, flags)
				if split < k {
					tile4x4(w[split:], ldw, x[split:], ldx, k-split, &accA, &a, last)
					tile4x4Go(w[split:], ldw, x[split:], ldx, k-split, &accG, &g, last)
				} else {
					whole = g
				}
				what := fmt.Sprintf("tile4x4 k=%d split %d trial %d", k, split, trial)
				sameBits(t, what, a[:], g[:])
				sameBits(t, what+" against whole rows", g[:], whole[:])
			}
			var a1, g1 [4]float32
			tile4x1(w, ldw, x, k, &a1)
			tile4x1Go(w, ldw, x, k, &g1)
			sameBits(t, fmt.Sprintf("tile4x1 k=%d trial %d", k, trial), a1[:], g1[:])
		}
	}
}

// The assembly axpy computes the pure-Go chains' bits, for rows of 1 to
// 40 values (a partial last chunk of 16) and 1 to 9 of them.
func TestAxpyMatchesGo(t *testing.T) {
	if !asmKernels() {
		t.Skip("no assembly kernels on this CPU")
	}
	rng := rand.New(rand.NewPCG(13, 14))
	for n := 1; n <= 40; n++ {
		for m := 1; m <= 9; m++ {
			for trial := range 4 {
				ldv := n + 3
				p, v := randomValues(rng, m, trial), randomValues(rng, m*ldv, trial)
				init := randomValues(rng, n, trial)
				a, g := append([]float32(nil), init...), append([]float32(nil), init...)
				axpy(a, p, v, ldv)
				axpyGo(g, p, v, ldv)
				sameBits(t, fmt.Sprintf("axpy n=%d m=%d trial %d", n, m, trial), a, g)
			}
		}
	}
}

// randomValues: normal values, and in some trials zeros of either sign,
// values whose products underflow (in trial 4 every value is 1e-25, so
// that with one side negated every product rounds to −0), and infinities
// among them.
func randomValues(rng *rand.Rand, n, trial int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
		switch {
		case trial == 4:
			v[i] = 1e-25
		case trial%4 == 1 && rng.IntN(3) == 0:
			v[i] = float32(math.Copysign(0, float64(v[i])))
		case trial%4 == 2:
			v[i] *= 1e-25
		case trial%4 == 3 && rng.IntN(50) == 0:
			v[i] = float32(math.Inf(1 - 2*rng.IntN(2)))
		}
	}
	return v
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		g, w := got[i], want[i]
		if math.Float32bits(g) != math.Float32bits(w) && !(g != g && w != w) {
			t.Fatalf("%s: [%d] = %g (%#x), want %g (%#x)", what, i, g, math.Float32bits(g), w, math.Float32bits(w))
		}
	}
}

// stored is a matrix in one of the formats the CPU computes with, split
// into two pieces, and its values decoded by the reference decoders.
func stored(t testing.TB, rng *rand.Rand, f model.Format, rows, cols int) (*model.Matrix, []float32) {
	t.Helper()
	m := &model.Matrix{Rows: rows, Cols: cols}
	ref := make([]float32, rows*cols)
	for _, span := range [][2]int{{0, rows / 3}, {rows / 3, rows}} {
		a, b := span[0], span[1]
		if a == b {
			continue
		}
		out := ref[a*cols : b*cols]
		var data []byte
		if f.Scheme != "" {
			for i := range out {
				out[i] = float32(rng.NormFloat64())
			}
			var err error
			if data, err = quant.Quantize(f.Scheme, out, b-a, cols); err != nil {
				t.Fatal(err)
			}
			if err := quant.Dequantize(f.Scheme, data, b-a, cols, out); err != nil {
				t.Fatal(err)
			}
		} else {
			data = randomBlocks(t, rng, f.Type, b-a, cols, out)
		}
		m.Pieces = append(m.Pieces, model.Piece{Row0: a, Rows: b - a, Format: f, Data: data})
	}
	if err := m.CheckPieces(f.String()); err != nil {
		t.Fatal(err)
	}
	return m, ref
}

// randomBlocks is rows of random ggml blocks of type t whose values are
// finite and at most 1e3 in magnitude (a block is drawn again until
// they are), decoded into out.
func randomBlocks(t testing.TB, rng *rand.Rand, typ ggml.Type, rows, cols int, out []float32) []byte {
	t.Helper()
	bs, bb := typ.BlockSize(), typ.BlockBytes()
	data := make([]byte, rows*cols/bs*bb)
	for i := 0; i < len(out)/bs; i++ {
		blk, vals := data[i*bb:(i+1)*bb], out[i*bs:(i+1)*bs]
		for {
			for j := range blk {
				blk[j] = byte(rng.Uint32())
			}
			if typ == ggml.F32 {
				for j := range vals {
					v := math.Float32bits(float32(rng.NormFloat64()))
					blk[4*j], blk[4*j+1], blk[4*j+2], blk[4*j+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
				}
			}
			if err := ggml.Dequantize(typ, blk, vals); err != nil {
				t.Fatal(err)
			}
			ok := true
			for _, v := range vals {
				ok = ok && !(math.Abs(float64(v)) > 1e3) // NaN fails too
			}
			if ok {
				break
			}
		}
	}
	return data
}

// formatCase is a format the CPU reads and a column count it can hold:
// not a multiple of the kernels' 16 lanes where the format allows it,
// whole groups of 32, and more than a panel.
type formatCase struct {
	f    model.Format
	cols int
}

func formats() []formatCase {
	var out []formatCase
	for _, cols := range []int{75, 96} { // 96: whole groups, for the fused kernels
		for _, s := range quant.Schemes {
			out = append(out, formatCase{model.Format{Scheme: s}, cols})
		}
		for _, typ := range []ggml.Type{ggml.F32, ggml.F16, ggml.BF16} {
			out = append(out, formatCase{model.Format{Type: typ}, cols})
		}
	}
	for _, typ := range []ggml.Type{ggml.Q4_0, ggml.Q4_1, ggml.Q5_0, ggml.Q5_1, ggml.Q8_0, ggml.IQ4_NL, ggml.MXFP4} {
		out = append(out, formatCase{model.Format{Type: typ}, 96})
	}
	for _, typ := range []ggml.Type{ggml.Q2_K, ggml.Q3_K, ggml.Q4_K, ggml.Q5_K, ggml.Q6_K,
		ggml.IQ2_XXS, ggml.IQ2_XS, ggml.IQ2_S, ggml.IQ3_XXS, ggml.IQ3_S, ggml.IQ1_S, ggml.IQ1_M, ggml.IQ4_XS, ggml.TQ1_0, ggml.TQ2_0} {
		out = append(out, formatCase{model.Format{Type: typ}, 256})
	}
	// Rows longer than a prefill panel.
	return append(out, formatCase{model.Format{Scheme: quant.Q4}, 1100}, formatCase{model.Format{Type: ggml.BF16}, 1100},
		formatCase{model.Format{Type: ggml.Q8_0}, 1120})
}

// Every stored format gives the bits of the float32 matrix of its
// reference-decoded values, which give the order's bits element by
// element (dotGo), with and without a bias, for one token and for
// several (with a partial tile of tokens), odd row counts (partial tiles
// of rows, blocks split by pieces), on both kernel paths; and the float64
// product is near.
func TestMatmulStoredMatchesFloat32(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, fc := range formats() {
		for _, rows := range []int{1, 6, 67} {
			W, ref := stored(t, rng, fc.f, rows, fc.cols)
			F := &model.Matrix{Rows: rows, Cols: fc.cols, Data: ref}
			for _, T := range []int{1, 3, 9} {
				for _, bias := range []bool{false, true} {
					x := randomValues(rng, T*fc.cols, 0)
					var b []float32
					if bias {
						b = randomValues(rng, rows, 0)
					}
					name := fmt.Sprintf("%v/%dx%d/T=%d/bias=%v", fc.f, rows, fc.cols, T, bias)
					want := make([]float32, T*rows)
					for tk := range T {
						for r := range rows {
							want[tk*rows+r] = dotGo(ref[r*fc.cols:(r+1)*fc.cols], x[tk*fc.cols:(tk+1)*fc.cols])
							if bias {
								want[tk*rows+r] += b[r]
							}
						}
					}
					for _, path := range kernelPaths() {
						onPath(path, func() {
							got, gotF := make([]float32, T*rows), make([]float32, T*rows)
							matmul(got, x, W, b, T)
							matmul(gotF, x, F, b, T)
							sameBits(t, name+"/"+path+"/stored", got, want)
							sameBits(t, name+"/"+path+"/float32", gotF, want)
						})
					}
					for tk := range T {
						for r := range rows {
							var exact, mag float64
							for j := range fc.cols {
								p := float64(ref[r*fc.cols+j]) * float64(x[tk*fc.cols+j])
								exact, mag = exact+p, mag+math.Abs(p)
							}
							if bias {
								exact += float64(b[r])
								mag += math.Abs(float64(b[r]))
							}
							if d := math.Abs(float64(want[tk*rows+r]) - exact); d > 1e-5*mag {
								t.Fatalf("%s: [%d,%d] = %g, float64 %g", name, tk, r, want[tk*rows+r], exact)
							}
						}
					}
				}
			}
		}
	}
}

// The embedding lookup decodes one row as the reference decoders do.
func TestRowDecodes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, fc := range formats() {
		W, ref := stored(t, rng, fc.f, 13, fc.cols)
		for _, path := range kernelPaths() {
			onPath(path, func() {
				for r := range W.Rows {
					got := make([]float32, fc.cols)
					row(W, r, got)
					sameBits(t, fmt.Sprintf("%v row %d (%s)", fc.f, r, path), got, ref[r*fc.cols:(r+1)*fc.cols])
				}
			})
		}
	}
}

// The row decoders, pure Go and assembly, widen every f16 scale or value
// as the reference decoders do, infinities, NaNs and subnormals included
// (a NaN's payload may differ: both are NaN), on random bytes.
func TestDecodersOnRandomBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, path := range kernelPaths() {
		onPath(path, func() {
			for _, fc := range formats() {
				f := fc.f
				if quantRows[f.Scheme] == nil && ggmlRows[f.Type] == nil {
					continue
				}
				size, _ := modelBytes(f, 5, fc.cols)
				p := &model.Piece{Rows: 5, Format: f, Data: make([]byte, size)}
				for trial := range 50 {
					for i := range p.Data {
						p.Data[i] = byte(rng.Uint32())
					}
					got := make([]float32, 5*fc.cols+2*quant.GroupSize)
					want := make([]float32, 5*fc.cols+2*quant.GroupSize)
					decodeRows(p, fc.cols, 0, 5, got)
					withReferenceDecoders(func() { decodeRows(p, fc.cols, 0, 5, want) })
					sameBits(t, fmt.Sprintf("%s %v trial %d", path, f, trial), got[:5*fc.cols], want[:5*fc.cols])
				}
			}
		})
	}
}

func modelBytes(f model.Format, rows, cols int) (int, error) {
	if f.Scheme != "" {
		l, err := quant.NewLayout(f.Scheme, rows, cols)
		return l.Bytes(), err
	}
	if f.EXL3.K != 0 {
		return int(f.EXL3.Bytes(cols, rows)), nil
	}
	if l := f.Lookup; l != nil { // codes, then a scale (and offset) per group
		groups := rows * ((cols + l.GroupSize - 1) / l.GroupSize)
		if l.Offset != nil {
			groups *= 2
		}
		return rows*((cols*l.Bits+7)/8) + 4*groups, nil
	}
	rb, err := f.Type.RowBytes(cols)
	return rows * int(rb), err
}

// BenchmarkMatmul times one matmul of Qwen2.5-0.5B's MLP shapes per
// format, for one token (decode: bound by reading the weights, reported
// as stored GB/s) and a chunk of 32 (prefill: bound by arithmetic,
// reported as GFLOP/s), and the CPU time it took per weight (all threads:
// on a machine others share, it varies less than the wall time), on each
// kernel path: "go" is what engine.wasm runs, natively compiled.
func BenchmarkMatmul(b *testing.B) {
	benchMatmul(b, []model.Format{{Type: ggml.F32}, {Type: ggml.BF16}, {Scheme: quant.Q8}, {Scheme: quant.Q4}, {Type: ggml.Q8_0}, {Type: ggml.Q4_0},
		{EXL3: exl3.Format{K: 4, Codebook: exl3.MCG}}}, matmul)
}

// BenchmarkMatmulA8 is BenchmarkMatmul with 8-bit activations (a8.go),
// for the formats that take them (GFLOP/s counts their integer products).
func BenchmarkMatmulA8(b *testing.B) {
	benchMatmul(b, []model.Format{{Scheme: quant.Q8}, {Scheme: quant.Q4}, {Type: ggml.Q8_0}, {Type: ggml.Q4_0}}, matmulA8)
}

func benchMatmul(b *testing.B, formats []model.Format, mul func(out, x []float32, W *model.Matrix, b []float32, T int)) {
	rng := rand.New(rand.NewPCG(11, 12))
	for _, f := range formats {
		for _, shape := range [][2]int{{4864, 896}, {896, 4864}} {
			rows, cols := shape[0], shape[1]
			W := benchMatrix(b, rng, f, rows, cols)
			size, _ := modelBytes(f, rows, cols)
			for _, T := range []int{1, 8, 32} {
				for _, path := range kernelPaths() {
					b.Run(fmt.Sprintf("%v/%dx%d/T=%d/%s", f, rows, cols, T, path), func(b *testing.B) {
						x, out := randomValues(rng, T*cols, 0), make([]float32, T*rows)
						onPath(path, func() {
							cpu0 := cpuTime()
							for b.Loop() {
								mul(out, x, W, nil, T)
							}
							sec := b.Elapsed().Seconds() / float64(b.N)
							b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/float64(rows*cols*T), "cpu-ns/weight")
							b.ReportMetric(float64(size)/sec/1e9, "GB/s")
							b.ReportMetric(2*float64(rows*cols*T)/sec/1e9, "GFLOP/s")
						})
					})
				}
			}
		}
	}
}

// benchMatrix is a matrix of format f holding weights of a trained
// model's sizes (normal floats of 0.02, as if quantized from them):
// random bytes would hold subnormal values, which cost the FMA units a
// hundred cycles each.
func benchMatrix(b testing.TB, rng *rand.Rand, f model.Format, rows, cols int) *model.Matrix {
	if f.Scheme != "" {
		m, _ := stored(b, rng, f, rows, cols)
		return m
	}
	if f.Lookup != nil {
		return benchLookup(rng, f, rows, cols)
	}
	if f.EXL3.K != 0 {
		// The codebook's weights have a deviation of about 1: suh brings
		// them to a normal weight's size.
		m, _ := exl3Matrix(b, rng, rows, cols, f.EXL3)
		return m
	}
	w := make([]float32, rows*cols)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.02)
	}
	if f.Type == ggml.F32 {
		return &model.Matrix{Rows: rows, Cols: cols, Data: w}
	}
	size, _ := modelBytes(f, rows, cols)
	data := make([]byte, size)
	switch f.Type {
	case ggml.BF16:
		for i, v := range w {
			binary.LittleEndian.PutUint16(data[2*i:], uint16(math.Float32bits(v)>>16))
		}
	case ggml.Q8_0, ggml.Q4_0:
		// Random codes under a scale of a normal weight's size.
		bb := f.Type.BlockBytes()
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		for i := 0; i < len(data); i += bb {
			binary.LittleEndian.PutUint16(data[i:], float16.Fromfloat32(0.02/7).Bits())
		}
	default:
		b.Fatalf("no benchmark weights for %v", f)
	}
	return &model.Matrix{Rows: rows, Cols: cols, Pieces: []model.Piece{{Rows: rows, Format: f, Data: data}}}
}

// BenchmarkMatmulCold is a decode step's one-token product as the model
// meets it: each call reads a matrix no cache holds (copies of it
// cycling through 256 MiB), on every core, so GB/s is the weights'
// stream from memory. a8: 8-bit activations.
func BenchmarkMatmulCold(b *testing.B) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, c := range []struct {
		f  model.Format
		a8 bool
	}{{model.Format{Type: ggml.BF16}, false}, {model.Format{Scheme: quant.Q8}, false}, {model.Format{Scheme: quant.Q8}, true},
		{model.Format{Scheme: quant.Q4}, false}, {model.Format{Scheme: quant.Q4}, true}} {
		mul, name := matmul, c.f.String()
		if c.a8 {
			mul, name = matmulA8, name+"+a8"
		}
		for _, shape := range [][2]int{{4864, 896}, {896, 4864}} {
			rows, cols := shape[0], shape[1]
			W := benchMatrix(b, rng, c.f, rows, cols)
			size, _ := modelBytes(c.f, rows, cols)
			copies := make([]*model.Matrix, (256<<20)/size+1)
			for i := range copies {
				m := *W
				m.Pieces = slices.Clone(W.Pieces)
				for j := range m.Pieces {
					m.Pieces[j].Data = slices.Clone(m.Pieces[j].Data)
				}
				copies[i] = &m
			}
			b.Run(fmt.Sprintf("%s/%dx%d", name, rows, cols), func(b *testing.B) {
				x, out := randomValues(rng, cols, 0), make([]float32, rows)
				i := 0
				for b.Loop() {
					mul(out, x, copies[i%len(copies)], nil, 1)
					i++
				}
				b.ReportMetric(float64(size)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}
