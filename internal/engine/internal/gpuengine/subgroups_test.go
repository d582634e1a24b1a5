package gpuengine

import (
	"fmt"
	"math"
	"testing"

	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native/nativetest"
	"logitscope/shaders"
)

// main with a row's lanes added in a subgroup (matmul_subgroup.wgsl)
// gives main's bits with them added in workgroup memory
// (matmul_lanes.wgsl), for every format, with rows whose lanes get none,
// one or several groups (75, 96 and ggmlCols columns), on lavapipe's
// subgroups of 8 (the engine's subgroup kernels need at least
// MatmulLanes). The expert kernel is checked the same way in
// TestExpertMatmulKernel; main itself against float64 elsewhere.
func TestMatmulSubgroups(t *testing.T) {
	dev := nativetest.Device(t)
	if info := dev.Info(); !info.Subgroups || info.SubgroupMinSize < shaders.MatmulLanes {
		t.Fatalf("adapter %q: subgroups %v of %d invocations; lavapipe's are 8", info.Adapter, info.Subgroups, info.SubgroupMinSize)
	}
	const rows, T = 130, 3
	for f := shaders.F32; f <= shaders.Q6_K; f++ {
		ty, isGGML := f.GGML()
		colsList := []int{75, 96}
		if isGGML {
			colsList = []int{ggmlCols(ty)}
		}
		for _, cols := range colsList {
			t.Run(fmt.Sprintf("%s/cols%d", f, cols), func(t *testing.T) {
				r := rnd(f + 50)
				raw := randomWeights(t, f, rows, cols, 50)
				base, _ := Piece{Rows: rows, Cols: cols, Format: f}.scaleBase()
				w, x, none := buf(t, dev, raw), buf(t, dev, r.fill(T*cols, 1)), buf(t, dev, []float32{0})
				p := buf(t, dev, params(rows, cols, (cols+31)/32, base, rows, 0, 0, 0, 0))
				run := func(v shaders.MatmulVariant) []float32 {
					y := buf(t, dev, make([]float32, T*rows))
					dispatch(t, dev, shaders.Matmul(f, v), "main", []gpu.Buffer{w, x, y, none, p}, ceilDiv(rows, shaders.MatmulVariant{}.Rows()), 1, T)
					return read(t, dev, y, T*rows)
				}
				core, sub := run(shaders.MatmulVariant{}), run(shaders.MatmulVariant{Subgroups: true})
				for i, v := range core {
					if math.Float32bits(sub[i]) != math.Float32bits(v) || v == 0 {
						t.Fatalf("token %d row %d: %g with subgroups, %g without", i/rows, i%rows, sub[i], v)
					}
				}
			})
		}
	}
}
