package gpuengine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"logitscope/internal/engine/internal/cpu"
	"logitscope/internal/format/ggml"
	"logitscope/internal/format/safetensors"
	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native/nativetest"
	"logitscope/internal/model"
	"logitscope/internal/quant"
	"logitscope/shaders"
)

// encode stores W (rows, cols) in format f and returns the bytes and the
// values the CPU engine would use for them.
func encode(t *testing.T, f shaders.Format, w []float32, rows, cols int) ([]byte, []float32) {
	t.Helper()
	deq := make([]float32, len(w))
	var raw []byte
	switch f {
	case shaders.F32:
		raw, deq = safetensors.EncodeF32(w), w
	case shaders.BF16, shaders.F16:
		dt := map[shaders.Format]safetensors.DType{shaders.BF16: safetensors.BF16, shaders.F16: safetensors.F16}[f]
		if f == shaders.BF16 {
			raw = safetensors.EncodeBF16(w)
		} else {
			raw = safetensors.EncodeF16(w)
		}
		if err := safetensors.DecodeFloat32(dt, raw, deq); err != nil {
			t.Fatal(err)
		}
	default:
		s := quant.Scheme(f.String())
		var err error
		if raw, err = quant.Quantize(s, w, rows, cols); err != nil {
			t.Fatal(err)
		}
		if err := quant.Dequantize(s, raw, rows, cols, deq); err != nil {
			t.Fatal(err)
		}
	}
	return raw, deq
}

// randomWeights is a random (rows, cols) matrix stored in format f:
// random blocks of moderate scale for GGUF's types (randomBlocks), else
// random values in [-0.5, 0.5) encoded.
func randomWeights(t *testing.T, f shaders.Format, rows, cols int, seed uint64) []byte {
	t.Helper()
	if ty, ok := f.GGML(); ok {
		return randomBlocks(ty, rows*cols, rand.New(rand.NewPCG(seed, uint64(ty))), true)
	}
	r := rnd(seed)
	raw, _ := encode(t, f, r.fill(rows*cols, 0.5), rows, cols)
	return raw
}

// Y = X @ Wᵀ + b for every format, with W split in two row-pieces (the
// split-tensor path), 130 rows and 70 or 300 columns (not multiples of the
// workgroup size nor of the 32-wide groups; 300 gives an invocation
// several groups), 1 token (decode) or 11 (prefill), offsets into
// X and Y, and a Y wider than W so that untouched columns can be checked.
func TestMatmulKernel(t *testing.T) {
	for _, shape := range [][2]int{{70, 3}, {300, 1}, {300, 11}} {
		for f := shaders.F32; f <= shaders.Q4; f++ {
			t.Run(fmt.Sprintf("%s/cols%d/T%d", f, shape[0], shape[1]), func(t *testing.T) {
				testMatmul(t, f, shape[0], shape[1])
			})
		}
	}
}

func testMatmul(t *testing.T, f shaders.Format, cols, T int) {
	dev := nativetest.Device(t)
	const rows, ldy, xOff, yOff = 130, 132, 5, 7
	r := rnd(f + 1)
	w := r.fill(rows*cols, 0.5)
	w[17] = 4 // an outlier
	x := append(make([]float32, xOff), r.fill(T*cols, 1)...)
	bias := r.fill(rows, 0.1)
	y := buf(t, dev, make([]float32, yOff+T*ldy))
	xb, bb := buf(t, dev, x), buf(t, dev, bias)
	deq := make([]float32, 0, rows*cols)
	for _, piece := range [][2]int{{0, 64}, {64, rows}} {
		n := piece[1] - piece[0]
		raw, d := encode(t, f, w[piece[0]*cols:piece[1]*cols], n, cols)
		deq = append(deq, d...)
		base, _ := Piece{Rows: n, Cols: cols, Format: f}.scaleBase()
		p := buf(t, dev, params(n, cols, (cols+31)/32, base, ldy, piece[0], yOff, 1, xOff))
		dispatch(t, dev, shaders.Matmul(f, shaders.MatmulVariant{}), "main", []gpu.Buffer{buf(t, dev, raw), xb, y, bb, p}, ceilDiv(n, shaders.MatmulVariant{}.Rows()), 1, uint32(T))
	}
	got := read(t, dev, y, yOff+T*ldy)
	var want []float64
	var gotVals []float32
	for tk := 0; tk < T; tk++ {
		for n := 0; n < ldy; n++ {
			v := 0.0
			if n < rows {
				v = float64(bias[n])
				for k := 0; k < cols; k++ {
					v += float64(deq[n*cols+k]) * float64(x[xOff+tk*cols+k])
				}
			}
			want = append(want, v)
			gotVals = append(gotVals, got[yOff+tk*ldy+n])
		}
	}
	nmse, maxAbs := errors(gotVals, want)
	t.Logf("%s cols %d T %d: NMSE %.2e, max abs %.2e", f, cols, T, nmse, maxAbs)
	if nmse > 1e-10 || maxAbs > 1e-4 {
		t.Fatalf("matmul %s: NMSE %g, max abs %g", f, nmse, maxAbs)
	}
	for i := 0; i < yOff; i++ {
		if got[i] != 0 {
			t.Fatal("wrote before y_off")
		}
	}
}

