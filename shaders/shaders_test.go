package shaders

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gogpu/naga"

	"logitscope/internal/format/ggml"
)

// Every kernel compiles to SPIR-V with naga, the compiler gogpu/wgpu uses,
// for every weight format (the matmul at every workgroup size for one):
// a syntax or type error fails here without a GPU.
func TestCompile(t *testing.T) {
	sources := map[string]string{
		"rmsnorm": RMSNorm(), "rope": RoPE(), "attention": Attention(), "elementwise": Elementwise(), "moe": MoE(), "exl3": EXL3Product(),
	}
	for f := F32; f <= Q6_K; f++ {
		for _, v := range MatmulVariants {
			sources[v.Name(f)] = Matmul(f, v)
		}
		sources["embed/"+f.String()] = Embed(f)
	}
	for _, wg := range []int{32, 128, 256} {
		v := MatmulVariant{Stacked: true, Workgroup: wg}
		sources[v.Name(Q4)] = Matmul(Q4, v)
	}
	for name, src := range sources {
		t.Run(name, func(t *testing.T) {
			if _, err := naga.Compile(src); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		})
	}
}

// reserved are WGSL's reserved words (the spec's §15.3): Chromium's Tint
// refuses a kernel that names anything so, while naga, which TestCompile
// runs, accepts it; moe.wgsl's binding "shared" passed here and failed
// only in the browser.
var reserved = strings.Fields(`NULL Self abstract active alignas alignof as asm asm_fragment async attribute auto
	await become cast catch class co_await co_return co_yield coherent column_major common compile
	compile_fragment concept const_cast consteval constexpr constinit crate debugger decltype delete demote
	demote_to_helper do dynamic_cast enum explicit export extends extern external fallthrough filter final
	finally friend from fxgroup get goto groupshared highp impl implements import inline instanceof interface
	layout lowp macro macro_rules match mediump meta mod module move mut mutable namespace new nil noexcept
	noinline nointerpolation non_coherent noncoherent noperspective null nullptr of operator package packoffset
	partition pass patch pixelfragment precise precision premerge priv protected pub public readonly ref
	regardless register reinterpret_cast require resource restrict self set shared sizeof smooth snorm static
	static_assert static_cast std subroutine super target template this thread_local throw trait try type
	typedef typeid typename typeof union unless unorm unsafe unsized use using varying virtual volatile wgsl
	where with writeonly yield`)

// files is every WGSL file by name.
func files() map[string]string {
	return map[string]string{"weights": weights, "ggml": ggmlBlocks, "matmul": matmul, "matmul_out": matmulOut, "matmul_stacked": matmulStacked,
		"matmul_lanes": matmulLanes, "matmul_subgroup": matmulSubgroup, "embed": embed, "rmsnorm": rmsnorm,
		"rope": rope, "attention": attention, "elementwise": elementwise, "moe": moe, "matmul_a8": matmulA8, "quantize": quantize, "exl3": exl3,
		"lookup": lookupGroups, "acts": actsRound}
}

// TestTintRules: what Chromium's WGSL compiler refuses and naga does not.
func TestTintRules(t *testing.T) {
	words := map[string]bool{}
	for _, w := range reserved {
		words[w] = true
	}
	comment := regexp.MustCompile(`//[^\n]*`)
	ident := regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	srcs := files()
	srcs["prelude"] = prelude
	for name, src := range srcs {
		code := comment.ReplaceAllString(src, "")
		for _, id := range ident.FindAllString(code, -1) {
			if words[id] {
				t.Errorf("%s.wgsl uses %q, a reserved word in WGSL", name, id)
			}
		}
		// Tint also refuses a constant expression that is infinite or NaN,
		// such as bitcast<f32>(0x7f800000u) (quantize.wgsl's special); naga
		// accepts it.
		for _, m := range bitcastConst.FindAllStringSubmatch(code, -1) {
			bits, ok := constBits(code, m[1])
			if ok && bits&0x7f800000 == 0x7f800000 {
				t.Errorf("%s.wgsl: bitcast<f32>(%s) is a constant infinity or NaN", name, m[1])
			}
		}
		// Tint also refuses a float literal beyond f32's range, such as
		// -3.4028235e38 (FLT_MAX rounded up); naga rounds it down.
		for _, lit := range floatLit.FindAllString(code, -1) {
			if v, err := strconv.ParseFloat(lit, 64); err == nil && v > math.MaxFloat32 {
				t.Errorf("%s.wgsl: the literal %s exceeds f32's range", name, lit)
			}
		}
	}
}

var floatLit = regexp.MustCompile(`[0-9]+\.[0-9]*[eE][+-]?[0-9]+`)

// bitcastConst is a bitcast to f32 of one literal or named constant.
var bitcastConst = regexp.MustCompile(`bitcast<f32>\(\s*([A-Za-z0-9_]+)\s*\)`)

// constBits is the value of operand, a u32 literal or a const of code
// declared as one.
func constBits(code, operand string) (uint64, bool) {
	if m := regexp.MustCompile(`const ` + operand + `: u32 = (0x[0-9a-fA-F]+|[0-9]+)u;`).FindStringSubmatch(code); m != nil {
		operand = m[1]
	}
	v, err := strconv.ParseUint(strings.TrimSuffix(operand, "u"), 0, 32)
	return v, err == nil
}

func TestHeaders(t *testing.T) {
	for name, src := range files() {
		if !strings.HasPrefix(src, "// "+name+".wgsl — ") || !strings.Contains(src, "Binding") && name != "weights" && name != "ggml" {
			t.Errorf("%s.wgsl lacks its header comment (name, bindings, shapes)", name)
		}
	}
}

