package gpuengine

import (
	"fmt"
	"math"
	"testing"

	"logitscope/gpu"
	"logitscope/gpu/native/nativetest"
	"logitscope/model"
	"logitscope/quant"
	"logitscope/safetensors"
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
		dispatch(t, dev, shaders.Matmul(f), "main", []gpu.Buffer{buf(t, dev, raw), xb, y, bb, p}, uint32(n+shaders.MatmulRows-1)/shaders.MatmulRows, 1, uint32(T))
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

func TestRoPEKernel(t *testing.T) {
	dev := nativetest.Device(t)
	g := model.Geometry{HeadDim: 16, RopeTheta: 1e6}
	const heads, T, pos0 = 3, 3, 5
	ld := heads * g.HeadDim
	inv := g.InvFreq()
	var tab []float32
	for pos := 0; pos < pos0+T; pos++ {
		for _, f := range inv {
			c, s := model.Rotation(pos, f)
			tab = append(tab, c, s)
		}
	}
	r := rnd(9)
	v := r.fill(T*ld, 1)
	vb := buf(t, dev, v)
	dispatch(t, dev, shaders.RoPE(), "main", []gpu.Buffer{vb, buf(t, dev, tab), buf(t, dev, params(heads, g.HeadDim, pos0, 0, ld))}, 1, T, 1)
	got := read(t, dev, vb, T*ld)
	want := make([]float64, T*ld)
	half := g.HeadDim / 2
	for tk := 0; tk < T; tk++ {
		for h := 0; h < heads; h++ {
			for i := 0; i < half; i++ {
				c, s := float64(tab[((pos0+tk)*half+i)*2]), float64(tab[((pos0+tk)*half+i)*2+1])
				a := tk*ld + h*g.HeadDim + i
				x1, x2 := float64(v[a]), float64(v[a+half])
				want[a], want[a+half] = x1*c-x2*s, x2*c+x1*s
			}
		}
	}
	check(t, "rope", got, want, 1e-12, 1e-6)
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