// Rows of E gathered by id across two pieces equal the CPU engine's
// decoded rows exactly.
func TestEmbedKernel(t *testing.T) {
	dev := nativetest.Device(t)
	const rows, cols = 100, 70
	ids := []uint32{3, 99, 50, 49, 0}
	for f := shaders.F32; f <= shaders.Q4; f++ {
		t.Run(f.String(), func(t *testing.T) {
			r := rnd(f + 11)
			w := r.fill(rows*cols, 1)
			out := buf(t, dev, make([]float32, len(ids)*cols))
			idb := buf(t, dev, ids)
			deq := make([]float32, 0, rows*cols)
			for _, piece := range [][2]int{{0, 50}, {50, rows}} {
				n := piece[1] - piece[0]
				raw, d := encode(t, f, w[piece[0]*cols:piece[1]*cols], n, cols)
				deq = append(deq, d...)
				base, _ := Piece{Rows: n, Cols: cols, Format: f}.scaleBase()
				p := buf(t, dev, params(n, cols, (cols+31)/32, base, piece[0]))
				dispatch(t, dev, shaders.Embed(f), "main", []gpu.Buffer{buf(t, dev, raw), idb, out, 0, p}, 1, uint32(len(ids)), 1)
			}
			got := read(t, dev, out, len(ids)*cols)
			for i, id := range ids {
				for k := 0; k < cols; k++ {
					if got[i*cols+k] != deq[int(id)*cols+k] {
						t.Fatalf("token %d col %d: %g, want %g", id, k, got[i*cols+k], deq[int(id)*cols+k])
					}
				}
			}
		})
	}
}

func TestRMSNormKernel(t *testing.T) {
	dev := nativetest.Device(t)
	const d, T, eps = 70, 3, 1e-6
	r := rnd(5)
	x := r.fill((T+1)*d, 3)
	w := r.fill(d, 1)
	out := buf(t, dev, make([]float32, T*d))
	dispatch(t, dev, shaders.RMSNorm(), "main", []gpu.Buffer{buf(t, dev, x), buf(t, dev, w), out, buf(t, dev, params(d, float32(eps), d, 0))}, T, 1, 1)
	got := read(t, dev, out, T*d)
	var want []float64
	for tk := 1; tk <= T; tk++ {
		var ss float64
		for _, v := range x[tk*d : (tk+1)*d] {
			ss += float64(v) * float64(v)
		}
		rs := 1 / math.Sqrt(ss/d+eps)
		for i, v := range x[tk*d : (tk+1)*d] {
			want = append(want, float64(w[i])*float64(v)*rs)
		}
	}
	check(t, "rmsnorm", got, want, 1e-12, 1e-5)
}

// The in-place entry normalizes rows of hd (Qwen3's heads) where they lie,
// as in a KV cache slot: rows from x_off on, everything around them left
// as it was. hd below, above and not a multiple of the workgroup.
func TestRMSNormInPlaceKernel(t *testing.T) {
	dev := nativetest.Device(t)
	for _, hd := range []int{32, 70, 128} {
		t.Run(fmt.Sprint("hd", hd), func(t *testing.T) {
			const rows, before, after, eps = 6, 2, 3, 1e-6 // e.g. 3 tokens × 2 KV heads after 1 cached token
			r := rnd(7)
			x := r.fill((before+rows+after)*hd, 3)
			w := r.fill(hd, 1)
			xb := buf(t, dev, x)
			dispatch(t, dev, shaders.RMSNorm(), "in_place", []gpu.Buffer{0, buf(t, dev, w), xb, buf(t, dev, params(hd, float32(eps), before*hd, 0))}, rows, 1, 1)
			got := read(t, dev, xb, len(x))
			want := make([]float64, len(x))
			for i, v := range x {
				want[i] = float64(v)
			}
			for row := before; row < before+rows; row++ {
				v := want[row*hd : (row+1)*hd]
				var ss float64
				for _, e := range v {
					ss += e * e
				}
				rs := 1 / math.Sqrt(ss/float64(hd)+eps)
				for i := range v {
					v[i] *= float64(w[i]) * rs
				}
			}
			check(t, "rmsnorm in place", got, want, 1e-12, 1e-5)
		})
	}
}

