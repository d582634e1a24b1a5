package sensitivity

import (
	"fmt"
	"io"
	"strings"

	"logitscope/internal/analysis/attribution"
	"logitscope/internal/analysis/margins"
	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/ggml"
	"logitscope/internal/model"
	"logitscope/internal/model/ggufmodel"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
)

// RecipeOptions configure Recipe.
type RecipeOptions struct {
	Schemes []quant.Scheme // each swept; a unit may take any of them or f32
	Unit    string         // ByTensor, ByLayer or ByKind
	// One target: bits per weight over the swept matrices, or the
	// variant's bytes on disk.
	TargetBPW  float64
	TargetSize int64
	Margins    margins.Options
	// Engine opens each test (its Variant is set here): Activations and
	// Progress.
	Engine engine.Options
	// Eval are the windows the uniform schemes and the recipe are
	// measured over (nil: the sweeps').
	Eval [][]int
	// Dir is where the recipe's variant is written.
	Dir string
	// Sweep runs a scheme's sweep (default Sweep); the CLI's shows
	// progress and resumes. test names the scheme's variant.
	Sweep func(x *engine.Mix, test *variant.Variant, windows [][]int, units []attribution.Unit, so Options) (*attribution.Result, error)
	// Measure runs a whole test over windows (default MeasureWhole).
	Measure func(x *engine.Mix, windows [][]int, name string) (attribution.Effect, error)
	// Log is told of the variants written.
	Log io.Writer
}

// Recipe sweeps ck's model in each scheme over windows (forward only),
// plans a scheme per unit within the target (attribution.Plan), writes
// that variant to opt.Dir, and measures it and the uniform schemes over
// opt.Eval. The recipe says how to make it with quantize and with
// llama-quantize.
func Recipe(ck *checkpoint.Checkpoint, windows [][]int, opt RecipeOptions) (*attribution.Recipe, error) {
	if len(opt.Schemes) == 0 {
		return nil, fmt.Errorf("a recipe needs at least one scheme")
	}
	if opt.Sweep == nil {
		opt.Sweep = func(x *engine.Mix, _ *variant.Variant, windows [][]int, units []attribution.Unit, so Options) (*attribution.Result, error) {
			return Sweep(x, windows, units, so)
		}
	}
	if opt.Measure == nil {
		opt.Measure = func(x *engine.Mix, windows [][]int, _ string) (attribution.Effect, error) {
			return MeasureWhole(x, windows, opt.Margins, nil)
		}
	}
	if opt.Log == nil {
		opt.Log = io.Discard
	}
	var sweeps []*attribution.Result
	var uniform []attribution.Measured
	var fixed int64 // what the variant holds beside the swept matrices
	var g model.Geometry
	shapes := map[string]engine.Matrix{}
	for _, scheme := range opt.Schemes {
		dir, err := variant.Ensure(ck, scheme, opt.Log)
		if err != nil {
			return nil, err
		}
		x, v, err := OpenVariant(ck, dir, opt.Engine)
		if err != nil {
			return nil, err
		}
		res, whole, err := func() (*attribution.Result, attribution.Effect, error) {
			defer x.Close()
			units, err := Units(x.Changed(), x.Geometry().NumLayers, opt.Unit)
			if err != nil {
				return nil, attribution.Effect{}, fmt.Errorf("%s: %w", dir, err)
			}
			res, err := opt.Sweep(x, v, windows, units, Options{Unit: opt.Unit, ForwardOnly: true, Margins: opt.Margins})
			if err != nil {
				return nil, attribution.Effect{}, err
			}
			res.Model, res.Test = ck.Source(), dir
			g = x.Geometry()
			for _, m := range x.Changed() {
				shapes[m.Name] = m
			}
			if opt.Eval == nil {
				return res, res.Whole, nil
			}
			whole, err := opt.Measure(x, opt.Eval, string(scheme))
			return res, whole, err
		}()
		if err != nil {
			return nil, err
		}
		var matrices int64
		for _, u := range res.Units {
			matrices += u.Bytes
		}
		if len(sweeps) == 0 { // the first scheme's variant tells the rest
			fixed = -matrices
			for _, s := range v.Manifest.Shards {
				fixed += s.Size
			}
		}
		sweeps = append(sweeps, res)
		uniform = append(uniform, attribution.Measured{Name: string(scheme), Bytes: matrices, Effect: whole})
	}

	var params int64
	for _, u := range sweeps[0].Units {
		params += u.Params
	}
	budget := opt.TargetSize - fixed
	if opt.TargetBPW > 0 {
		budget = int64(opt.TargetBPW * float64(params) / 8)
	}
	r, err := attribution.Plan(sweeps, budget)
	if err != nil {
		return nil, err
	}
	r.Model = ck.Source()
	if err := ggufRecipe(r, g, shapes); err != nil {
		return nil, err
	}
	if err := build(ck, r, opt.Dir); err != nil {
		return nil, err
	}
	r.Variant = opt.Dir
	x, _, err := OpenVariant(ck, opt.Dir, opt.Engine)
	if err != nil {
		return nil, err
	}
	defer x.Close()
	eval := opt.Eval
	if eval == nil {
		eval = windows
	}
	whole, err := opt.Measure(x, eval, "recipe")
	if err != nil {
		return nil, err
	}
	r.Measure(uniform, whole)
	return r, nil
}

