package variant

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/quant"
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

// LogProgress is an Options.Progress for logs: a line when the last
// tensor is written (the CLI shows a bar on a terminal through package
// progress, which the engine's packages do not import: they build into
// engine.wasm).
func LogProgress(w io.Writer, scheme quant.Scheme) func(done, total int, tensor string) {
	return func(done, total int, tensor string) {
		if done == total {
			fmt.Fprintf(w, "quantize %s: %d tensors\n", scheme, total)
		}
	}
}
