package attribution

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"logitscope/internal/format/seal"
)

// F32 is the option of keeping a unit's matrices as the reference's:
// four bytes a weight and no error (variant.SchemeF32).
const F32 = "f32"

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
	// Additivity is the base scheme's sweep's forward additivity (Result):
	// how far a sum of units' KLDs is to be trusted.
	Additivity float64 `json:"additivity"`
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

// Measure records what the uniform schemes (their Name, Bytes and
// Effect) and the recipe's variant measured over the same panel.
func (r *Recipe) Measure(uniform []Measured, recipe Effect) {
	r.Uniform = slices.Clone(uniform)
	for i := range r.Uniform {
		r.Uniform[i].BPW = 8 * float64(r.Uniform[i].Bytes) / float64(r.Params)
	}
	r.Measured = &Measured{Name: "recipe", Bytes: r.Bytes, BPW: r.BPW, Effect: recipe}
}

// Marshal is r as sealed, indented JSON.
func (r *Recipe) Marshal() ([]byte, error) {
	return seal.Marshal(r, "seal", func(s string) { r.Seal = s })
}

// Plan picks a scheme per unit from forward sweeps of the same units in
// different schemes (one Result each, ForwardOnly or not), or f32: the
// picks of least predicted KLD, the sum of the units' forward KLDs, whose
// bytes stay within budget, by a knapsack over the units' options. The
// frontier is the greedy path of exllamav3's optimizer and llama.cpp PR
// #15550's solver: each unit starts in its smallest option and the
// upgrades of most ΔKLD per byte come first, on each unit's lower convex
// hull, so that an option that a cheaper and a dearer one dominate
// between them is never a step, and a noisy measure that makes more bits
// look worse is skipped rather than taken. Between the frontier's points
// a greedy fill is not the best: a large step that no longer fits blocks
// a unit that leaving out smaller steps elsewhere would pay for.
func Plan(sweeps []*Result, budget int64) (*Recipe, error) {
	picks, options, err := optionsOf(sweeps)
	if err != nil {
		return nil, err
	}
	r := &Recipe{Kind: RecipeKind, Version: RecipeVersion, Unit: sweeps[0].Unit, Budget: budget}
	var least int64
	for i, p := range picks {
		r.Params += p.Params
		least += options[i][0].Bytes
	}
	if least > budget {
		return nil, fmt.Errorf("the target, %s, is below the smallest recipe: every unit in its smallest scheme takes %s", Size(budget), Size(least))
	}
	r.Frontier = frontier(options, r.Params)
	// The knapsack's rounding leaves some bytes over, which a greedy fill
	// spends; a greedy fill from the smallest options is kept where it
	// predicts less.
	best, kld := []int(nil), math.Inf(1)
	for _, start := range [][]int{make([]int, len(options)), knapsack(options, budget)} {
		at := fill(options, start, budget)
		if k := predicted(options, at); k < kld {
			best, kld = at, k
		}
	}
	for i, j := range best {
		picks[i].Option = options[i][j]
		r.Bytes += picks[i].Bytes
		r.Predicted += picks[i].KLD
	}
	r.Picks, r.BPW = picks, 8*float64(r.Bytes)/float64(r.Params)
	r.Base = r.base(sweeps[0].Units[0].Format)
	for _, s := range sweeps {
		if s.Units[0].Format == r.Base {
			r.Additivity = s.Additivity.Forward
		}
	}
	r.Rules = Rules(r.Assignment(), r.Base)
	return r, nil
}

// frontier is the greedy path from every unit in its smallest option to
// every unit in its best (Plan), a point per step.
func frontier(options [][]Option, params int64) []Point {
	type step struct {
		from, to Option
		ratio    float64
	}
	var steps []step
	var bytes int64
	var kld float64
	for _, o := range options {
		h := hull(o)
		bytes += h[0].Bytes
		kld += h[0].KLD
		for j := 1; j < len(h); j++ {
			steps = append(steps, step{h[j-1], h[j], (h[j-1].KLD - h[j].KLD) / float64(h[j].Bytes-h[j-1].Bytes)})
		}
	}
	// On a convex hull each unit's ratios fall, so sorting every step by
	// ratio keeps each unit's steps in order.
	slices.SortStableFunc(steps, func(a, b step) int { return cmp.Compare(b.ratio, a.ratio) })
	point := func() Point {
		return Point{Bytes: bytes, BPW: 8 * float64(bytes) / float64(params), KLD: max(kld, 0)} // 0 less rounding
	}
	f := []Point{point()}
	for _, s := range steps {
		bytes += s.to.Bytes - s.from.Bytes
		kld += s.to.KLD - s.from.KLD
		f = append(f, point())
	}
	return f
}

