package main

import (
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"logitscope/internal/analysis/attribution"
	"logitscope/internal/engine"
	"logitscope/internal/format/receipt"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/internal/run/sensitivity"
	"logitscope/internal/sys/progress"
)

// recipeCommand sweeps a model in each scheme, picks a scheme per unit
// within a size, builds that variant and measures it against the uniform
// schemes.
func recipeCommand(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("recipe", stdout)
	modelDir := fs.String("model", "", "model directory or hub id (hf:ORG/NAME[@REV]); default $LOGITSCOPE_MODEL, else the synthetic tiny preset")
	schemeList := fs.String("schemes", "q8,q6,q4", "the schemes a unit may take besides f32, each swept (variants written first if missing)")
	panelPath := fs.String("panel", "", "the panel the sweeps measure the units over: a text file, .jsonl token-id windows, or llama.cpp's --kl-divergence-base file (required)")
	evalPath := fs.String("eval-panel", "", "the panel the recipe and the uniform schemes are measured over (default --panel; a held-out one tells whether the recipe fits beyond the sweeps' panel)")
	window := fs.Int("window", 128, "tokens per window when a panel is text")
	unit := fs.String("unit", attribution.ByTensor, "what takes one scheme: tensor, layer or kind")
	bpw := fs.Float64("target-bpw", 0, "bits per weight the swept matrices may take on average")
	sizeFlag := fs.String("target-size", "", "size the variant may take: 12.5MB, 3GB, 800MiB or bytes")
	out := fs.String("out", "", "the recipe's variant directory (default MODEL/variants/recipe)")
	jsonPath := fs.String("json", "", "write the sealed recipe (frontier, picks, rules, measures) to FILE; the sweeps keep their state in FILE.SCHEME.partial and go on from there when run again")
	force := fs.Bool("force", false, "replace the --json file if it exists")
	acts := fs.String("activations", engine.ActsF32, "how products with quantized weights take their activations: f32, or q8 (8-bit blocks, llama.cpp's CPU arithmetic)")
	closeRule := marginFlags(fs)
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return fmt.Errorf("unexpected argument %q", pos[0])
	}
	var targetSize int64
	switch {
	case (*bpw == 0) == (*sizeFlag == ""):
		return fmt.Errorf("give the target as --target-bpw B or --target-size S (one of them)")
	case *bpw < 0 || math.IsNaN(*bpw) || math.IsInf(*bpw, 0):
		return fmt.Errorf("--target-bpw %g: want bits per weight > 0", *bpw)
	case *sizeFlag != "":
		s, err := parseSize(*sizeFlag)
		if err != nil {
			return fmt.Errorf("--target-size %q: %w", *sizeFlag, err)
		}
		targetSize = s
	}
	switch {
	case *panelPath == "":
		return fmt.Errorf("--panel FILE is required: the sweeps measure the units over its windows")
	case *window < 2:
		return fmt.Errorf("--window %d: a window needs at least 2 tokens", *window)
	}
	mopt, err := closeRule()
	if err != nil {
		return err
	}
	var schemes []quant.Scheme
	for _, name := range strings.Split(*schemeList, ",") {
		s, err := quant.ParseScheme(strings.TrimSpace(name))
		if err != nil {
			return fmt.Errorf("--schemes: %w", err)
		}
		schemes = append(schemes, s)
	}
	if *jsonPath != "" {
		if err := checkOutput(*jsonPath, *force); err != nil {
			return err
		}
	}
	ck, err := openModel(*modelDir, stderr)
	if err != nil {
		return err
	}
	defer ck.Close()
	if ck.GGUF != "" {
		return fmt.Errorf("%s is a GGUF file: a recipe quantizes a Hugging Face checkpoint's weights; give the checkpoint it was converted from", ck.GGUF)
	}
	windows, err := panelOf(ck, *panelPath, *window)
	if err != nil {
		return err
	}
	fp, err := ck.Fingerprint()
	if err != nil {
		return err
	}
	if *out == "" {
		*out = variant.DefaultDir(ck.Dir, "recipe")
	}
	opt := sensitivity.RecipeOptions{Schemes: schemes, Unit: *unit, TargetBPW: *bpw, TargetSize: targetSize,
		Margins: mopt, Dir: *out, Log: stderr,
		Engine: engine.Options{Activations: *acts, Progress: loadProgress(stderr)},
		Sweep: func(x *engine.Mix, v *variant.Variant, windows [][]int, units []attribution.Unit, so sensitivity.Options) (*attribution.Result, error) {
			so.Key = sweepKey(fp, testID(engine.Options{Variant: v}), receipt.PanelSHA256(windows), so, *acts, "cpu")
			if *jsonPath != "" {
				so.Resume = *jsonPath + "." + v.Manifest.Scheme + ".partial"
			}
			return sweep(x, windows, units, so, "sweep "+v.Manifest.Scheme, stderr)
		},
		Measure: func(x *engine.Mix, windows [][]int, name string) (attribution.Effect, error) {
			track := progress.Track(progress.New(stderr), "measure "+name, "runs")
			return sensitivity.MeasureWhole(x, windows, mopt, func(done, total int) { track(int64(done), int64(total)) })
		},
	}
	if *evalPath != "" && *evalPath != *panelPath {
		if opt.Eval, err = panelOf(ck, *evalPath, *window); err != nil {
			return err
		}
	}
	r, err := sensitivity.Recipe(ck, windows, opt)
	if err != nil {
		return err
	}
	if err := r.WriteText(stdout); err != nil {
		return err
	}
	if *jsonPath == "" {
		return nil
	}
	data, err := r.Marshal()
	if err != nil {
		return err
	}
	if err := writeFile(*jsonPath, data); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s (seal %s)\n", *jsonPath, r.Seal)
	return nil
}

var sizeRE = regexp.MustCompile(`^([0-9]*\.?[0-9]+)\s*([kKMGT]?i?B?)$`)

// parseSize reads a size as people write it: 12.5MB, 3GB, 800MiB, 4096.
func parseSize(s string) (int64, error) {
	m := sizeRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return 0, fmt.Errorf("want a number of bytes with an optional unit (kB, MB, GB, TB, KiB, MiB, GiB, TiB)")
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, err
	}
	unit := strings.TrimSuffix(m[2], "B")
	base := 1000.0
	if strings.HasSuffix(unit, "i") {
		base, unit = 1024, strings.TrimSuffix(unit, "i")
	}
	if unit != "" {
		v *= math.Pow(base, float64(strings.Index("kMGT", strings.Replace(unit, "K", "k", 1))+1))
	}
	if v < 1 || v > 1<<62 {
		return 0, fmt.Errorf("%g bytes", v)
	}
	return int64(v), nil
}
