package main

import (
	"fmt"
	"io"
	"strings"

	"logitscope/internal/model/synth"
	"logitscope/internal/sys/progress"
)

func mkmodel(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("mkmodel", stdout)
	preset := fs.String("preset", "tiny", "model geometry: "+strings.Join(synth.PresetNames(), ", "))
	tok := fs.String("tokenizer", "", "tokenizer.json to ship instead of the built-in byte-level BPE")
	seed := fs.Uint64("seed", 0, "weights seed: the same seed gives byte-identical files")
	out := fs.String("out", "", "output directory (required)")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return fmt.Errorf("unexpected argument %q", pos[0])
	}
	p, ok := synth.Presets[*preset]
	if !ok {
		return fmt.Errorf("unknown preset %q (have %s)", *preset, strings.Join(synth.PresetNames(), ", "))
	}
	if *out == "" {
		return fmt.Errorf("--out DIR is required")
	}
	track := progress.Track(progress.New(stderr), "mkmodel "+p.Name, "tensors")
	opt := synth.Options{Seed: *seed, Tokenizer: *tok, Progress: func(done, total int) { track(int64(done), int64(total)) }}
	if err := synth.Write(p, *out, opt); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s model (seed %d) to %s\n", p.Name, *seed, *out)
	return nil
}
