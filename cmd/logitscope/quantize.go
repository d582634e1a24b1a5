package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"logitscope/internal/format/exl3"
	"logitscope/internal/format/lookup"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/internal/sys/progress"
)

// quantize writes a sealed variant of a checkpoint.
func quantize(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("quantize", stdout)
	modelDir := fs.String("model", "", "model directory or hub id (hf:ORG/NAME[@REV]); default $LOGITSCOPE_MODEL, else the synthetic tiny preset (random weights, not the page's trained demo: --model demo/model names that)")
	schemeName := fs.String("scheme", "", "q8, q6, q4, or exllamav3's EXL3 at K bits a weight, exl3-kK[-CODEBOOK] (K 1 to 8; CODEBOOK mcg, the default, mul1 or 3inst): exl3-k4 (required unless --format)")
	out := fs.String("out", "", "variant directory (default MODEL/variants/SCHEME; with --format, MODEL/hub/FORMAT-SETTINGS)")
	only := fs.String("only", "", "quantize only the matrices whose Hugging Face name matches this regexp (e.g. 'mlp\\.experts\\.'); the others stay float32")
	keep := fs.String("keep", "", "keep the matrices whose name matches this regexp in float32 (e.g. 'lm_head|embed_tokens')")
	exl3From := fs.String("exl3", "", "with an exl3-* --scheme: take the EXL3 layers from DIR, a model exllamav3 converted (its config.json and .safetensors), instead of encoding them; the manifest records each file's sha256")
	hub := addHubFlags(fs)
	var rules schemeRules
	fs.Var(&rules, "as", "REGEX=SCHEME: the matrices whose name matches take SCHEME (q8, q6, q4, exl3-kK[-CODEBOOK] or f32), whatever --only, --keep and --scheme say; repeatable, the first that matches decides (e.g. 'self_attn\\.=q8')")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return fmt.Errorf("unexpected argument %q", pos[0])
	}
	if err := hub.checkFlags(fs); err != nil {
		return err
	}
	var scheme quant.Scheme
	var format lookup.Format
	var err error
	if *hub.format != "" {
		format, err = hub.newFormat()
	} else {
		scheme, err = variant.ParseScheme(*schemeName)
	}
	if err != nil {
		return err
	}
	ck, err := openModel(*modelDir, stderr)
	if err != nil {
		return err
	}
	defer ck.Close()
	if ck.GGUF != "" {
		return fmt.Errorf("%s is a GGUF file: quantize reads a Hugging Face checkpoint's weights, not llama.cpp's tensors; quantize the checkpoint it was converted from instead", ck.GGUF)
	}
	if format != nil {
		return quantizeHub(ck, format, *out, stdout, stderr)
	}
	if *out == "" {
		*out = variant.DefaultDir(ck.Dir, string(scheme))
	}
	track := progress.Track(progress.New(stderr), "quantize "+string(scheme), "tensors")
	opt := variant.Options{Progress: func(done, total int, _ string) { track(int64(done), int64(total)) }}
	if *only != "" || *keep != "" || len(rules) > 0 {
		opt.Policy = &variant.Policy{Only: *only, Keep: *keep, Rules: rules}
	}
	if *exl3From != "" {
		if variant.EXL3(string(scheme)).K == 0 {
			return fmt.Errorf("--exl3 %s takes EXL3 layers: give an exl3-kK --scheme, not %s", *exl3From, scheme)
		}
		if opt.EXL3, err = exl3.OpenDir(*exl3From); err != nil {
			return err
		}
		defer opt.EXL3.Close()
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
	fmt.Fprintf(stdout, "wrote %s variant: %s, %d shards, %.1f MB, manifest_sha256 %s -> %s\n",
		scheme, countSchemes(v, scheme), len(v.Manifest.Shards), float64(size)/1e6, v.Manifest.Seal, *out)
	for _, f := range slices.Sorted(maps.Keys(v.Manifest.EXL3Sources)) {
		fmt.Fprintf(stdout, "EXL3 layers from %s, sha256 %s\n", filepath.Join(*exl3From, f), v.Manifest.EXL3Sources[f])
	}
	// A rule that decides no matrix is allowed (the variant is what the
	// other flags make), but is more likely a mistyped pattern, or one that
	// an earlier rule shadows, than meant.
	for i, r := range rules {
		if !slices.ContainsFunc(v.Names(), func(name string) bool {
			return len(v.Pieces(name)[0].Shape) > 1 && opt.Policy.RuleOf(name) == i
		}) {
			fmt.Fprintf(stderr, "quantize: note: --as %q decides no matrix\n", r.String())
		}
	}
	return nil
}

// countSchemes says how many tensors each scheme holds, the variant's own
// first: "12 tensors in q4, 8 in q8, 2 matrices kept in f32" (vectors,
// always f32, are not counted).
func countSchemes(v *variant.Variant, scheme quant.Scheme) string {
	n := map[string]int{}
	for _, name := range v.Names() {
		if p := v.Pieces(name)[0]; len(p.Shape) > 1 {
			n[p.Scheme]++
		}
	}
	plural := func(n int, one, more string) string {
		if n == 1 {
			return fmt.Sprintf("%d %s", n, one)
		}
		return fmt.Sprintf("%d %s", n, more)
	}
	parts := []string{plural(n[string(scheme)], "tensor", "tensors") + " in " + string(scheme)}
	// quant's schemes most precise first, then any other (EXL3's) by name.
	order := func(a, b string) int {
		ia, ib := slices.Index(quant.Schemes, quant.Scheme(a)), slices.Index(quant.Schemes, quant.Scheme(b))
		if ia < 0 {
			ia = len(quant.Schemes)
		}
		if ib < 0 {
			ib = len(quant.Schemes)
		}
		return cmp.Or(cmp.Compare(ia, ib), cmp.Compare(a, b))
	}
	for _, s := range slices.SortedFunc(maps.Keys(n), order) {
		if s != string(scheme) && s != variant.SchemeF32 {
			parts = append(parts, fmt.Sprintf("%d in %s", n[s], s))
		}
	}
	if k := n[variant.SchemeF32]; k > 0 {
		parts = append(parts, plural(k, "matrix", "matrices")+" kept in f32")
	}
	return strings.Join(parts, ", ")
}

// schemeRules is the repeatable --as REGEX=SCHEME flag, in order given.
type schemeRules []variant.Rule

func (r *schemeRules) String() string {
	var s []string
	for _, x := range *r {
		s = append(s, x.String())
	}
	return strings.Join(s, " ")
}

func (r *schemeRules) Set(s string) error {
	rule, err := variant.ParseRule(s)
	if err != nil {
		return err
	}
	*r = append(*r, rule)
	return nil
}
