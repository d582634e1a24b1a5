package gpuengine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"logitscope/internal/format/exl3"
	"logitscope/internal/format/exl3/exl3test"
	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native/nativetest"
	"logitscope/shaders"
)

// exl3Params are exl3.wgsl's Params in order.
type exl3Params struct {
	k, codebook, nIn, nOut, inP, onP, rows, slots, first, count, blobWords, perToken, srcOff, ldSrc, dstOff, ldDst, hasBias, add int
}

func (p exl3Params) words() []uint32 {
	return params(p.k, int(p.codebook), p.nIn, p.nOut, p.inP, p.onP, p.rows, p.slots, p.first, p.count, p.blobWords, p.perToken,
		p.srcOff, p.ldSrc, p.dstOff, p.ldDst, p.hasBias, p.add)
}

// The shader decodes every weight of Ŵ as the CPU's decoder does, bit for
// bit, for every codebook and every K from 1 to 8.
func TestEXL3DecodeKernel(t *testing.T) {
	dev := nativetest.Device(t)
	rng := rand.New(rand.NewPCG(3, 4))
	for _, cb := range []exl3.Codebook{exl3.Inst3, exl3.MCG, exl3.MUL1} {
		for k := 1; k <= 8; k++ {
			f := exl3.Format{K: k, Codebook: cb}
			l := exl3test.Random(rng, 256, 128, f)
			blob := l.Blob()
			want := make([]float32, l.In*l.Out)
			f.DecodeColumns(blob, l.In, l.Out, 0, l.Out, want)
			out := buf(t, dev, make([]float32, len(want)))
			p := exl3Params{k: k, codebook: int(cb), nIn: l.In, nOut: l.Out, inP: l.In, onP: l.Out}
			dispatch(t, dev, shaders.EXL3Product(), "decode", []gpu.Buffer{buf(t, dev, blob), 0, out, 0, 0, buf(t, dev, p.words())}, uint32(l.Out/64), uint32(l.In), 1)
			got := read(t, dev, out, len(want))
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%v: Ŵᵀ[%d][%d] = %g, the CPU decodes %g", f, i/l.In, i%l.In, got[i], want[i])
				}
			}
		}
	}
}

// y = x·W through the three kernels, for a layer padded on both sides,
// with a bias and an addend: the rotations give the CPU's bits and the
// product the exact one's to float32 rounding; as a bank of experts, each
// (token, slot) row runs its expert's blob, and rows of other banks are
// left alone.
func TestEXL3ProductKernels(t *testing.T) {
	dev := nativetest.Device(t)
	rng := rand.New(rand.NewPCG(5, 6))
	const nIn, nOut, T = 200, 100, 3
	f := exl3.Format{K: 4, Codebook: exl3.MCG}
	x := make([]float32, T*nIn)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	bias := make([]float32, nOut)
	for i := range bias {
		bias[i] = float32(rng.NormFloat64())
	}
	for _, slots := range []int{0, 2} {
		t.Run(fmt.Sprint("slots", slots), func(t *testing.T) {
			experts, rows, ids := 1, T, []uint32{0}
			if slots > 0 {
				// Experts 5…7 in this bank; 9 is another bank's.
				experts, rows, ids = 3, T*slots, []uint32{6, 5, 9, 7, 5, 6}
			}
			var blobs []byte
			var layers []exl3.Layer
			for range experts {
				l := exl3test.Random(rng, nIn, nOut, f)
				layers, blobs = append(layers, l), append(blobs, l.Blob()...)
			}
			inP, onP := exl3.Pad(nIn), exl3.Pad(nOut)
			p := exl3Params{k: f.K, codebook: int(f.Codebook), nIn: nIn, nOut: nOut, inP: inP, onP: onP, rows: rows, slots: slots,
				first: 5, count: experts, blobWords: int(f.Bytes(nIn, nOut) / 4), perToken: min(slots, 1)}
			wb, ib := buf(t, dev, blobs), buf(t, dev, ids)
			xb, xp, yp := buf(t, dev, x), buf(t, dev, make([]float32, rows*inP)), buf(t, dev, make([]float32, rows*onP))
			const ldy = nOut + 3
			y0 := make([]float32, rows*ldy)
			for i := range y0 {
				y0[i] = float32(i)
			}
			yb := buf(t, dev, y0)
			in, prod, out := p, p, p
			in.ldSrc, in.ldDst = nIn, inP
			prod.ldSrc, prod.ldDst = inP, onP
			out.ldSrc, out.ldDst, out.hasBias, out.add = onP, ldy, 1, 1
			src := shaders.EXL3Product()
			dispatch(t, dev, src, "rotate_in", []gpu.Buffer{wb, xb, xp, 0, ib, buf(t, dev, in.words())}, uint32(inP/128), uint32(rows), 1)
			dispatch(t, dev, src, "product", []gpu.Buffer{wb, xp, yp, 0, ib, buf(t, dev, prod.words())}, uint32(ceilDiv(onP, 64)), uint32(rows), 1)
			dispatch(t, dev, src, "rotate_out", []gpu.Buffer{wb, yp, yb, buf(t, dev, bias), ib, buf(t, dev, out.words())}, uint32(onP/128), uint32(rows), 1)
			gotXp, got := read(t, dev, xp, rows*inP), read(t, dev, yb, rows*ldy)
			var want []float64
			var gotVals []float32
			for i := range rows {
				tok, e := i, 0
				if slots > 0 {
					tok, e = i/slots, int(ids[i])-5
				}
				if e < 0 || e >= experts {
					for c := range ldy {
						if got[i*ldy+c] != y0[i*ldy+c] {
							t.Fatalf("row %d, another bank's, was written", i)
						}
					}
					continue
				}
				l := layers[e]
				suh, _ := f.Scales(l.Blob(), nIn, nOut)
				xr := make([]float32, inP)
				for c := range nIn {
					xr[c] = x[tok*nIn+c] * suh[c]
				}
				exl3.Hadamard32(xr)
				for c := range inP {
					if math.Float32bits(gotXp[i*inP+c]) != math.Float32bits(xr[c]) {
						t.Fatalf("row %d: x'[%d] = %g, the CPU rotates to %g", i, c, gotXp[i*inP+c], xr[c])
					}
				}
				w, _ := l.Exact()
				for c := range nOut {
					v := float64(y0[i*ldy+c]) + float64(bias[c])
					for r := range nIn {
						v += float64(x[tok*nIn+r]) * w[r*l.Out+c]
					}
					want, gotVals = append(want, v), append(gotVals, got[i*ldy+c])
				}
				for c := nOut; c < ldy; c++ {
					if got[i*ldy+c] != y0[i*ldy+c] {
						t.Fatalf("row %d: column %d, past the outputs, was written", i, c)
					}
				}
			}
			nmse, maxAbs := errors(gotVals, want)
			t.Logf("slots %d: NMSE %.2e, max abs %.2e", slots, nmse, maxAbs)
			if nmse > 1e-10 || maxAbs > 1e-3 {
				t.Fatalf("EXL3 product: NMSE %g, max abs %g", nmse, maxAbs)
			}
		})
	}
}
