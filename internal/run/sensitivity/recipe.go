package sensitivity

import (
	"cmp"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"logitscope/internal/format/seal"
	"logitscope/internal/quant/variant"
)

// F32 is the option of keeping a unit's matrices as the reference's:
// four bytes a weight and no error.
const F32 = variant.SchemeF32

// Option is one way to store a unit: a scheme, the bytes its matrices
// take in it, and the mean KLD its forward sweep measured (the unit alone
// in that scheme, everything else the reference's).
type Option struct {
	Scheme string  `json:"scheme"`
	Bytes  int64   `json:"bytes"`
	KLD    float64 `json:"mean_kld"`
}

// Pick is a unit's choice in a recipe.
type Pick struct {
	Unit    string   `json:"unit"`
	Tensors []string `json:"tensors"`
	Params  int64    `json:"params"`
	Option
}

// Point is a recipe on the frontier: its size and its predicted KLD, the
// sum of its units' forward KLDs (the forward additivity says how far a
// sum is to be trusted).
type Point struct {
	Bytes int64   `json:"bytes"`
	BPW   float64 `json:"bpw"`
	KLD   float64 `json:"predicted_kld"`
}

// RecipeKind and RecipeVersion identify a recipe's JSON.
const (
	RecipeKind    = "logitscope-recipe"
	RecipeVersion = 1
)

// Recipe is a scheme per unit within a budget, the frontier it was taken
// from, and (filled in by whoever builds and measures it) the variant it
// makes, how to make it with logitscope or llama.cpp, and what it and the
// uniform schemes measured. Sealed (Marshal) like a Result.
type Recipe struct {
	Kind      string  `json:"kind"`
	Version   int     `json:"version"`
	Model     string  `json:"model,omitempty"`
	Unit      string  `json:"unit"`
	Budget    int64   `json:"budget_bytes"`
	Picks     []Pick  `json:"picks"`
	Bytes     int64   `json:"bytes"`
	Params    int64   `json:"params"`
	BPW       float64 `json:"bpw"`
	Predicted float64 `json:"predicted_kld"`
	// Frontier runs from every unit in its smallest option to every unit
	// in its best, one upgrade at a time, the best ΔKLD/Δbytes first.
	Frontier []Point `json:"frontier"`
	// Base and Rules make the recipe with `logitscope quantize --scheme
	// Base --as RULE...`; GGUFBase and GGUFRules with llama-quantize
	// (--tensor-type RULE... IN OUT GGUFBase).
	Base      string `json:"base,omitempty"`
	Rules     []Rule `json:"rules,omitempty"`
	GGUFBase  string `json:"gguf_base,omitempty"`
	GGUFRules []Rule `json:"gguf_rules,omitempty"`
	// GGUFBytes is what the matrices take in llama.cpp's types.
	GGUFBytes int64 `json:"gguf_bytes,omitempty"`
	// Uniform are the schemes swept, each over the evaluation panel;
	// Measured is the recipe's variant over it.
	Uniform  []Measured `json:"uniform,omitempty"`
	Measured *Measured  `json:"measured,omitempty"`
	Variant  string     `json:"variant,omitempty"`
	Seal     string     `json:"seal"`
}

// Measured is a variant's whole effect over a panel, and its size: the
// swept matrices' bytes and bits per weight.
type Measured struct {
	Name   string  `json:"name"`
	Bytes  int64   `json:"bytes"`
	BPW    float64 `json:"bpw"`
	Effect Effect  `json:"effect"`
}

// Marshal is r as sealed, indented JSON.
func (r *Recipe) Marshal() ([]byte, error) {
	return seal.Marshal(r, "seal", func(s string) { r.Seal = s })
}

