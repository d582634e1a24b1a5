package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"logitscope/internal/analysis/attribution"
	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/gguf"
	"logitscope/internal/format/receipt"
	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/internal/run/sensitivity"
	"logitscope/internal/sys/progress"
	"logitscope/internal/sys/tempfile"
	"logitscope/internal/text/tokenizer"
)

// sensitivityCommand sweeps a quantization's units over a panel: which
// matrices the damage comes from (package sensitivity).
func sensitivityCommand(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("sensitivity", stdout)
	modelDir := fs.String("model", "", "model directory or hub id (hf:ORG/NAME[@REV]); default $LOGITSCOPE_MODEL, else the synthetic tiny preset")
	schemeName := fs.String("scheme", "", "q8, q6 or q4: the test is MODEL/variants/SCHEME, quantized first if missing")
	variantName := fs.String("variant", "", "the test: a variant directory or a GGUF file (instead of --scheme)")
	panelPath := fs.String("panel", "", "teacher-forced panel: a text file, .jsonl token-id windows, or llama.cpp's --kl-divergence-base file (required)")
	window := fs.Int("window", 128, "tokens per window when --panel is text")
	unit := fs.String("unit", attribution.ByTensor, "what a sweep quantizes or restores at once: tensor, layer (a block's matrices) or kind (mlp.down_proj in every layer)")
	controls := fs.Bool("controls", true, "also run the noise floor (bf16-rounding noise on the reference) and each unit's isotropic control (its error's norm in a random direction)")
	culprits := fs.Int("culprits", 5, "units listed per clear call")
	device := fs.String("device", "cpu", "cpu (the reference's forward pass, from each unit's layer), or gpu (the WGSL program on this machine's WebGPU, as a GPU capture: every run from the embeddings, no divergence by layer; needs --controls=false)")
	top := fs.Int("top", 20, "units and clear calls the table lists (0: all)")
	out := fs.String("out", "", "write the sealed result as JSON to FILE; the sweep keeps its state in FILE.partial after each window and goes on from there when run again")
	force := fs.Bool("force", false, "replace the --out file if it exists")
	acts := fs.String("activations", engine.ActsF32, "how products with quantized weights take their activations: f32, or q8 (8-bit blocks, llama.cpp's CPU arithmetic)")
	closeRule := marginFlags(fs)
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return fmt.Errorf("unexpected argument %q", pos[0])
	}
	switch {
	case (*schemeName == "") == (*variantName == ""):
		return fmt.Errorf("give the test as --scheme q8|q6|q4 or --variant DIR|F.gguf (one of them)")
	case *panelPath == "":
		return fmt.Errorf("--panel FILE is required: the sweep measures the units over its windows")
	case *window < 2:
		return fmt.Errorf("--window %d: a window needs at least 2 tokens", *window)
	case *culprits < 1:
		return fmt.Errorf("--culprits %d: must be at least 1", *culprits)
	case *device != "cpu" && *device != "gpu":
		return fmt.Errorf("--device %q: want cpu or gpu", *device)
	case *device == "gpu" && *controls:
		return fmt.Errorf("--device gpu runs the reference's and the test's matrices only: the controls' noisy ones run on the CPU; give --controls=false")
	}
	mopt, err := closeRule()
	if err != nil {
		return err
	}
	if *out != "" {
		if err := checkOutput(*out, *force); err != nil {
			return err
		}
	}
	ck, err := openModel(*modelDir, stderr)
	if err != nil {
		return err
	}
	defer ck.Close()
	windows, err := panelOf(ck, *panelPath, *window)
	if err != nil {
		return err
	}

	if *schemeName != "" {
		scheme, err := quant.ParseScheme(*schemeName)
		if err != nil {
			return err
		}
		if *variantName, err = variant.Ensure(ck, scheme, stderr); err != nil {
			return err
		}
	}
	test := *variantName
	var dev gpu.Device
	if *device == "gpu" {
		if dev, err = native.Open(); err != nil {
			return fmt.Errorf("--device gpu: %w", err)
		}
		defer dev.Close()
	}
	x, opt, err := openMix(ck, test, *acts, dev, stderr)
	if err != nil {
		return err
	}
	defer x.Close()
	units, err := sensitivity.Units(x.Changed(), x.Geometry().NumLayers, *unit)
	if err != nil {
		return fmt.Errorf("%s: %w", test, err)
	}

	fp, err := ck.Fingerprint()
	if err != nil {
		return err
	}
	so := sensitivity.Options{Unit: *unit, Controls: *controls, Culprits: *culprits,
		Margins: mopt}
	so.Key = sweepKey(fp, testID(opt), receipt.PanelSHA256(windows), so, *acts, x.Device())
	if *out != "" {
		so.Resume = *out + ".partial"
	}
	res, err := sweep(x, windows, units, so, "sweep", stderr)
	if err != nil {
		return err
	}
	res.Model, res.Test = ck.Source(), test
	tok, err := tokenizer.Load(ck.TokenizerPath())
	if err != nil {
		return err
	}
	text := func(id int) string { return tok.Decode([]int{id}, false) }
	if err := res.WriteText(stdout, *top, text); err != nil {
		return err
	}
	if *out == "" {
		return nil
	}
	data, err := res.Marshal()
	if err != nil {
		return err
	}
	if err := writeFile(*out, data); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (seal %s)\n", *out, res.Seal)
	return nil
}

