package shaders

import (
	"strings"
	"testing"

	"github.com/gogpu/naga"
)

// Every kernel compiles to SPIR-V with naga, the compiler gogpu/wgpu uses,
// for every weight format: a syntax or type error fails here without a GPU.
func TestCompile(t *testing.T) {
	sources := map[string]string{
		"rmsnorm": RMSNorm(), "rope": RoPE(), "attention": Attention(), "elementwise": Elementwise(), "moe": MoE(),
	}
	for f := F32; f <= Q4; f++ {
		sources["matmul/"+f.String()] = Matmul(f)
		sources["embed/"+f.String()] = Embed(f)
	}
	for name, src := range sources {
		t.Run(name, func(t *testing.T) {
			if _, err := naga.Compile(src); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		})
	}
}

func TestHeaders(t *testing.T) {
	for name, src := range map[string]string{"weights": weights, "matmul": matmul, "embed": embed, "rmsnorm": rmsnorm,
		"rope": rope, "attention": attention, "elementwise": elementwise, "moe": moe} {
		if !strings.HasPrefix(src, "// "+name+".wgsl — ") || !strings.Contains(src, "Binding") && name != "weights" {
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
	if !strings.Contains(Matmul(Q4), "const WG: u32 = 64u;") || !strings.HasPrefix(RMSNorm(), prelude) {
		t.Fatal("a kernel lacks the geometry prelude")
	}
}

// weights.wgsl's w0 has no working initializer (naga drops it): every
// entry point of a kernel that decodes weights sets it first.
func TestEntryPointsSetW0(t *testing.T) {
	for name, src := range map[string]string{"matmul": matmul, "embed": embed} {
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