// MeasureWhole is a mix's whole test against its reference over windows.
func MeasureWhole(x *engine.Mix, windows [][]int, m margins.Options, progress func(done, total int)) (attribution.Effect, error) {
	res, err := Sweep(x, windows, nil, Options{ForwardOnly: true, Margins: m, Progress: progress})
	if err != nil {
		return attribution.Effect{}, err
	}
	return res.Whole, nil
}

// OpenVariant opens ck's reference against its variant name (a scheme or
// a directory, engine.OpenVariant), which must have been quantized from
// it, for sweeps; opt gives Activations and Progress.
func OpenVariant(ck *checkpoint.Checkpoint, name string, opt engine.Options) (*engine.Mix, *variant.Variant, error) {
	v, err := engine.OpenVariant(ck, name)
	if err != nil {
		return nil, nil, err
	}
	if v == nil {
		return nil, nil, fmt.Errorf("variant %s is the reference itself: a sweep needs a quantized one", name)
	}
	opt.Variant, opt.GGUF = v, nil
	x, err := engine.OpenMix(ck, opt)
	return x, v, err
}

// build writes r's variant, r.Base with r.Rules, and checks that every
// matrix came out in the scheme r picked.
func build(ck *checkpoint.Checkpoint, r *attribution.Recipe, dir string) error {
	base, err := quant.ParseScheme(r.Base)
	if err != nil {
		return err
	}
	if err := variant.Write(ck, base, dir, variant.Options{Policy: Policy(r)}); err != nil {
		return err
	}
	v, err := variant.Open(dir)
	if err != nil {
		return fmt.Errorf("the recipe's variant just written does not verify: %w", err)
	}
	for name, want := range r.Assignment() {
		if ps := v.Pieces(name); len(ps) == 0 || ps[0].Scheme != want {
			return fmt.Errorf("the recipe's variant holds %s as %v, the recipe picked %s", name, ps, want)
		}
	}
	return nil
}

// Policy is recipe r as a variant's policy, for variant.Write with the
// scheme r.Base.
func Policy(r *attribution.Recipe) *variant.Policy {
	p := &variant.Policy{}
	for _, x := range r.Rules {
		p.Rules = append(p.Rules, variant.Rule{Match: x.Match, Scheme: x.Scheme})
	}
	return p
}

// ggmlTypes are the llama.cpp types that hold each of logitscope's
// schemes at least as precisely, the first whose block divides a row:
// q8 is Q8_0 itself (32 weights, an f16 absmax/127 scale); q6's 6.5 bits
// take Q6_K's 6.5625 where rows are whole 256-weight blocks, else Q8_0
// (which holds q6's codes exactly, and is what llama-quantize falls back
// to from Q6_K); q4 takes Q4_0's 4.5 bits (Q4_0 rounds to −8…7 where q4
// keeps ±7); f32 stays F32, as does a row no type's block divides.
var ggmlTypes = map[string][]ggml.Type{"q8": {ggml.Q8_0}, "q6": {ggml.Q6_K, ggml.Q8_0}, "q4": {ggml.Q4_0}, attribution.F32: {ggml.F32}}

// ggmlType is scheme's type for a matrix of rows of cols weights.
func ggmlType(scheme string, cols int) ggml.Type {
	for _, t := range ggmlTypes[scheme] {
		if cols%t.BlockSize() == 0 {
			return t
		}
	}
	return ggml.F32
}

// ggmlName is t as llama.cpp's ggml_type_name names it (q6_K, q8_0),
// which llama-quantize's --tensor-type reads.
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
	r.GGUFBase = strings.ToUpper(ggmlName(ggmlType(r.Base, 1<<20))) // the file type: the scheme's first choice
	r.GGUFRules = attribution.Rules(byName, "")
	return nil
}