// RoPE on whole heads and, as GLM-4.5's partial_rotary_factor 0.5 asks,
// on each head's first half, the rest left as it was.
func TestRoPEKernel(t *testing.T) {
	dev := nativetest.Device(t)
	for _, rotary := range []int{0, 8} {
		g := model.Geometry{HeadDim: 16, RotaryDim: rotary, RopeTheta: 1e6}
		t.Run(fmt.Sprint("rotary", g.RopeDim()), func(t *testing.T) {
			// q: 3 heads a row from element 0; k: 2 heads a row of 40 from
			// element 7 (a KV cache's rows from a position on).
			const heads, kHeads, T, pos0, kOff, kLd = 3, 2, 3, 5, 7, 40
			ld, rd := heads*g.HeadDim, g.RopeDim()
			inv := g.InvFreq()
			var tab []float32
			for pos := 0; pos < pos0+T; pos++ {
				for _, f := range inv {
					c, s := model.Rotation(pos, f)
					tab = append(tab, c, s)
				}
			}
			r := rnd(9)
			q, k := r.fill(T*ld, 1), r.fill(kOff+T*kLd, 1)
			qb, kb := buf(t, dev, q), buf(t, dev, k)
			groups := ceilDiv((heads+kHeads)*rd/2, shaders.Workgroup)
			dispatch(t, dev, shaders.RoPE(), "main", []gpu.Buffer{qb, buf(t, dev, tab), buf(t, dev, params(heads, g.HeadDim, pos0, 0, ld, kHeads, kOff, kLd, rd)), kb}, groups, T, 1)
			half := rd / 2
			// want rotates the first rd values of v's heads a row of ld
			// from off; the rest stays.
			want := func(v []float32, heads, off, ld int) []float64 {
				out := make([]float64, len(v))
				for i, x := range v {
					out[i] = float64(x)
				}
				for tk := 0; tk < T; tk++ {
					for h := 0; h < heads; h++ {
						for i := 0; i < half; i++ {
							c, s := float64(tab[((pos0+tk)*half+i)*2]), float64(tab[((pos0+tk)*half+i)*2+1])
							a := off + tk*ld + h*g.HeadDim + i
							x1, x2 := float64(v[a]), float64(v[a+half])
							out[a], out[a+half] = x1*c-x2*s, x2*c+x1*s
						}
					}
				}
				return out
			}
			check(t, "rope q", read(t, dev, qb, len(q)), want(q, heads, 0, ld), 1e-12, 1e-6)
			check(t, "rope k", read(t, dev, kb, len(k)), want(k, kHeads, kOff, kLd), 1e-12, 1e-6)
		})
	}
}

// Grouped-query attention for a 3-token chunk at position 5 of the cache,
// over every earlier position and over a sliding window of 4.
func TestAttentionKernel(t *testing.T) {
	dev := nativetest.Device(t)
	const heads, kvh, hd, pos0, T, capacity = 4, 2, 16, 5, 3, 10
	qd, kvd := heads*hd, kvh*hd
	r := rnd(13)
	q := r.fill(T*qd, 1)
	k := r.fill(capacity*kvd, 1)
	v := r.fill(capacity*kvd, 1)
	scale := float32(1 / math.Sqrt(hd))
	for _, window := range []int{0, 4} {
		out := buf(t, dev, make([]float32, T*qd))
		scores := buf(t, dev, make([]float32, T*heads*capacity))
		dispatch(t, dev, shaders.Attention(), "main", []gpu.Buffer{buf(t, dev, q), buf(t, dev, k), buf(t, dev, v), out, scores,
			buf(t, dev, params(heads, kvh, hd, pos0, capacity, scale, window))}, heads, T, 1)
		got := read(t, dev, out, T*qd)
		want := make([]float64, T*qd)
		for tk := 0; tk < T; tk++ {
			for h := 0; h < heads; h++ {
				n, kv := pos0+tk+1, (h/(heads/kvh))*hd
				first := 0
				if window > 0 {
					first = n - window
				}
				s := make([]float64, n)
				mx := math.Inf(-1)
				for j := first; j < n; j++ {
					for i := 0; i < hd; i++ {
						s[j] += float64(q[tk*qd+h*hd+i]) * float64(k[j*kvd+kv+i])
					}
					s[j] *= float64(scale)
					mx = math.Max(mx, s[j])
				}
				var z float64
				for j := first; j < n; j++ {
					s[j] = math.Exp(s[j] - mx)
					z += s[j]
				}
				for i := 0; i < hd; i++ {
					for j := first; j < n; j++ {
						want[tk*qd+h*hd+i] += s[j] / z * float64(v[j*kvd+kv+i])
					}
				}
			}
		}
		check(t, fmt.Sprintf("attention (window %d)", window), got, want, 1e-11, 1e-5)
	}
}

func TestElementwiseKernels(t *testing.T) {
	dev := nativetest.Device(t)
	const n = 1000 // not a multiple of 64
	r := rnd(17)
	a, b := r.fill(n, 4), r.fill(n, 2)
	for _, entry := range []string{"add", "silu_mul"} {
		ab := buf(t, dev, a)
		dispatch(t, dev, shaders.Elementwise(), entry, []gpu.Buffer{ab, buf(t, dev, b), buf(t, dev, params(n))}, (n+63)/64, 1, 1)
		got := read(t, dev, ab, n)
		want := make([]float64, n)
		for i := range want {
			x, y := float64(a[i]), float64(b[i])
			if entry == "add" {
				want[i] = x + y
			} else {
				want[i] = x / (1 + math.Exp(-x)) * y
			}
		}
		check(t, entry, got, want, 1e-12, 1e-5)
	}
}