// fill spends what budget leaves over from the picks at (an option index
// per unit) on upgrades, the one of most ΔKLD per byte that fits first.
func fill(options [][]Option, at []int, budget int64) []int {
	at = slices.Clone(at)
	var bytes int64
	for i, j := range at {
		bytes += options[i][j].Bytes
	}
	for {
		unit, to, ratio := -1, 0, 0.0
		for i, opts := range options {
			from := opts[at[i]]
			for j, o := range opts {
				d := o.Bytes - from.Bytes
				if d > 0 && bytes+d <= budget && o.KLD < from.KLD {
					if r := (from.KLD - o.KLD) / float64(d); r > ratio {
						unit, to, ratio = i, j, r
					}
				}
			}
		}
		if unit < 0 {
			return at
		}
		bytes += options[unit][to].Bytes - options[unit][at[unit]].Bytes
		at[unit] = to
	}
}

// predicted is Σ of the picked options' KLDs.
func predicted(options [][]Option, at []int) float64 {
	var k float64
	for i, j := range at {
		k += options[i][j].KLD
	}
	return k
}

// knapsack picks an option per unit (options sorted by bytes, the firsts
// within budget together) of least Σ KLD whose Σ bytes stay within
// budget: a multiple-choice knapsack over bytes counted in steps of
// budget/n, rounded up so that the picks never exceed the budget (they
// may miss the best by at most a step's bytes per unit), with n as fine
// as 2²⁶ cells of the table allow, at most 2¹⁶. Where the rounding leaves
// no picks at all, the firsts are.
func knapsack(options [][]Option, budget int64) []int {
	q := max(1, budget/int64(min(1<<16, max(64, (1<<26)/len(options)))))
	n := int(budget / q)
	cost := func(o Option) int { return int((o.Bytes + q - 1) / q) }
	// best[b]: the least KLD of the units so far within b steps.
	best := make([]float64, n+1)
	choice := make([][]uint8, len(options))
	for i, opts := range options {
		next := make([]float64, n+1)
		choice[i] = make([]uint8, n+1)
		for b := range next {
			next[b] = math.Inf(1)
			for j, o := range opts {
				if c := cost(o); c <= b && best[b-c]+o.KLD < next[b] {
					next[b], choice[i][b] = best[b-c]+o.KLD, uint8(j)
				}
			}
		}
		best = next
	}
	picks := make([]int, len(options))
	if math.IsInf(best[n], 1) {
		return picks
	}
	b := n
	for i := len(options) - 1; i >= 0; i-- {
		picks[i] = int(choice[i][b])
		b -= cost(options[i][picks[i]])
	}
	return picks
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
	for _, o := range options {
		slices.SortStableFunc(o, func(a, b Option) int { return cmp.Compare(a.Bytes, b.Bytes) })
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
// recipe, and the commands that make it.
func (r *Recipe) WriteText(w io.Writer) error {
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	p("recipe: %d units by %s, target %s of matrices (%.3f bpw)\n", len(r.Picks), r.Unit, Size(r.Budget), 8*float64(r.Budget)/float64(r.Params))
	p("\nfrontier (predicted KLD: Σ of the units' forward KLDs; the %s sweep's forward additivity is %.3f):\n", r.Base, r.Additivity)
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
	if r.GGUFBase != "" {
		p("\nwith llama.cpp's quantizer (its matrices then take %s, %.3f bpw), from an f32 GGUF\n(logitscope export --model %s --gguf model-f32.gguf; or export --type %s --tensor-type RULE... does both):\n  llama-quantize",
			Size(r.GGUFBytes), 8*float64(r.GGUFBytes)/float64(r.Params), shellQuote(r.Model), r.GGUFBase)
		for _, x := range r.GGUFRules {
			p(" \\\n    --tensor-type %s", shellQuote(x.String()))
		}
		p(" \\\n    model-f32.gguf model-recipe.gguf %s\n", r.GGUFBase)
	}
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