// Plan picks a scheme per unit from forward sweeps of the same units in
// different schemes (one Result each, ForwardOnly or not), or f32, so
// that the units' bytes stay within budget and the sum of their forward
// KLDs is as small as the greedy frontier gets it: each unit starts in
// its smallest option and takes the upgrades of the best ΔKLD per byte
// first. Each unit's options are cut to their lower convex hull first, so
// that an option a cheaper and a dearer one dominate between them is never
// a step, and a noisy measure that makes more bits look worse is skipped
// rather than taken.
func Plan(sweeps []*Result, budget int64) (*Recipe, error) {
	picks, options, err := optionsOf(sweeps)
	if err != nil {
		return nil, err
	}
	type step struct {
		unit, to int // the unit's hull index it moves to
		ratio    float64
	}
	hulls := make([][]Option, len(options))
	var steps []step
	for i, o := range options {
		hulls[i] = hull(o)
		for j := 1; j < len(hulls[i]); j++ {
			a, b := hulls[i][j-1], hulls[i][j]
			steps = append(steps, step{i, j, (a.KLD - b.KLD) / float64(b.Bytes-a.Bytes)})
		}
	}
	// On a convex hull each unit's ratios fall, so sorting every step by
	// ratio keeps each unit's steps in order.
	slices.SortStableFunc(steps, func(a, b step) int { return cmp.Compare(b.ratio, a.ratio) })

	r := &Recipe{Kind: RecipeKind, Version: RecipeVersion, Unit: sweeps[0].Unit, Budget: budget}
	at := make([]int, len(picks))
	for i := range picks {
		picks[i].Option = hulls[i][0]
		r.Bytes += picks[i].Bytes
		r.Params += picks[i].Params
		r.Predicted += picks[i].KLD
	}
	if r.Bytes > budget {
		return nil, fmt.Errorf("the target, %s, is below the smallest recipe: every unit in its smallest scheme takes %s", Size(budget), Size(r.Bytes))
	}
	point := func(bytes int64, kld float64) Point {
		return Point{Bytes: bytes, BPW: 8 * float64(bytes) / float64(r.Params), KLD: max(kld, 0)} // 0 less rounding
	}
	bytes, kld := r.Bytes, r.Predicted
	r.Frontier = append(r.Frontier, point(bytes, kld))
	frozen := make([]bool, len(picks))
	for _, s := range steps {
		from, to := hulls[s.unit][s.to-1], hulls[s.unit][s.to]
		bytes += to.Bytes - from.Bytes
		kld += to.KLD - from.KLD
		r.Frontier = append(r.Frontier, point(bytes, kld))
		// Within the budget, take every step that fits; a unit whose step
		// does not fit takes none of its later ones (they come after it).
		if frozen[s.unit] || at[s.unit] != s.to-1 {
			continue
		}
		if r.Bytes+to.Bytes-from.Bytes > budget {
			frozen[s.unit] = true
			continue
		}
		at[s.unit] = s.to
		picks[s.unit].Option = to
		r.Bytes += to.Bytes - from.Bytes
	}
	r.Predicted = 0 // summed afresh: the running sum has the steps' rounding
	for _, p := range picks {
		r.Predicted += p.KLD
	}
	r.Picks, r.BPW = picks, 8*float64(r.Bytes)/float64(r.Params)
	r.Base = r.base(sweeps[0].Units[0].Format)
	r.Rules = Rules(r.Assignment(), r.Base)
	return r, nil
}

// optionsOf gathers each unit's options from the sweeps, in the first
// sweep's unit order, and adds f32.
func optionsOf(sweeps []*Result) ([]Pick, [][]Option, error) {
	if len(sweeps) == 0 {
		return nil, nil, fmt.Errorf("a recipe needs at least one sweep")
	}
	var picks []Pick
	var options [][]Option
	index := map[string]int{}
	for _, u := range sweeps[0].Units {
		index[u.Name] = len(picks)
		picks = append(picks, Pick{Unit: u.Name, Tensors: u.Tensors, Params: u.Params})
		options = append(options, []Option{{Scheme: F32, Bytes: 4 * u.Params}})
	}
	for _, s := range sweeps {
		if len(s.Units) != len(picks) || s.Unit != sweeps[0].Unit {
			return nil, nil, fmt.Errorf("the sweep of %s has %d units by %s, that of %s %d by %s: a recipe compares the same units", s.Test, len(s.Units), s.Unit, sweeps[0].Test, len(picks), sweeps[0].Unit)
		}
		for _, u := range s.Units {
			i, ok := index[u.Name]
			if !ok || !slices.Equal(u.Tensors, picks[i].Tensors) {
				return nil, nil, fmt.Errorf("the sweep of %s has unit %s, which that of %s has not", s.Test, u.Name, sweeps[0].Test)
			}
			if strings.Contains(u.Format, "+") {
				return nil, nil, fmt.Errorf("unit %s is stored in %s in %s: a recipe's option is one scheme", u.Name, u.Format, s.Test)
			}
			options[i] = append(options[i], Option{Scheme: u.Format, Bytes: u.Bytes, KLD: u.Forward.MeanKLD})
		}
	}
	return picks, options, nil
}

