package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"logitscope/internal/engine"
	"logitscope/internal/format/ggml"
	"logitscope/internal/format/gguf"
	"logitscope/internal/model/ggufmodel"
	"logitscope/internal/model/onnxmodel"
	"logitscope/internal/peer/llamacpp"
	"logitscope/internal/sys/progress"
	"logitscope/internal/sys/tempfile"
)

// export writes a model as a llama.cpp GGUF file, so that the weights
// inspected here run there: the checkpoint's own (f32) or a variant's,
// with each scheme in the ggml type that holds its bits exactly. With
// --onnx it writes an ONNX graph instead (onnxmodel.Export: q4 matrices
// as MatMulNBits nodes with the variant's codes), which onnxruntime and
// onnxruntime-web run to every position's logits.
func export(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("export", stdout)
	modelDir := fs.String("model", "", "model directory or hub id (hf:ORG/NAME[@REV]); default $LOGITSCOPE_MODEL, else the synthetic tiny preset (random weights, not the page's trained demo: --model demo/model names that)")
	name := fs.String("variant", "f32", "f32 (the checkpoint's own weights), q8, q6, q4 or a variant directory")
	out := fs.String("gguf", "", "the GGUF file to write (this or --onnx is required)")
	onnxOut := fs.String("onnx", "", "write an ONNX graph (input_ids -> every position's logits, q4 matrices as com.microsoft MatMulNBits) for onnxruntime(-web) instead of a GGUF file; --variant f32 or q4. Written as MODEL/onnx/NAME.onnx, serve offers it to the page as the side onnx/NAME.onnx")
	onnxLen := fs.Int("onnx-len", 2048, "with --onnx, the longest input it takes (its RoPE and causal-mask tables' length; at most max_position_embeddings)")
	force := fs.Bool("force", false, "replace the --gguf file if it exists")
	ftype := fs.String("type", "", "quantize the f32 export with llama.cpp's own quantizer (llama_model_quantize, as llama-quantize does) to this type: Q4_K_M, Q8_0, Q6_K, IQ4_XS... (needs make deps)")
	var tensorTypes repeated
	fs.Var(&tensorTypes, "tensor-type", "REGEX=TYPE: with --type, the GGUF tensors whose name matches take TYPE (q8_0, q6_K, f32...), as llama-quantize's --tensor-type; repeatable, the first that matches decides (logitscope recipe prints these)")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return fmt.Errorf("unexpected argument %q", pos[0])
	}
	if *onnxOut != "" {
		if *out != "" || *ftype != "" || len(tensorTypes) > 0 {
			return fmt.Errorf("--onnx writes an ONNX graph: not with --gguf, --type or --tensor-type")
		}
		return exportONNX(*modelDir, *name, *onnxOut, *onnxLen, *force, stdout, stderr)
	}
	if *out == "" {
		return fmt.Errorf("--gguf FILE or --onnx FILE is required")
	}
	if err := checkOutput(*out, *force); err != nil {
		return err
	}
	var quantizer *llamacpp.H
	if len(tensorTypes) > 0 && *ftype == "" {
		return fmt.Errorf("--tensor-type is a rule of llama.cpp's quantizer: give --type too")
	}
	for _, r := range tensorTypes {
		if i := strings.LastIndexByte(r, '='); i < 1 || i == len(r)-1 {
			return fmt.Errorf("--tensor-type %q: want REGEX=TYPE", r)
		}
	}
	if *ftype != "" {
		if *name != "f32" {
			return fmt.Errorf("--type %s quantizes the checkpoint's own weights: it takes --variant f32, not %s", *ftype, *name)
		}
		var err error
		if quantizer, err = llamacpp.Open(); err == nil {
			err = quantizer.CheckFileType(*ftype)
		}
		if err != nil {
			return fmt.Errorf("--type %s: %v", *ftype, err)
		}
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
	if quantizer != nil {
		f32 := tmp
		defer tempfile.Remove(f32)
		if tmp, err = llamaQuantize(quantizer, f32, *out, *ftype, tensorTypes, stderr); err != nil {
			return err
		}
		*name = *ftype
	}
	if err := tempfile.Rename(tempfile.Move{Temp: tmp, Path: *out}); err != nil {
		return err
	}
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	mix := ggufmodel.Mix(ggufmodel.TypeNames(e.Types))
	if quantizer != nil {
		f, err := gguf.Open(*out)
		if err != nil {
			return err
		}
		counts := map[ggml.Type]int{}
		for _, t := range f.Tensors {
			counts[t.Type]++
		}
		mix = ggufmodel.Mix(ggufmodel.TypeNames(counts))
	}
	fmt.Fprintf(stdout, "wrote %s (%s: %s), %.1f MB\n", *out, *name, mix, float64(st.Size())/1e6)
	for _, n := range e.Notes {
		fmt.Fprintf(stdout, "note: %s\n", n)
	}
	return nil
}

// exportONNX writes the variant name of the model in modelDir to out as
// an ONNX graph for inputs of up to maxLen tokens.
func exportONNX(modelDir, name, out string, maxLen int, force bool, stdout, stderr io.Writer) error {
	if err := checkOutput(out, force); err != nil {
		return err
	}
	ck, err := openModel(modelDir, stderr)
	if err != nil {
		return err
	}
	defer ck.Close()
	v, err := engine.OpenVariant(ck, name)
	if err != nil {
		return err
	}
	tmp, err := tempfile.Write(out, func(w io.Writer) error { return onnxmodel.Export(w, ck, v, maxLen) })
	if err == nil {
		err = tempfile.Rename(tempfile.Move{Temp: tmp, Path: out})
	}
	if err != nil {
		return err
	}
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (%s, inputs up to %d tokens), %.1f MB\n", out, name, maxLen, float64(st.Size())/1e6)
	return nil
}

// llamaQuantize writes f32's GGUF quantized to ftype by llama.cpp into a
// temporary file beside out, and returns its path.
func llamaQuantize(h *llamacpp.H, f32, out, ftype string, tensorTypes []string, stderr io.Writer) (string, error) {
	f, err := tempfile.Create(out)
	if err != nil {
		return "", fmt.Errorf("%s: %w", out, err)
	}
	f.Close()
	fmt.Fprintf(stderr, "quantizing to %s with llama.cpp's llama_model_quantize...\n", ftype)
	if err := h.QuantizeFile(f32, f.Name(), ftype, tensorTypes...); err != nil {
		tempfile.Remove(f.Name())
		return "", fmt.Errorf("--type %s: %v", ftype, err)
	}
	return f.Name(), nil
}

// repeated is a flag that may be given many times, in order given.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, " ") }
func (r *repeated) Set(s string) error { *r = append(*r, s); return nil }
