package conform

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/gguf"
	"logitscope/internal/model/ggufmodel"
	"logitscope/internal/model/hubquant"
	"logitscope/internal/peer/llamacpp"
	"logitscope/internal/run/capture"
	"logitscope/internal/sys/tempfile"
)

// ggufPrefix names, as a case's test, the checkpoint's own weights
// exported to GGUF and quantized by llama.cpp's quantizer to a file type
// (gguf:Q4_K_M), as a user makes the file they ship.
const ggufPrefix = "gguf:"

// checkRuntime refuses a case runtime that does not exist, and one that
// runs GGUF files only (llama.cpp) on a test that is not one.
func (c *Case) checkRuntime() error {
	if c.Runtime == "" {
		return nil
	}
	if err := capture.CheckRuntime(c.Runtime); err != nil {
		return fmt.Errorf("runtime %s", strings.TrimPrefix(err.Error(), "--runtime "))
	}
	if !strings.HasPrefix(c.Runtime, capture.LlamaCpp) {
		return nil
	}
	switch {
	case !strings.HasPrefix(c.Test, ggufPrefix) && !gguf.IsFileName(c.Test):
		return fmt.Errorf("runtime %s runs GGUF files: the test must be FILE.gguf or gguf:FTYPE, not %q", c.Runtime, c.Test)
	case c.Sweep != nil || c.Recipe != nil:
		return fmt.Errorf("runtime %s: a sweep or a recipe requantizes logitscope's own variants, which llama.cpp does not run", c.Runtime)
	}
	return nil
}

// testSide is the variant a case's test names, made concrete (a GGUF
// file, quantized first for gguf:FTYPE; for hub:FORMAT a checkpoint
// written into the case's directory dir), and the capture options it runs
// with: the case's runtime and activations, else the suite run's.
func testSide(s *Suite, c Case, ck *checkpoint.Checkpoint, co capture.Options, dir string, log io.Writer) (string, capture.Options, error) {
	test := c.Test
	f, err := c.hubWriter()
	if err != nil {
		return "", co, err
	}
	if f != nil {
		// Written afresh: the tool's output for this model, never a
		// stale one.
		test = filepath.Join(dir, "hub")
		fmt.Fprintf(log, "quantize --format %s -> %s\n", f.Name(), test)
		if err := hubquant.Write(ck, f, test, nil); err != nil {
			return "", co, fmt.Errorf("%s: %w", c.Test, err)
		}
	} else if ftype, ok := strings.CutPrefix(test, ggufPrefix); ok {
		if test, err = ensureGGUF(ck, ftype, log); err != nil {
			return "", co, err
		}
	} else if gguf.IsFileName(test) {
		test = s.path(test)
	}
	// The reference runs as it is; the test rounds its activations as
	// the case says (a hub format's own: activations "format").
	co.Activations = c.Activations
	if c.Runtime != "" {
		co.Runtime = c.Runtime
		if c.Runtime != "wasm" {
			co.Engine = "" // engine.wasm is the suite run's, not this case's runtime's
		}
	}
	return test, co, nil
}

// ensureGGUF is MODEL/variants/gguf-FTYPE.gguf: the checkpoint's f32
// weights exported to GGUF and quantized by llama.cpp's own quantizer,
// made on first use.
func ensureGGUF(ck *checkpoint.Checkpoint, ftype string, log io.Writer) (string, error) {
	path := filepath.Join(ck.Dir, "variants", "gguf-"+ftype+".gguf")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	h, err := llamacpp.Open()
	if err == nil {
		err = h.CheckFileType(ftype)
	}
	if err != nil {
		return "", fmt.Errorf("%s%s: %v", ggufPrefix, ftype, err)
	}
	v, err := engine.OpenVariant(ck, "f32")
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	fmt.Fprintf(log, "exporting %s to GGUF and quantizing it to %s with llama.cpp -> %s\n", ck.Dir, ftype, path)
	f32, err := tempfile.Write(path, func(w io.Writer) error {
		_, err := ggufmodel.Export(w, ck, v)
		return err
	})
	if err != nil {
		return "", err
	}
	defer tempfile.Remove(f32)
	q, err := tempfile.Create(path)
	if err != nil {
		return "", err
	}
	q.Close()
	if err := h.QuantizeFile(f32, q.Name(), ftype); err != nil {
		tempfile.Remove(q.Name())
		return "", err
	}
	return path, tempfile.Rename(tempfile.Move{Temp: q.Name(), Path: path})
}
