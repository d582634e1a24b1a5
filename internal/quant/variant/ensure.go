package variant

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/quant"
)

// Ensure returns the directory of ck's scheme variant (DefaultDir),
// quantizing it first when it is missing, or was quantized from other
// weights than ck's (the model's files changed since), with progress on
// log (nil: none): suites and benchmarks then run on a fresh checkout of
// a model.
func Ensure(ck *checkpoint.Checkpoint, scheme quant.Scheme, log io.Writer) (string, error) {
	if log == nil {
		log = io.Discard
	}
	dir := DefaultDir(ck.Dir, string(scheme))
	if data, err := os.ReadFile(filepath.Join(dir, "manifest.json")); err == nil {
		fp, err := ck.Fingerprint()
		if err != nil {
			return "", err
		}
		var m struct {
			Model string `json:"model_sha256"`
		}
		if json.Unmarshal(data, &m) == nil && m.Model == fp {
			return dir, nil
		}
		fmt.Fprintf(log, "%s was quantized from other weights than %s's\n", dir, ck.Dir)
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
