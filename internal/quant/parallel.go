package quant

import (
	"runtime"
	"sync"
)

// forRows splits [0, rows) into contiguous chunks, one per CPU, and runs fn on
// each concurrently. It returns the error of the earliest chunk that failed,
// so the reported position is the first bad one in row-major order no matter
// how the goroutines were scheduled.
func forRows(rows int, fn func(r0, r1 int) error) error {
	n := runtime.GOMAXPROCS(0)
	// Tiny tensors are not worth a goroutine each.
	if n > rows/4 {
		n = max(1, rows/4)
	}
	if n == 1 {
		return fn(0, rows)
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		r0, r1 := rows*i/n, rows*(i+1)/n
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(r0, r1)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