// Gemma3RMSNorm's (1 + w), on both entry points, against float64: rows
// of d = 70 from x_off on (main writes them to out's top; in_place
// rewrites them where they lie).
func TestRMSNormUnitKernel(t *testing.T) {
	dev := nativetest.Device(t)
	const d, T, eps = 70, 3, 1e-6
	r := rnd(19)
	x := r.fill((T+1)*d, 3)
	w := r.fill(d, 0.5) // around 0, as Gemma's norms are stored
	var want []float64  // (T, d): rows 1..T of x normalized
	for tk := 1; tk <= T; tk++ {
		var ss float64
		for _, v := range x[tk*d : (tk+1)*d] {
			ss += float64(v) * float64(v)
		}
		rs := 1 / math.Sqrt(ss/d+eps)
		for i, v := range x[tk*d : (tk+1)*d] {
			want = append(want, (1+float64(w[i]))*float64(v)*rs)
		}
	}
	for _, entry := range []string{"main", "in_place"} {
		t.Run(entry, func(t *testing.T) {
			xb, out := buf(t, dev, x), buf(t, dev, make([]float32, T*d))
			bindings := []gpu.Buffer{xb, buf(t, dev, w), out, buf(t, dev, params(d, float32(eps), d, 0, 1))}
			first := 0 // where the normalized rows lie in what is read back
			if entry == "in_place" {
				bindings[0], bindings[2], out, first = 0, xb, xb, d
			}
			dispatch(t, dev, shaders.RMSNorm(), entry, bindings, T, 1, 1)
			check(t, "rmsnorm (1 + w) "+entry, read(t, dev, out, first+T*d)[first:], want, 1e-12, 1e-5)
		})
	}
}

// Gemma's GELU-tanh gated product and the embedding scale against float64:
// gelu_pytorch_tanh written with tanh, over ordinary values and ones that
// saturate it (±30, ±1e4, where an exp or a tanh could overflow).
func TestGemmaElementwiseKernels(t *testing.T) {
	dev := nativetest.Device(t)
	const n = 1000 // not a multiple of 64
	r := rnd(23)
	a, b := r.fill(n, 6), r.fill(n, 2)
	copy(a, []float32{-1e4, 1e4, -30, 30, 0, -0.5})
	const scale = 9.8125
	for _, c := range []struct {
		entry string
		p     []uint32
		want  func(x, y float64) float64
	}{
		{"gelu_tanh_mul", params(n), func(x, y float64) float64 {
			return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))) * y
		}},
		{"scale", params(n, float32(scale)), func(x, _ float64) float64 { return x * scale }},
	} {
		t.Run(c.entry, func(t *testing.T) {
			ab := buf(t, dev, a)
			bindings := []gpu.Buffer{ab, buf(t, dev, b), buf(t, dev, c.p)}
			if c.entry == "scale" {
				bindings[1] = 0 // scale reads no b
			}
			dispatch(t, dev, shaders.Elementwise(), c.entry, bindings, (n+63)/64, 1, 1)
			got := read(t, dev, ab, n)
			want := make([]float64, n)
			var top float64
			for i := range want {
				want[i] = c.want(float64(a[i]), float64(b[i]))
				top = max(top, math.Abs(want[i]))
			}
			// float32 rounding, relative to the largest value (≈ 2e4)
			check(t, c.entry, got, want, 1e-12, 1e-7*top)
		})
	}
}

func check(t *testing.T, name string, got []float32, want []float64, maxNMSE, maxAbs float64) {
	t.Helper()
	nmse, abs := errors(got, want)
	t.Logf("%s: NMSE %.2e, max abs %.2e", name, nmse, abs)
	if nmse > maxNMSE || abs > maxAbs {
		t.Fatal(fmt.Sprintf("%s: NMSE %g (limit %g), max abs %g (limit %g)", name, nmse, maxNMSE, abs, maxAbs))
	}
}

// The route kernel against float64: softmax, the K most probable experts
// (the lower id first among equal probabilities), renormalized or not;
// the scratch in increasing id order, the wanted rows' route tails in
// probability order, the rest of the logit rows untouched. Cases: E below
// and above the workgroup, ties inside the top K and across its edge.
func TestRouteKernel(t *testing.T) {
	dev := nativetest.Device(t)
	const sentinel = -7
	for _, c := range []struct {
		name        string
		E, K, T     int
		norm        bool
		rows        int       // the last rows tokens have logit rows
		row0        []float32 // token 0's router logits, when set
		wantLeading []int     // token 0's picks, most probable first, when set
	}{
		{name: "qwen3-like", E: 8, K: 2, T: 3, norm: true, rows: 3},
		{name: "no-norm-last-row", E: 6, K: 3, T: 4, rows: 1},
		{name: "wide", E: 130, K: 8, T: 2, norm: true, rows: 2},
		// Token 0: experts 1 and 4 tie for first, 2 and 5 for third with
		// room for one: 1, 4, then 2.
		{name: "ties", E: 6, K: 3, T: 2, rows: 2, row0: []float32{0, 5, 2, -1, 5, 2}, wantLeading: []int{1, 4, 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := rnd(c.E*100 + c.K)
			logits := r.fill(c.T*c.E, 3)
			copy(logits, c.row0)
			const vocab, col = 10, 10 // one sparse layer: the tail starts right after the logits
			ldl := vocab + c.K
			out := make([]float32, c.rows*ldl)
			for i := range out {
				out[i] = sentinel
			}
			rb, ids, wts, ob := buf(t, dev, logits), buf(t, dev, make([]uint32, c.T*c.K)), buf(t, dev, make([]float32, c.T*c.K)), buf(t, dev, out)
			norm := 0
			if c.norm {
				norm = 1
			}
			p := buf(t, dev, params(c.E, c.K, norm, c.T-c.rows, ldl, col, 0, 0, 0, 0, float32(1), 0))
			dispatch(t, dev, shaders.MoE(), "route", []gpu.Buffer{rb, ids, wts, ob, 0, 0, 0, p, buf(t, dev, make([]float32, 1))}, uint32(c.T), 1, 1)
			gotIDs, gotW, gotOut := read(t, dev, ids, c.T*c.K), read(t, dev, wts, c.T*c.K), read(t, dev, ob, len(out))
			for tk := 0; tk < c.T; tk++ {
				pick, w := refRoute(logits[tk*c.E:(tk+1)*c.E], c.K, c.norm)
				if tk == 0 && c.wantLeading != nil && !slices.Equal(pick, c.wantLeading) {
					t.Fatalf("reference picks %v, want %v", pick, c.wantLeading)
				}
				byID := slices.Clone(pick)
				slices.Sort(byID)
				for j, e := range byID {
					i := tk*c.K + j
					if got := math.Float32bits(gotIDs[i]); got != uint32(e) {
						t.Fatalf("token %d slot %d: expert %d, want %d (picks %v)", tk, j, got, e, pick)
					}
					want := w[slices.Index(pick, e)]
					if d := math.Abs(float64(gotW[i]) - want); d > 1e-6 {
						t.Fatalf("token %d expert %d: weight %g, want %g", tk, e, gotW[i], want)
					}
				}
				if row := tk - (c.T - c.rows); row >= 0 {
					for j, e := range pick {
						if got := gotOut[row*ldl+col+j]; got != float32(e) {
							t.Fatalf("token %d route tail %d: %g, want %d", tk, j, got, e)
						}
					}
					for j := 0; j < vocab; j++ {
						if gotOut[row*ldl+j] != sentinel {
							t.Fatalf("row %d: logit %d overwritten", row, j)
						}
					}
				}
			}
		})
	}
}

