package main

import (
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"logitscope/internal/analysis/attribution"
	"logitscope/internal/analysis/margins"
	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/ggml"
	"logitscope/internal/format/receipt"
	"logitscope/internal/model"
	"logitscope/internal/model/ggufmodel"
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
	acts := fs.String("activations", "f32", "how products with quantized weights take their activations: f32 or q8")
	k := fs.Float64("close-margin", margins.DefaultK, "a flip is close when the reference margin m ≤ X·σ")
	absMargin := fs.Float64("close-logits", 0, "if > 0, a flip is close when m ≤ this many logits instead")
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
	case *k <= 0:
		return fmt.Errorf("--close-margin %g: must be > 0", *k)
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
	evalWindows := windows
	if *evalPath != "" && *evalPath != *panelPath {
		if evalWindows, err = panelOf(ck, *evalPath, *window); err != nil {
			return err
		}
	}
	fp, err := ck.Fingerprint()
	if err != nil {
		return err
	}
	mopt := margins.Options{K: *k, AbsMargin: *absMargin}

	// The sweeps, one per scheme, forward only: each unit alone in it.
	var sweeps []*attribution.Result
	var uniform []attribution.Measured
	var fixed int64 // what the variant holds beside the swept matrices
	var g model.Geometry
	shapes := map[string]engine.Matrix{}
	for _, scheme := range schemes {
		dir, err := variant.Ensure(ck, scheme, stderr)
		if err != nil {
			return err
		}
		x, opt, err := openMix(ck, dir, *acts, stderr)
		if err != nil {
			return err
		}
		res, whole, err := func() (*attribution.Result, attribution.Effect, error) {
			defer x.Close()
			units, err := sensitivity.Units(x.Changed(), x.Geometry().NumLayers, *unit)
			if err != nil {
				return nil, attribution.Effect{}, fmt.Errorf("%s: %w", dir, err)
			}
			so := sensitivity.Options{Unit: *unit, ForwardOnly: true, Margins: mopt}
			so.Key = sweepKey(fp, testID(opt), receipt.PanelSHA256(windows), so, *acts)
			if *jsonPath != "" {
				so.Resume = *jsonPath + "." + string(scheme) + ".partial"
			}
			res, err := sweep(x, windows, units, so, "sweep "+string(scheme), stderr)
			if err != nil {
				return nil, attribution.Effect{}, err
			}
			res.Model, res.Test = ck.Source(), dir
			g = x.Geometry()
			for _, m := range x.Changed() {
				shapes[m.Name] = m
			}
			if *evalPath == "" {
				return res, res.Whole, nil
			}
			whole, err := measure(x, evalWindows, mopt, string(scheme), stderr)
			return res, whole, err
		}()
		if err != nil {
			return err
		}
		var matrices int64
		for _, u := range res.Units {
			matrices += u.Bytes
		}
		if fixed == 0 {
			if fixed, err = variantSize(dir); err != nil {
				return err
			}
			fixed -= matrices
		}
		sweeps = append(sweeps, res)
		uniform = append(uniform, attribution.Measured{Name: string(scheme), Bytes: matrices, Effect: whole})
	}

	var params int64
	for _, u := range sweeps[0].Units {
		params += u.Params
	}
	budget := targetSize - fixed
	if *bpw > 0 {
		budget = int64(*bpw * float64(params) / 8)
	}
	r, err := attribution.Plan(sweeps, budget)
	if err != nil {
		return err
	}
	r.Model = ck.Source()
	if err := ggufRecipe(r, g, shapes); err != nil {
		return err
	}

	// Build it and measure it.
	if *out == "" {
		*out = variant.DefaultDir(ck.Dir, "recipe")
	}
	if err := buildRecipe(ck, r, *out, stderr); err != nil {
		return err
	}
	r.Variant = *out
	x, _, err := openMix(ck, *out, *acts, stderr)
	if err != nil {
		return err
	}
	defer x.Close()
	whole, err := measure(x, evalWindows, mopt, "recipe", stderr)
	if err != nil {
		return err
	}
	r.Measure(uniform, whole)
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

// measure is a mix's whole test against its reference over windows.
func measure(x *engine.Mix, windows [][]int, mopt margins.Options, label string, stderr io.Writer) (attribution.Effect, error) {
	track := progress.Track(progress.New(stderr), "measure "+label, "runs")
	res, err := sensitivity.Sweep(x, windows, nil, sensitivity.Options{ForwardOnly: true, Margins: mopt,
		Progress: func(done, total int) { track(int64(done), int64(total)) }})
	if err != nil {
		return attribution.Effect{}, err
	}
	return res.Whole, nil
}

// buildRecipe writes r's variant: r.Base with r.Rules, and checks that
// every matrix came out in the scheme r picked.
func buildRecipe(ck *checkpoint.Checkpoint, r *attribution.Recipe, dir string, stderr io.Writer) error {
	base, err := quant.ParseScheme(r.Base)
	if err != nil {
		return err
	}
	track := progress.Track(progress.New(stderr), "quantize recipe", "tensors")
	opt := variant.Options{Policy: sensitivity.Policy(r), Progress: func(done, total int, _ string) { track(int64(done), int64(total)) }}
	if err := variant.Write(ck, base, dir, opt); err != nil {
		return err
	}
	v, err := variant.Open(dir)
	if err != nil {
		return fmt.Errorf("the recipe's variant just written does not verify: %w", err)
	}
	for name, want := range r.Assignment() {
		ps := v.Pieces(name)
		if len(ps) == 0 || ps[0].Scheme != want {
			return fmt.Errorf("the recipe's variant holds %s as %v, the recipe picked %s", name, ps, want)
		}
	}
	return nil
}

// variantSize is what a variant's shards take on disk.
func variantSize(dir string) (int64, error) {
	v, err := variant.Open(dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, s := range v.Manifest.Shards {
		n += s.Size
	}
	return n, nil
}

// ggmlTypes are the llama.cpp types that hold each of logitscope's
// schemes at least as precisely, the first whose block divides a row:
// q8 is Q8_0 itself (32 weights, an f16 absmax/127 scale); q6's 6.5 bits
// take Q6_K's 6.5625 where rows are whole 256-weight blocks, else Q8_0
// (which holds q6's codes exactly, and is what llama-quantize falls back
// to from Q6_K); q4 takes Q4_0's 4.5 bits (Q4_0 rounds to −8…7 where q4
// keeps ±7); f32 stays F32, as does a row no type's block divides.
var ggmlTypes = map[string][]ggml.Type{"q8": {ggml.Q8_0}, "q6": {ggml.Q6_K, ggml.Q8_0}, "q4": {ggml.Q4_0}, attribution.F32: {ggml.F32}}

// ggmlType is scheme's type for a matrix of rows of cols weights, named
// as llama.cpp's ggml_type_name names it (q6_K, q8_0).
func ggmlType(scheme string, cols int) ggml.Type {
	for _, t := range ggmlTypes[scheme] {
		if cols%t.BlockSize() == 0 {
			return t
		}
	}
	return ggml.F32
}

func ggmlName(t ggml.Type) string {
	return strings.Replace(strings.ToLower(t.String()), "_k", "_K", 1)
}

// ggufRecipe fills in r's llama-quantize rules: every matrix's GGUF
// tensor with its type, all of them (llama-quantize's file types bump
// some tensors by rules of their own, which a rule overrides), and the
// bytes they take in those types. A mixture's experts share one stacked
// tensor in GGUF: it takes the most precise of their types.
func ggufRecipe(r *attribution.Recipe, g model.Geometry, shapes map[string]engine.Matrix) error {
	names, err := ggufmodel.Names(g)
	if err != nil {
		return err
	}
	bits := func(t ggml.Type) float64 { return float64(t.BlockBytes()) / float64(t.BlockSize()) }
	assign := map[string]ggml.Type{}
	size := map[string]int64{} // a GGUF tensor's weights
	for name, scheme := range r.Assignment() {
		m, gname := shapes[name], names[name]
		if gname == "" {
			return fmt.Errorf("%s has no GGUF tensor in llama.cpp's naming", name)
		}
		t := ggmlType(scheme, m.Cols)
		if old, ok := assign[gname]; !ok || bits(t) > bits(old) {
			assign[gname] = t
		}
		size[gname] += int64(m.Rows) * int64(m.Cols)
	}
	byName := map[string]string{}
	r.GGUFBytes = 0
	for gname, t := range assign {
		byName[gname] = ggmlName(t)
		r.GGUFBytes += int64(bits(t) * float64(size[gname]))
	}
	base := ggmlType(r.Base, 1<<20) // the file type: the scheme's first choice
	r.GGUFBase = strings.ToUpper(ggmlName(base))
	r.GGUFRules = attribution.Rules(byName, "")
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
