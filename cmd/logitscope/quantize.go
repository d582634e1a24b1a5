package main

import (
	"flag"
	"fmt"
	"io"

	"logitscope/quant"
	"logitscope/variant"
)

// quantize writes a sealed variant of a checkpoint.
func quantize(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("quantize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	modelDir := fs.String("model", "", "model directory; default $LOGITSCOPE_MODEL, else the demo model")
	schemeName := fs.String("scheme", "", "q8, q6 or q4 (required)")
	out := fs.String("out", "", "variant directory (default MODEL/variants/SCHEME)")
	only := fs.String("only", "", "quantize only the matrices whose Hugging Face name matches this regexp (e.g. 'mlp\\.experts\\.'); the others stay float32")
	keep := fs.String("keep", "", "keep the matrices whose name matches this regexp in float32 (e.g. 'lm_head|embed_tokens')")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return fmt.Errorf("unexpected argument %q", pos[0])
	}
	scheme, err := quant.ParseScheme(*schemeName)
	if err != nil {
		return err
	}
	ck, err := openModel(*modelDir)
	if err != nil {
		return err
	}
	defer ck.Close()
	if *out == "" {
		*out = variant.DefaultDir(ck.Dir, string(scheme))
	}
	opt := variant.Options{Progress: variant.LogProgress(stderr, scheme)}
	if *only != "" || *keep != "" {
		opt.Policy = &variant.Policy{Only: *only, Keep: *keep}
	}
	if err := variant.Write(ck, scheme, *out, opt); err != nil {
		return err
	}
	v, err := variant.Open(*out)
	if err != nil {
		return fmt.Errorf("the variant just written does not verify: %w", err)
	}
	var size int64
	for _, s := range v.Manifest.Shards {
		size += s.Size
	}
	quantized := map[string]bool{}
	for _, p := range v.Manifest.Tensors {
		if p.Scheme != variant.SchemeF32 {
			quantized[p.Name] = true
		}
	}
	fmt.Fprintf(stdout, "wrote %s variant: %d tensors in %s, %d shards, %.1f MB, manifest_sha256 %s -> %s\n",
		scheme, len(quantized), scheme, len(v.Manifest.Shards), float64(size)/1e6, v.Manifest.Seal, *out)
	return nil
}
