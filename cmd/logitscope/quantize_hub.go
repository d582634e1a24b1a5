package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/lookup"
	"logitscope/internal/model/hubquant"
	"logitscope/internal/sys/progress"
)

// hubFlags are quantize's settings for --format, a hub format's checkpoint.
type hubFlags struct {
	format     *string
	bits       *int
	groupSize  *int
	sym        *bool
	descAct    *bool
	checkpoint *string
	// given is the flags set on the command line (checkFlags fills it).
	given map[string]bool
}

// hubFlagNames are the flags only --format takes.
var hubFlagNames = []string{"bits", "group-size", "sym", "desc-act", "checkpoint-format"}

func addHubFlags(fs *flag.FlagSet) hubFlags {
	return hubFlags{
		given:      map[string]bool{},
		format:     fs.String("format", "", "instead of a variant, write the checkpoint a hub tool would: "+strings.Join(hubquant.WriterNames(), ", ")+" (a config.json with quantization_config, the tokenizer files, model.safetensors); --variant DIR then runs it"),
		bits:       fs.Int("bits", 4, "with --format gptq (2, 3, 4 or 8), awq and ct-w4a16 (4), mlx (2, 3, 4, 5, 6 or 8): bits a weight"),
		groupSize:  fs.Int("group-size", 128, "with --format gptq, awq, ct-w4a16 or mlx (32, 64 or 128; 64 unless given): inputs per group sharing a scale and zero, -1 for one group per row"),
		sym:        fs.Bool("sym", true, "with --format gptq or ct-w4a16: a symmetric grid (zero at the middle code); --sym=false fits each group's range; awq stores zero points unless --sym is given"),
		descAct:    fs.Bool("desc-act", false, "with --format gptq or ct-w4a16 (its actorder group): act-order, quantizing the inputs by descending column norm (a non-monotonic g_idx)"),
		checkpoint: fs.String("checkpoint-format", "", "with --format gptq: gptq (v1, the default: zero points stored minus one) or gptq_v2"),
	}
}

// checkFlags refuses --format with the variant's flags, and --format's
// own flags without it.
func (h hubFlags) checkFlags(fs *flag.FlagSet) error {
	var err error
	fs.Visit(func(f *flag.Flag) {
		h.given[f.Name] = slices.Contains(hubFlagNames, f.Name)
		switch {
		case err != nil:
		case *h.format != "" && slices.Contains([]string{"scheme", "only", "keep", "as", "exl3"}, f.Name):
			err = fmt.Errorf("--%s makes a logitscope variant; --format %s writes a hub checkpoint, which quantizes the modules its tool does", f.Name, *h.format)
		case *h.format == "" && slices.Contains(hubFlagNames, f.Name):
			err = fmt.Errorf("--%s sets a hub format's quantization: give --format (%s)", f.Name, strings.Join(hubquant.WriterNames(), ", "))
		}
	})
	return err
}

// newFormat is the format --format and its flags name.
func (h hubFlags) newFormat() (lookup.Format, error) {
	newFormat, ok := hubquant.Writers[*h.format]
	if !ok {
		return nil, fmt.Errorf("--format %q: want one of %s", *h.format, strings.Join(hubquant.WriterNames(), ", "))
	}
	return newFormat(hubquant.Options{Bits: *h.bits, GroupSize: *h.groupSize, Sym: *h.sym, DescAct: *h.descAct, Checkpoint: *h.checkpoint, Given: h.given})
}

// quantizeHub writes ck as f's tool would, and reopens it as the
// quantized weights of ck's model.
func quantizeHub(ck *checkpoint.Checkpoint, f lookup.Format, out string, stdout, stderr io.Writer) error {
	if out == "" {
		out = hubquant.DefaultDir(ck.Dir, f)
	}
	track := progress.Track(progress.New(stderr), "quantize "+f.Name(), "tensors")
	if err := hubquant.Write(ck, f, out, func(done, total int) { track(int64(done), int64(total)) }); err != nil {
		return err
	}
	w, err := hubquant.OpenFor(ck, out)
	if err != nil {
		return fmt.Errorf("the checkpoint just written does not open as %s's: %w", ck.Dir, err)
	}
	defer w.Close()
	var quantized, size int64
	for _, name := range w.Names() {
		if m, err := w.Lookup(name); err != nil {
			return err
		} else if m != nil {
			quantized++
		}
		_, _, n, _ := w.Shape(name)
		size += n
	}
	fmt.Fprintf(stdout, "wrote %s checkpoint: %d matrices quantized, %d tensors as stored, %.1f MB -> %s\n",
		w.Format(), quantized, int64(len(w.Names()))-quantized, float64(size)/1e6, out)
	return nil
}
