package mlx

import (
	"fmt"
	"testing"

	"logitscope/internal/format/lookup/lookuptest"
)

// BenchmarkMatrix reads a 1024×4096 matrix at each width, group 64.
func BenchmarkMatrix(b *testing.B) {
	for _, bits := range []int{2, 3, 4, 5, 6, 8} {
		b.Run(fmt.Sprintf("%d-bit", bits), func(b *testing.B) { lookuptest.Bench(b, New(bits, 64), 1024, 4096) })
	}
}