// GLM-4.5's grouped sigmoid router against the CPU engine's
// (cpu.RouteGrouped): the same experts in the same order, in the logit
// rows' route tails and (sorted by id) in the scratch, weights within
// 1e-6. Cases: one group (GLM-4.5-Air), groups where the top-2 sums
// decide, experts beyond the workgroup, ties, and a bias negative enough
// that the 0.0 mask wins, each with norm_topk_prob on or off and a scale.
func TestRouteGroupedKernel(t *testing.T) {
	dev := nativetest.Device(t)
	for _, c := range []struct {
		name                 string
		E, K, groups, keep   int
		norm                 bool
		scale                float32
		biasMean, biasSpread float32
		tie                  bool // token 0's logits take few distinct values
	}{
		{name: "air-like", E: 128, K: 8, groups: 1, keep: 1, norm: true, scale: 1, biasSpread: 0.1},
		{name: "grouped", E: 16, K: 3, groups: 4, keep: 2, norm: true, scale: 2.5, biasSpread: 0.1},
		{name: "deepseek-like", E: 256, K: 8, groups: 8, keep: 4, norm: true, scale: 2.5, biasSpread: 0.05},
		{name: "no-norm", E: 12, K: 4, groups: 3, keep: 1, scale: 1.5, biasSpread: 0.2},
		{name: "ties", E: 16, K: 5, groups: 4, keep: 3, norm: true, scale: 1, tie: true},
		{name: "negative-bias", E: 8, K: 3, groups: 2, keep: 1, scale: 1, biasMean: -2, biasSpread: 0.1},
	} {
		t.Run(c.name, func(t *testing.T) {
			const T, rows = 4, 3
			r := rnd(c.E*10 + c.K)
			logits := r.fill(T*c.E, 2)
			if c.tie {
				for e := 0; e < c.E; e++ {
					logits[e] = float32(e % 3)
				}
			}
			bias := r.fill(c.E, c.biasSpread)
			for e := range bias {
				bias[e] += c.biasMean
			}
			const vocab = 10
			ldl := vocab + c.K
			rb, ids, wts := buf(t, dev, logits), buf(t, dev, make([]uint32, T*c.K)), buf(t, dev, make([]float32, T*c.K))
			ob := buf(t, dev, make([]float32, rows*ldl))
			norm := 0
			if c.norm {
				norm = 1
			}
			p := buf(t, dev, params(c.E, c.K, norm, T-rows, ldl, vocab, 0, 0, c.groups, c.keep, c.scale, 0))
			dispatch(t, dev, shaders.MoE(), "route_grouped", []gpu.Buffer{rb, ids, wts, ob, 0, 0, 0, p, buf(t, dev, bias)}, T, 1, 1)
			gotIDs, gotW, gotOut := read(t, dev, ids, T*c.K), read(t, dev, wts, T*c.K), read(t, dev, ob, rows*ldl)
			g := model.Geometry{Groups: c.groups, TopKGroup: c.keep, TopK: c.K, NormTopK: c.norm, RoutedScale: c.scale}
			for tk := 0; tk < T; tk++ {
				pick, w := cpu.RouteGrouped(slices.Clone(logits[tk*c.E:(tk+1)*c.E]), bias, g)
				if row := tk - (T - rows); row >= 0 {
					for j, e := range pick {
						if got := gotOut[row*ldl+vocab+j]; got != float32(e) {
							t.Fatalf("token %d route tail %v, CPU %v", tk, gotOut[row*ldl+vocab:(row+1)*ldl], pick)
						}
					}
				}
				byID := slices.Clone(pick)
				slices.Sort(byID)
				for j, e := range byID {
					i := tk*c.K + j
					if got := math.Float32bits(gotIDs[i]); got != uint32(e) {
						t.Fatalf("token %d slot %d: expert %d, CPU %d (picks %v)", tk, j, got, e, pick)
					}
					if want := w[slices.Index(pick, e)]; math.Abs(float64(gotW[i]-want)) > 1e-6 {
						t.Fatalf("token %d expert %d: weight %g, CPU %g", tk, e, gotW[i], want)
					}
				}
			}
		})
	}
}

