package bnb

import (
	"testing"

	"logitscope/internal/format/lookup/lookuptest"
)

// BenchmarkMatrix reads a 1024×4096 matrix in each option.
func BenchmarkMatrix(b *testing.B) {
	for name, f := range map[string]*Format{"nf4": NF4(false), "nf4-double": NF4(true), "fp4": FP4(false), "fp4-double": FP4(true)} {
		b.Run(name, func(b *testing.B) { lookuptest.Bench(b, f, 1024, 4096) })
	}
}
