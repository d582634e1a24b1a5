package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"logitscope/internal/engine"
	"logitscope/internal/model/ggufmodel"
	"logitscope/internal/sys/progress"
	"logitscope/internal/sys/tempfile"
)

// export writes a model as a llama.cpp GGUF file, so that the weights
// inspected here run there: the checkpoint's own (f32) or a variant's,
// with each scheme in the ggml type that holds its bits exactly.
func export(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("export", stdout)
	modelDir := fs.String("model", "", "model directory or hub id (hf:ORG/NAME[@REV]); default $LOGITSCOPE_MODEL, else the synthetic tiny preset (random weights, not the page's trained demo: --model demo/model names that)")
	name := fs.String("variant", "f32", "f32 (the checkpoint's own weights), q8, q6, q4 or a variant directory")
	out := fs.String("gguf", "", "the GGUF file to write (required)")
	force := fs.Bool("force", false, "replace the --gguf file if it exists")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return fmt.Errorf("unexpected argument %q", pos[0])
	}
	if *out == "" {
		return fmt.Errorf("--gguf FILE is required")
	}
	if err := checkOutput(*out, *force); err != nil {
		return err
	}
	ck, err := openModel(*modelDir, stderr)
	if err != nil {
		return err
	}
	defer ck.Close()
	v, err := engine.OpenVariant(ck, *name)
	if err != nil {
		return err
	}
	var e *ggufmodel.Exported
	m := progress.New(stderr)
	m.Start(0, "export "+filepath.Base(*out), progress.Bytes) // the size is known once written
	tmp, err := tempfile.Write(*out, func(w io.Writer) (err error) {
		e, err = ggufmodel.Export(progress.Writer{W: w, M: m}, ck, v)
		return err
	})
	m.Done()
	if err != nil {
		return err
	}
	if err := tempfile.Rename(tempfile.Move{Temp: tmp, Path: *out}); err != nil {
		return err
	}
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (%s: %s), %.1f MB\n", *out, *name, ggufmodel.Mix(ggufmodel.TypeNames(e.Types)), float64(st.Size())/1e6)
	for _, n := range e.Notes {
		fmt.Fprintf(stdout, "note: %s\n", n)
	}
	return nil
}