// refRoute is the router in float64: the k most probable experts, most
// probable first (the lower id among equals), and their weights.
func refRoute(logits []float32, k int, norm bool) ([]int, []float64) {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, float64(v))
	}
	p := make([]float64, len(logits))
	var z float64
	for i, v := range logits {
		p[i] = math.Exp(float64(v) - mx)
		z += p[i]
	}
	order := make([]int, len(p))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case p[a] > p[b]:
			return -1
		case p[a] < p[b]:
			return 1
		}
		return 0
	})
	pick := order[:k]
	w := make([]float64, k)
	var sum float64
	for j, e := range pick {
		w[j] = p[e] / z
		sum += w[j]
	}
	if norm {
		for j := range w {
			w[j] /= sum
		}
	}
	return pick, w
}

// combine: O = Σ_k w·y over each token's slots, plus the shared expert
// behind its sigmoid gate (Qwen2-MoE) or ungated (GLM) when there is one.
func TestCombineKernel(t *testing.T) {
	dev := nativetest.Device(t)
	const T, K, d = 3, 3, 70
	r := rnd(29)
	ys, w, shared, sg := r.fill(T*K*d, 2), r.fill(T*K, 0.5), r.fill(T*d, 2), r.fill(T, 3)
	for _, hasShared := range []int{0, 1, 2} { // none, gated (Qwen2-MoE), ungated (GLM)
		t.Run(fmt.Sprint("shared", hasShared), func(t *testing.T) {
			out := buf(t, dev, make([]float32, T*d))
			p := buf(t, dev, params(0, K, 0, 0, 0, 0, d, hasShared, 0, 0, float32(1), 0))
			dispatch(t, dev, shaders.MoE(), "combine", []gpu.Buffer{0, 0, buf(t, dev, w), out, buf(t, dev, ys), buf(t, dev, shared), buf(t, dev, sg), p},
				(d+63)/64, T, 1)
			want := make([]float64, T*d)
			for tk := 0; tk < T; tk++ {
				for c := 0; c < d; c++ {
					for k := 0; k < K; k++ {
						want[tk*d+c] += float64(w[tk*K+k]) * float64(ys[(tk*K+k)*d+c])
					}
					switch hasShared {
					case 1:
						want[tk*d+c] += float64(shared[tk*d+c]) / (1 + math.Exp(-float64(sg[tk])))
					case 2:
						want[tk*d+c] += float64(shared[tk*d+c])
					}
				}
			}
			check(t, "combine", read(t, dev, out, T*d), want, 1e-12, 1e-5)
		})
	}
}