// hull is the lower convex hull of options in (bytes, KLD), from the
// smallest: each option on it has less KLD than the one before, at a
// smaller ΔKLD per byte.
func hull(options []Option) []Option {
	o := slices.SortedStableFunc(slices.Values(options), func(a, b Option) int {
		return cmp.Or(cmp.Compare(a.Bytes, b.Bytes), cmp.Compare(a.KLD, b.KLD))
	})
	var h []Option
	for _, p := range o {
		if len(h) > 0 && p.KLD >= h[len(h)-1].KLD {
			continue // no better than a cheaper option
		}
		// Drop the last point while it lies on or above the line from the
		// one before it to p.
		for len(h) >= 2 {
			a, b := h[len(h)-2], h[len(h)-1]
			if (b.KLD-a.KLD)*float64(p.Bytes-a.Bytes) < (p.KLD-a.KLD)*float64(b.Bytes-a.Bytes) {
				break
			}
			h = h[:len(h)-1]
		}
		h = append(h, p)
	}
	return h
}

// base is the scheme, f32 aside, that holds most of the recipe's
// weights (of equal ones, the smaller): the scheme to quantize with, the
// others its rules. A recipe all in f32 takes the first sweep's.
func (r *Recipe) base(first string) string {
	params := map[string]int64{}
	bits := map[string]float64{}
	for _, p := range r.Picks {
		params[p.Scheme] += p.Params
		bits[p.Scheme] = float64(p.Bytes) / float64(p.Params)
	}
	base := ""
	for s, n := range params {
		if s != F32 && (base == "" || n > params[base] || n == params[base] && bits[s] < bits[base]) {
			base = s
		}
	}
	return cmp.Or(base, first)
}

// Assignment is each matrix's option in the recipe, by name.
func (r *Recipe) Assignment() map[string]string {
	m := map[string]string{}
	for _, p := range r.Picks {
		for _, t := range p.Tensors {
			m[t] = p.Scheme
		}
	}
	return m
}

// Policy is the recipe as a variant's policy, for variant.Write with
// the scheme Base.
func (r *Recipe) Policy() *variant.Policy {
	p := &variant.Policy{}
	for _, x := range r.Rules {
		p.Rules = append(p.Rules, variant.Rule{Match: x.Match, Scheme: x.Scheme})
	}
	return p
}

// Rule is a pattern and the scheme (or type) the names it matches take:
// `quantize --as` and llama-quantize's `--tensor-type` take the same.
type Rule struct {
	Match  string `json:"match"`
	Scheme string `json:"scheme"`
}

func (r Rule) String() string { return r.Match + "=" + r.Scheme }

var layerNumber = regexp.MustCompile(`(^|\.)(\d+)\.`)

// Rules groups an assignment of names to schemes (or types) into anchored
// regexps, one per name pattern and scheme with its layers alternated
// (^model\.layers\.(1|3)\.mlp\.down_proj\.weight$), leaving out the names
// in base. Each rule matches exactly the names it was made from, so their
// order does not matter; they come sorted.
func Rules(assign map[string]string, base string) []Rule {
	type key struct{ pattern, scheme string }
	layers := map[key][]int{}
	for name, scheme := range assign {
		if scheme == base {
			continue
		}
		pattern, l := regexp.QuoteMeta(name), -1
		if m := layerNumber.FindStringSubmatchIndex(name); m != nil {
			l, _ = strconv.Atoi(name[m[4]:m[5]])
			pattern = regexp.QuoteMeta(name[:m[4]]) + "%s" + regexp.QuoteMeta(name[m[5]:])
		}
		k := key{pattern, scheme}
		layers[k] = append(layers[k], l)
	}
	var rules []Rule
	for k, ls := range layers {
		match := k.pattern
		if ls[0] >= 0 {
			slices.Sort(ls)
			alt := make([]string, len(ls))
			for i, l := range ls {
				alt[i] = strconv.Itoa(l)
			}
			n := strings.Join(alt, "|")
			if len(ls) > 1 {
				n = "(" + n + ")"
			}
			match = fmt.Sprintf(k.pattern, n)
		}
		rules = append(rules, Rule{Match: "^" + match + "$", Scheme: k.scheme})
	}
	slices.SortFunc(rules, func(a, b Rule) int { return cmp.Or(cmp.Compare(a.Scheme, b.Scheme), cmp.Compare(a.Match, b.Match)) })
	return rules
}

// Size is bytes as people read file sizes: 1.23 MB (decimal units, as
// llama.cpp and the hub print them).
func Size(b int64) string {
	switch {
	case b >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(b)/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.2f MB", float64(b)/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(b)/1e3)
	}
	return fmt.Sprintf("%d B", b)
}

