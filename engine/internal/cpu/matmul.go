package cpu

import (
	"runtime"
	"sync"

	"logitscope/model"
)

// matmul: out (T, W.Rows) = x (T, W.Cols) @ Wᵀ + b. Work is split over W's
// rows so that each weight row is read once for all T tokens; an output
// element's value does not depend on T or on the split, which keeps
// KV-cache decode and teacher forcing bit-identical.
func matmul(out, x []float32, W *model.Matrix, b []float32, T int) {
	n, k := W.Rows, W.Cols
	parallel(n, 64, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			w := W.Data[r*k : (r+1)*k]
			var bias float32
			if b != nil {
				bias = b[r]
			}
			for t := 0; t < T; t++ {
				out[t*n+r] = dot(w, x[t*k:(t+1)*k]) + bias
			}
		}
	})
}

// dot accumulates in float32 in four interleaved partial sums: the order a
// GPU reduction uses too, and four times the Go compiler's scalar
// throughput.
func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// parallel runs fn over [0,n) in contiguous chunks of at least grain items,
// one goroutine per CPU.
func parallel(n, grain int, fn func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), (n+grain-1)/grain)
	if workers <= 1 {
		fn(0, n)
		return
	}
	var wg sync.WaitGroup
	chunk := (n + workers - 1) / workers
	for lo := 0; lo < n; lo += chunk {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			fn(lo, hi)
		}(lo, min(lo+chunk, n))
	}
	wg.Wait()
}