// The reductions halve the workgroup down to one invocation, and matmul's
// lanes split it evenly.
func TestGeometry(t *testing.T) {
	if Workgroup&(Workgroup-1) != 0 || MatmulLanes&(MatmulLanes-1) != 0 || Workgroup%MatmulLanes != 0 {
		t.Fatalf("workgroup %d, lanes %d: both must be powers of two", Workgroup, MatmulLanes)
	}
	if !strings.Contains(Matmul(Q4, MatmulVariant{}), "const WG: u32 = 64u;") || !strings.HasPrefix(RMSNorm(), prelude) {
		t.Fatal("a kernel lacks the geometry prelude")
	}
}

// weights.wgsl's w0 has no working initializer (naga drops it): every
// entry point of a kernel that decodes weights sets it first.
func TestEntryPointsSetW0(t *testing.T) {
	for name, src := range map[string]string{"matmul": matmul, "matmul_a8": matmulA8, "embed": embed} {
		parts := strings.Split(src, "@compute @workgroup_size(WG)\nfn ")
		if len(parts) < 2 {
			t.Fatalf("%s.wgsl: no entry point found", name)
		}
		for _, p := range parts[1:] {
			body := p[strings.Index(p, "{\n")+2:]
			if !strings.HasPrefix(strings.TrimSpace(body), "w0 = ") {
				t.Errorf("%s.wgsl: entry point %s does not set w0 first", name, p[:strings.Index(p, "(")])
			}
		}
	}
}

// A function's var declared without an initializer held garbage on
// lavapipe, not WGSL's zero (gogpu's naga emits no initializer): every
// local var is initialized where it is declared.
func TestLocalsInitialized(t *testing.T) {
	bare := regexp.MustCompile(`(?m)^\s+var\s+\w+\s*:[^=\n]*;`)
	for name, src := range files() {
		for _, m := range bare.FindAllString(src, -1) {
			t.Errorf("%s.wgsl: %q has no initializer", name, strings.TrimSpace(m))
		}
	}
}

// Every type ggml.Dequantize decodes has a format, and back: a block
// format's WGSL constant (ggml.wgsl) is its Go value, and its block size
// and bytes there are ggml's.
func TestGGMLFormat(t *testing.T) {
	for _, ty := range ggml.Types() {
		f, ok := GGMLFormat(ty)
		if ok != ggml.Supported(ty) {
			t.Errorf("GGMLFormat(%v): %v, but ggml.Supported says %v", ty, ok, ggml.Supported(ty))
		}
		if !ok {
			continue
		}
		back, isBlock := f.GGML()
		if isBlock != (ty.BlockSize() > 1) || isBlock && back != ty {
			t.Errorf("%v: format %v, whose GGML() is %v, %v", ty, f, back, isBlock)
		}
		if !isBlock {
			continue
		}
		if f.String() != ty.String() {
			t.Errorf("%v: format named %q", ty, f)
		}
		if !strings.Contains(ggmlBlocks+iquants, fmt.Sprintf("const %s: u32 = %du;", ty, f)) {
			t.Errorf("ggml.wgsl and iquants.wgsl lack const %s: u32 = %du;", ty, f)
		}
		if !strings.Contains(ggmlBlocks, fmt.Sprintf("case %du: { return %du; }", f, ty.BlockBytes())) {
			t.Errorf("ggml.wgsl: %v's block is not %d bytes there", ty, ty.BlockBytes())
		}
		if small := f <= Q8_0 || strings.Contains(ggmlBlocks, fmt.Sprintf("FORMAT == %du", f)); ty.BlockSize() != map[bool]int{true: 32, false: 256}[small] {
			t.Errorf("%v: %d-weight blocks, ggml_block_size says otherwise", ty, ty.BlockSize())
		}
	}
	for _, f := range []Format{F32, BF16, F16, Q8, Q6, Q4} {
		if _, ok := f.GGML(); ok {
			t.Errorf("%v claims a ggml block type", f)
		}
	}
}

// quantize.wgsl's AMAX_MIN is the least float32 a whose 127/a, as Go
// divides float32s (rounded to nearest), is finite: the CPU engine's
// bound for rounding a block at all.
func TestQuantizeBound(t *testing.T) {
	m := regexp.MustCompile(`const AMAX_MIN: u32 = 0x([0-9a-f]+)u;`).FindStringSubmatch(quantize)
	if m == nil {
		t.Fatal("quantize.wgsl: no AMAX_MIN")
	}
	bits, _ := strconv.ParseUint(m[1], 16, 32)
	at, below := math.Float32frombits(uint32(bits)), math.Float32frombits(uint32(bits)-1)
	if 127/at > math.MaxFloat32 || 127/below <= math.MaxFloat32 {
		t.Fatalf("AMAX_MIN %g: 127/it is %g, 127/the float below is %g", at, 127/at, 127/below)
	}
}

// Every format's tables fit the room that weight buffers keep for them,
// the formats that index tables have them, and the others have none.
func TestTables(t *testing.T) {
	most := 0
	for f := range MXFP4 + 1 {
		n := len(Tables(f))
		most = max(most, n)
		if n > MaxTableBytes {
			t.Errorf("%v: %d bytes of tables, MaxTableBytes is %d", f, n, MaxTableBytes)
		}
		if wants := f >= IQ2_XXS && f != TQ1_0 && f != TQ2_0; wants != (n > 0) {
			t.Errorf("%v: %d bytes of tables", f, n)
		}
	}
	if most != MaxTableBytes {
		t.Errorf("the largest tables are %d bytes, MaxTableBytes %d: keep it tight", most, MaxTableBytes)
	}
}
