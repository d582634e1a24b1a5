package progress_test

import (
	"os"

	"logitscope/internal/sys/progress"
)

// A command makes one Meter for stderr and runs its steps through it; in
// a log (not a terminal) a quick step prints one line.
func Example() {
	m := progress.New(os.Stdout) // a terminal would get a live bar
	m.Start(3, "quantize q4", "tensors")
	for range 3 {
		m.Add(1)
	}
	m.Done()
	// Output: quantize q4: 3 tensors in 0.0 s
}
