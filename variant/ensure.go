package variant

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"logitscope/checkpoint"
	"logitscope/quant"
)

// Ensure returns the directory of ck's scheme variant (DefaultDir),
// quantizing it first when it is missing, with progress on log (nil: none):
// suites and benchmarks then run on a fresh checkout of a model.
func Ensure(ck *checkpoint.Checkpoint, scheme quant.Scheme, log io.Writer) (string, error) {
	dir := DefaultDir(ck.Dir, string(scheme))
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err == nil {
		return dir, nil
	}
	if log == nil {
		log = io.Discard
	}
	fmt.Fprintf(log, "quantizing %s to %s ...\n", ck.Dir, scheme)
	return dir, Write(ck, scheme, dir, Options{Progress: LogProgress(log, scheme)})
}

// LogProgress is an Options.Progress that keeps one terminal line on w up
// to date while scheme is written, and ends it when the last tensor is.
func LogProgress(w io.Writer, scheme quant.Scheme) func(done, total int, tensor string) {
	return func(done, total int, tensor string) {
		fmt.Fprintf(w, "\rquantize %s: %3d/%d tensors %-48.48s", scheme, done, total, tensor)
		if done == total {
			fmt.Fprintln(w)
		}
	}
}