// The expert entry points of matmul: 5 experts of W (41, cols) in every
// format, each split into two row-pieces, the experts of each piece in two
// banks ([0, 3) and [3, 5)); 3 tokens routed to 2 experts each, expert 2
// to none. cols 75 (odd rows and columns: 16-bit rows start mid-word, a
// bf16 expert is not a whole number of words) through expert, and 96
// through expert and expert4 (software adapters), which must agree bit
// for bit. Both input layouts: one X row per token (gate, up) and one per
// (token, slot) (down). Every (token, slot) row of Y is the routed
// expert's product; the columns past the matrix stay 0.
func TestExpertMatmulKernel(t *testing.T) {
	const E, rows, T, K, ldy = 5, 41, 3, 2, 44
	route := []uint32{1, 4, 0, 3, 3, 4}
	banks := [][2]int{{0, 3}, {3, 5}}
	pieces := [][2]int{{0, 24}, {24, rows}}
	dev := nativetest.Device(t)
	for f := shaders.F32; f <= shaders.Q4; f++ {
		for _, c := range [][2]int{{75, 0}, {75, 1}, {96, 0}, {96, 1}} {
			cols, perSlot := c[0], c[1]
			t.Run(fmt.Sprintf("%s/cols%d/x_slot%d", f, cols, perSlot), func(t *testing.T) {
				r := rnd(f + 31)
				xRows := T
				if perSlot == 1 {
					xRows = T * K
				}
				x := r.fill(xRows*cols, 1)
				w := make([][]float32, E)   // expert e's W
				deq := make([][]float32, E) // as the CPU engine decodes it
				for e := range w {
					w[e] = r.fill(rows*cols, 0.5)
					deq[e] = make([]float32, 0, rows*cols)
				}
				xb, rb := buf(t, dev, x), buf(t, dev, route)
				type bankRun struct {
					n            int
					bank, params gpu.Buffer
				}
				var runs []bankRun
				for _, pc := range pieces {
					n := pc[1] - pc[0]
					raws := make([][]byte, E)
					for e := range w {
						raw, dq := encode(t, f, w[e][pc[0]*cols:pc[1]*cols], n, cols)
						raws[e], deq[e] = raw, append(deq[e], dq...)
					}
					stride := (len(raws[0]) + 3) / 4 * 4
					base, _ := Piece{Rows: n, Cols: cols, Format: f}.scaleBase()
					for _, bk := range banks {
						var bank []byte
						for e := bk[0]; e < bk[1]; e++ {
							bank = append(bank, raws[e]...)
							bank = append(bank, make([]byte, stride-len(raws[e]))...)
						}
						p := buf(t, dev, params(n, cols, (cols+31)/32, base, ldy, pc[0], 0, 0, 0, bk[0], bk[1]-bk[0], stride/4, K, perSlot))
						runs = append(runs, bankRun{n, buf(t, dev, bank), p})
					}
				}
				// run dispatches every bank through entry into a zeroed Y.
				run := func(entry string, perGroup int, v shaders.MatmulVariant) []float32 {
					y := buf(t, dev, make([]float32, T*K*ldy))
					for _, r := range runs {
						dispatch(t, dev, shaders.Matmul(f, v), entry, []gpu.Buffer{r.bank, xb, y, 0, r.params, rb}, ceilDiv(r.n, perGroup), K, T)
					}
					return read(t, dev, y, T*K*ldy)
				}
				got := run("expert", shaders.MatmulVariant{}.Rows(), shaders.MatmulVariant{})
				// A row's lanes added in a subgroup: the same bits.
				for i, g := range run("expert", shaders.MatmulVariant{}.Rows(), shaders.MatmulVariant{Subgroups: true}) {
					if math.Float32bits(g) != math.Float32bits(got[i]) {
						t.Fatalf("expert with subgroups: element %d is %g, without %g", i, g, got[i])
					}
				}
				if cols%32 == 0 {
					for i, g := range run("expert4", shaders.MatmulVariant{}.Rows4(), shaders.MatmulVariant{}) {
						if math.Float32bits(g) != math.Float32bits(got[i]) {
							t.Fatalf("expert4: element %d is %g, expert's %g", i, g, got[i])
						}
					}
				}
				var want []float64
				var gotVals []float32
				for tk := 0; tk < T; tk++ {
					for k := 0; k < K; k++ {
						e, slot := int(route[tk*K+k]), tk*K+k
						xr := x[tk*cols : (tk+1)*cols]
						if perSlot == 1 {
							xr = x[slot*cols : (slot+1)*cols]
						}
						for n := 0; n < ldy; n++ {
							v := 0.0
							if n < rows {
								for c := 0; c < cols; c++ {
									v += float64(deq[e][n*cols+c]) * float64(xr[c])
								}
							}
							want = append(want, v)
							gotVals = append(gotVals, got[slot*ldy+n])
						}
					}
				}
				nmse, maxAbs := errors(gotVals, want)
				t.Logf("expert %s x_slot %d: NMSE %.2e, max abs %.2e", f, perSlot, nmse, maxAbs)
				if nmse > 1e-10 || maxAbs > 1e-4 {
					t.Fatalf("expert matmul %s: NMSE %g, max abs %g", f, nmse, maxAbs)
				}
			})
		}
	}
}