// WriteText writes the recipe as tables: the frontier, the picks that
// differ from the base, the measures of the uniform schemes and the
// recipe, and the commands that make it. additivity is the sweeps'
// forward additivity, which says how far the predictions hold.
func (r *Recipe) WriteText(w io.Writer, additivity float64) error {
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	p("recipe: %d units by %s, target %s of matrices (%.3f bpw)\n", len(r.Picks), r.Unit, Size(r.Budget), 8*float64(r.Budget)/float64(r.Params))
	p("\nfrontier (predicted KLD: Σ of the units' forward KLDs; the sweeps' forward additivity is %.3f):\n", additivity)
	p("%8s %10s %14s\n", "bpw", "size", "predicted KLD")
	const rows = 12
	for i, f := range r.Frontier {
		n := len(r.Frontier)
		if n > rows && i != n-1 && i%((n+rows-1)/rows) != 0 {
			continue
		}
		p("%8.3f %10s %14.6f\n", f.BPW, Size(f.Bytes), f.KLD)
	}
	count := map[string]int{}
	for _, x := range r.Picks {
		count[x.Scheme]++
	}
	var schemes []string
	for s, n := range count {
		schemes = append(schemes, fmt.Sprintf("%d in %s", n, s))
	}
	slices.Sort(schemes)
	p("\npicked: %.3f bpw, %s of matrices, predicted KLD %.6f; %s\n", r.BPW, Size(r.Bytes), r.Predicted, strings.Join(schemes, ", "))
	nw := len("unit")
	for _, x := range r.Picks {
		nw = max(nw, len(x.Unit))
	}
	for _, x := range r.Picks {
		if x.Scheme != r.Base {
			p("  %-*s %-4s %8.3f bpw  forward KLD %.6f\n", nw, x.Unit, x.Scheme, 8*float64(x.Bytes)/float64(x.Params), x.KLD)
		}
	}
	p("  (the other units: %s)\n", r.Base)
	if r.Measured != nil {
		p("\nmeasured (the whole variant against the reference):\n")
		p("%-8s %8s %10s %10s %10s %6s %6s\n", "variant", "bpw", "size", "mean KLD", "99% KLD", "flips", "clear")
		for _, m := range append(slices.Clone(r.Uniform), *r.Measured) {
			p("%-8s %8.3f %10s %10.6f %10.6f %6d %6d\n", m.Name, m.BPW, Size(m.Bytes), m.Effect.MeanKLD, m.Effect.KLD99, m.Effect.Flips, m.Effect.Clear)
		}
		for _, u := range r.Uniform {
			if u.Bytes < r.Measured.Bytes {
				continue
			}
			verdict := "better"
			if r.Measured.Effect.MeanKLD >= u.Effect.MeanKLD {
				verdict = "NOT better"
			}
			p("the recipe against %s at %.1f%% of its size: mean KLD %.6f against %.6f, %s\n", u.Name,
				100*float64(r.Measured.Bytes)/float64(u.Bytes), r.Measured.Effect.MeanKLD, u.Effect.MeanKLD, verdict)
		}
	}
	p("\nwith logitscope:\n  logitscope quantize --model %s --scheme %s", shellQuote(r.Model), r.Base)
	for _, x := range r.Rules {
		p(" \\\n    --as %s", shellQuote(x.String()))
	}
	if r.Variant != "" {
		p("\nthe variant's own bits in a GGUF (q6 in Q8_0, exactly):\n  logitscope export --model %s --variant %s --gguf model-recipe.gguf\n", shellQuote(r.Model), shellQuote(r.Variant))
	}
	p("\nwith llama.cpp's quantizer (its matrices then take %s, %.3f bpw), from an f32 GGUF\n(logitscope export --model %s --gguf model-f32.gguf; or export --type %s --tensor-type RULE... does both):\n  llama-quantize",
		Size(r.GGUFBytes), 8*float64(r.GGUFBytes)/float64(r.Params), shellQuote(r.Model), r.GGUFBase)
	for _, x := range r.GGUFRules {
		p(" \\\n    --tensor-type %s", shellQuote(x.String()))
	}
	p(" \\\n    model-f32.gguf model-recipe.gguf %s\n", r.GGUFBase)
	_, err := io.WriteString(w, b.String())
	return err
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(c rune) bool {
		return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_./:=@+,", c))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