// sweep runs sensitivity.Sweep with a progress bar, saying what it runs
// and whether it goes on from a resume file.
func sweep(x *engine.Mix, windows [][]int, units []attribution.Unit, so sensitivity.Options, label string, stderr io.Writer) (*attribution.Result, error) {
	if so.Resume != "" {
		if _, err := os.Stat(so.Resume); err == nil {
			fmt.Fprintf(stderr, "resuming the sweep kept in %s\n", so.Resume)
		}
	}
	fmt.Fprintf(stderr, "%s: %d units by %s, %d windows, %d runs each\n", label, len(units), so.Unit, len(windows), so.RunsPerWindow(len(units)))
	track := progress.Track(progress.New(stderr), label, "runs")
	so.Progress = func(done, total int) { track(int64(done), int64(total)) }
	return sensitivity.Sweep(x, windows, units, so)
}

// openMix opens the reference of ck against test, a variant directory or a
// GGUF file, for sweeps on the CPU, or on dev.
func openMix(ck *checkpoint.Checkpoint, test, acts string, dev gpu.Device, stderr io.Writer) (*engine.Mix, engine.Options, error) {
	opt := engine.Options{Activations: acts, Progress: loadProgress(stderr), Device: dev}
	var err error
	if gguf.IsFileName(test) {
		opt.GGUF, err = engine.OpenGGUF(ck, test)
	} else if opt.Variant, err = engine.OpenVariant(ck, test); err == nil && opt.Variant == nil {
		err = fmt.Errorf("--variant f32 is the reference itself: give a quantized variant")
	}
	if err != nil {
		return nil, opt, err
	}
	x, err := engine.OpenMix(ck, opt)
	return x, opt, err
}

// writeFile puts data at path through a temporary file beside it, so that
// path holds either what it held or all of data.
func writeFile(path string, data []byte) error {
	tmp, err := tempfile.Write(path, func(w io.Writer) error { _, err := w.Write(data); return err })
	if err != nil {
		return err
	}
	return tempfile.Rename(tempfile.Move{Temp: tmp, Path: path})
}

// loadProgress shows the loading of a mix's reference and test on stderr.
func loadProgress(stderr io.Writer) func(done, total int64, unit string) {
	m := progress.New(stderr)
	bars := map[string]func(done, total int64){}
	return func(done, total int64, side string) {
		if bars[side] == nil {
			bars[side] = progress.Track(m, "loading the "+side, progress.Bytes)
		}
		bars[side](done, total)
	}
}

// testID names the test weights by their seal: a variant's manifest seal,
// a GGUF file's name and size (its sha256 would cost a read of the file).
func testID(opt engine.Options) string {
	if opt.Variant != nil {
		return "variant:" + opt.Variant.Manifest.Seal
	}
	return "gguf:" + opt.GGUF.Name()
}

// sweepKey is what a resume file must match: the model, the test, the
// panel and every option that changes a number.
func sweepKey(model, test, panel string, so sensitivity.Options, acts, device string) string {
	b, _ := json.Marshal([]any{model, test, panel, so.Unit, so.Controls, so.ForwardOnly, so.Culprits, so.Margins.K, so.Margins.AbsMargin, acts, device})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