// main8 and rows4x8, the prefill paths (eight tokens per invocation, each
// group of W decoded once), must give each token's row bit for bit what
// main or rows4 (decode) gives that token alone, as KV-cache decode =
// teacher forcing requires. Through the engine's own ops (on lavapipe, a
// software adapter: rows4 and rows4x8 where cols is a multiple of 32), a
// T-token product (T = 1..9, 17, 32; 1..7, 9 and 17 leave the last slice
// of eight short) against the T one-token products (steps of T = 1 at
// positions 0..T-1); and below manyFrom each entry point dispatched
// directly (rows4 and rows4x8 only where cols is a multiple of 32). For
// every format, 130 rows (two workgroups of main8, the second short; a
// short last quad of rows4), columns that give main's LANES lanes none,
// one or several groups (75, 603 and 608 for the float and quant formats:
// a short last group, 16-bit rows starting mid-word, whole groups), a
// bias; at 603 columns the engine's workgroups are of other sizes than
// the entry points'. The one-token rows are checked against float64
// first, so that two wrong kernels cannot agree. Everything of Y but the
// T rows' first 130 columns keeps its sentinel.
func TestMatmul8Kernel(t *testing.T) {
	dev := nativetest.Device(t)
	const rows, ldy, xOff, yOff, maxT, sentinel = 130, 133, 5, 7, 32, -7
	type shape struct {
		f    shaders.Format
		cols int
	}
	var shapes []shape
	for f := shaders.F32; f <= shaders.Q6_K; f++ {
		if ty, ok := f.GGML(); ok {
			cols := ggmlCols(ty)
			if ty.BlockSize() == 32 {
				cols = 32 * 19
			}
			shapes = append(shapes, shape{f, cols})
			continue
		}
		shapes = append(shapes, shape{f, 75}, shape{f, 603}, shape{f, 608})
	}
	for _, sh := range shapes {
		f, cols := sh.f, sh.cols
		t.Run(fmt.Sprintf("%s/cols%d", f, cols), func(t *testing.T) {
			r := rnd(f + 21)
			var data []byte
			var deq []float32
			if ty, ok := f.GGML(); ok {
				data, deq = randomBlocks(ty, rows*cols, rand.New(rand.NewPCG(21, uint64(ty))), true), make([]float32, rows*cols)
				if err := ggml.Dequantize(ty, data, deq); err != nil {
					t.Fatal(err)
				}
			} else {
				data, deq = encode(t, f, r.fill(rows*cols, 0.5), rows, cols)
			}
			file, off := ggmlFile(t, data)
			piece := Piece{Rows: rows, Cols: cols, Format: f, File: file, Offset: off, Length: int64(len(data))}
			w := matrix{pieces: []Piece{piece}, bufs: uploadPieces(t, dev, []Piece{piece})}
			x := append(make([]float32, xOff), r.fill(maxT*cols, 1)...)
			bias := r.fill(rows, 0.1)
			xb, bb := buf(t, dev, x), buf(t, dev, bias)
			blank := slices.Repeat([]float32{sentinel}, yOff+maxT*ldy)

			// A step's tokens start at token pos0 of X and row pos0 of Y.
			// At 603 columns (main and main8 on every adapter) the engine
			// takes the smallest workgroups for one token and the largest
			// for eight, the entry points below the default size: the
			// same bits.
			e := &State{dev: dev, pipes: map[string]gpu.Pipeline{}}
			if cols == 603 {
				e.wg = sizes{workgroupSizes[0], workgroupSizes[len(workgroupSizes)-1]}
			}
			t.Cleanup(e.Close)
			e.none = buf(t, dev, []float32{float32(math.NaN())})
			e.ids = buf(t, dev, make([]uint32, maxT))
			y := buf(t, dev, blank)
			xAt := func(s step) int { return xOff + s.pos0*cols }
			yAt := func(s step) int { return yOff + s.pos0*ldy }
			if err := e.finish(e.matmulOps("w", w, xb, xAt, y, yAt, ldy, bb, func(s step) int { return s.T })); err != nil {
				t.Fatal(err)
			}
			for tk := range maxT {
				runStep(t, e, step{T: 1, pos0: tk})
			}
			one := read(t, dev, y, len(blank))
			var want []float64
			var got []float32
			for tk := range maxT {
				for n := range rows {
					v := float64(bias[n])
					for k := range cols {
						v += float64(deq[n*cols+k]) * float64(x[xOff+tk*cols+k])
					}
					want = append(want, v)
					got = append(got, one[yOff+tk*ldy+n])
				}
			}
			if nmse, maxAbs := errors(got, want); nmse > 1e-10 {
				t.Fatalf("one token at a time: NMSE %g, max abs %g against float64", nmse, maxAbs)
			}

			// T tokens' rows must be the one-token rows, bit for bit, and
			// nothing else of Y written.
			check := func(T int, how string) {
				t.Helper()
				for i, g := range read(t, dev, y, len(blank)) {
					if tk, n := (i-yOff)/ldy, (i-yOff)%ldy; i < yOff || tk >= T || n >= rows {
						if g != sentinel {
							t.Fatalf("%s, T %d: wrote %g at element %d, outside the T rows", how, T, g, i)
						}
						continue
					}
					if math.Float32bits(g) != math.Float32bits(one[i]) {
						t.Fatalf("%s, T %d: token %d row %d is %g (%#08x), alone %g (%#08x)", how, T, (i-yOff)/ldy, (i-yOff)%ldy,
							g, math.Float32bits(g), one[i], math.Float32bits(one[i]))
					}
				}
			}
			reset := func() {
				if err := dev.WriteBuffer(y, 0, bytesOf(blank)); err != nil {
					t.Fatal(err)
				}
			}
			// Below manyFrom the engine takes main or rows4: each entry
			// point itself too, compiled once, its params rewritten per T.
			base, _ := piece.scaleBase()
			paramsFor := func(T int) []uint32 {
				return params(rows, cols, (cols+31)/32, base, ldy, 0, yOff, 1, xOff, 0, 0, 0, 0, 0, 0, T)
			}
			pb := buf(t, dev, paramsFor(1))
			type entry struct {
				entry   string
				perZ    int // tokens per workgroup along z
				perRows int // rows per workgroup
				pipe    gpu.Pipeline
				group   gpu.BindGroup
			}
			direct := []entry{{entry: "main", perZ: 1, perRows: shaders.MatmulVariant{}.Rows()},
				{entry: "main8", perZ: shaders.MatmulTokens, perRows: shaders.Workgroup}}
			if cols%32 == 0 {
				direct = append(direct, entry{entry: "rows4", perZ: 1, perRows: shaders.MatmulVariant{}.Rows4()},
					entry{entry: "rows4x8", perZ: shaders.MatmulTokens, perRows: shaders.MatmulVariant{}.Rows4()})
			}
			for i := range direct {
				direct[i].pipe, direct[i].group = bound(t, dev, shaders.Matmul(f, shaders.MatmulVariant{}), direct[i].entry, []gpu.Buffer{w.bufs[0], xb, y, bb, pb})
			}
			for _, T := range []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 17, maxT} {
				reset()
				runStep(t, e, step{T: T})
				check(T, "engine")
				if T >= manyFrom {
					continue
				}
				if err := dev.WriteBuffer(pb, 0, bytesOf(paramsFor(T))); err != nil {
					t.Fatal(err)
				}
				for _, d := range direct {
					reset()
					submit(t, dev, d.pipe, d.group, ceilDiv(rows, d.perRows), 1, ceilDiv(T, d.perZ))
					check(T, d.entry)
				}
			}
		})
	}
}
