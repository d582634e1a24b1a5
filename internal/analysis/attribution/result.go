// Package attribution holds what a sensitivity sweep found and what a
// recipe makes of it: which units (a matrix, a layer's matrices, a kind
// of matrix) a quantization's damage comes from, each clear call's
// culprits, the hidden state's divergence by layer (Result), and a scheme
// per unit within a size, from the frontier of size against predicted KLD
// (Plan, Recipe). The sweeps themselves run in package sensitivity; the
// CLI, conform and the page read, print and draw these documents.
package attribution

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/format/seal"
)

// The ways a sweep groups matrices into units (Options.Unit).
const (
	ByTensor = "tensor" // each matrix alone
	ByLayer  = "layer"  // a transformer block's matrices together
	ByKind   = "kind"   // one kind (mlp.down_proj) in every layer together
)

// Unit is what a sweep quantizes, or restores, at once.
type Unit struct {
	Name string `json:"name"`
	// Layer is the first layer a unit's matrices act in: a sweep
	// recomputes from there, on the residual stream entering it. -1 is the
	// embeddings (everything is recomputed), NumLayers the LM head.
	Layer   int      `json:"layer"`
	Kind    string   `json:"kind"`
	Tensors []string `json:"tensors"`
	Format  string   `json:"format"` // the test's formats, "+"-joined
	Params  int64    `json:"params"`
	Bytes   int64    `json:"bytes"` // the test's stored size
}

// Bits is the unit's stored bits per weight in the test.
func (u Unit) Bits() float64 { return 8 * float64(u.Bytes) / float64(u.Params) }

// Kind and Version identify a sweep's JSON.
const (
	Kind    = "logitscope-sensitivity"
	Version = 1
)

// Result is a sweep: what the whole test does to the reference's logits,
// what each unit does alone (forward) and what restoring it takes away
// (reverse), the controls, the clear calls' culprits and the hidden
// state's divergence by layer. Sealed (Marshal): the seal is the sha256
// of the canonical JSON without it.
type Result struct {
	Kind    string `json:"kind"`
	Version int    `json:"version"`
	Key     string `json:"key"`
	Model   string `json:"model"`
	Test    string `json:"test"`
	Unit    string `json:"unit"`
	// ForwardOnly says the reverse sweep was not run (Options): no
	// reverse effects, reverse additivity or culprits.
	ForwardOnly bool `json:"forward_only,omitempty"`
	// NumLayers is the model's; Device where the runs ran ("cpu", or "gpu:
	// <adapter>": a device runs whole windows, so its sweep has no Layers).
	NumLayers int               `json:"num_layers"`
	Device    string            `json:"device,omitempty"`
	Windows   int               `json:"windows"`
	Positions int               `json:"positions"`
	Criterion margins.Criterion `json:"criterion"`
	// Whole is the test against the reference: every unit quantized.
	Whole Effect `json:"whole"`
	// Floor is the reference against itself with every matrix perturbed by
	// bf16-rounding-sized noise: what no quantization can be told from.
	Floor *Effect `json:"floor,omitempty"`
	// Additivity is Σ of the units' effects over the whole's, in mean KLD:
	// near 1 when the units' errors add up, below when they cancel or
	// saturate, above when they compound.
	Additivity Additivity   `json:"additivity"`
	Units      []UnitResult `json:"units"` // by forward mean KLD, largest first
	Layers     []Divergence `json:"layers"`
	// Start is the layer whose relative error grows most over the one
	// before it: where the divergence starts.
	Start int    `json:"start_layer"`
	Calls []Call `json:"clear_calls"`
	Seal  string `json:"seal"`
}

// Effect is what one run did to the reference's logits over the panel.
type Effect struct {
	MeanKLD float64 `json:"mean_kld"`
	KLD99   float64 `json:"kld_99"`
	MaxKLD  float64 `json:"max_kld"`
	Flips   int     `json:"flips"`
	Clear   int     `json:"clear"`
	// MeanDeltaP is the mean of p_test(target) − p_ref(target).
	MeanDeltaP float64 `json:"mean_delta_p"`
}

// Additivity compares the units' effects with the whole's (Result).
type Additivity struct {
	// Forward is Σ mean KLD(unit alone) / mean KLD(whole).
	Forward float64 `json:"forward"`
	// Reverse is Σ (mean KLD(whole) − mean KLD(whole, unit restored)) /
	// mean KLD(whole).
	Reverse float64 `json:"reverse"`
}

// UnitResult is one unit's sweeps.
type UnitResult struct {
	Unit
	Forward Effect `json:"forward"` // this unit alone from the test
	Reverse Effect `json:"reverse"` // every other unit from the test
	// Iso is the forward sweep with the unit's error replaced by
	// isotropic noise of the same norm (Options.Controls): a real error
	// that hurts more than Iso hurts by its direction.
	Iso *Effect `json:"iso,omitempty"`
	// RelError is ‖W_test − W_ref‖ / ‖W_ref‖ over the unit's matrices
	// (Options.Controls).
	RelError *float64 `json:"rel_error,omitempty"`
}

// Divergence is one layer's hidden state in the test against the
// reference's: the residual stream leaving the layer, at each position
// that predicts a target.
type Divergence struct {
	Layer int `json:"layer"`
	// MeanRel is the mean of ‖h_test − h_ref‖/‖h_ref‖; MeanCos of the
	// cosine similarity; SQNR is 10·log10(Σ‖h_ref‖² / Σ‖h_test − h_ref‖²).
	MeanRel float64 `json:"mean_rel_error"`
	MaxRel  float64 `json:"max_rel_error"`
	MeanCos float64 `json:"mean_cosine"`
	MinCos  float64 `json:"min_cosine"`
	SQNR    float64 `json:"sqnr_db"`
	// Rel is each position's relative error, in the panel's order.
	Rel []float32 `json:"rel_error"`
}

// Call is a clear call of the whole test and the units whose restoring
// gives its margin back (the reverse sweep's runs of its window).
type Call struct {
	Window   int `json:"window"`   // 0-based
	Position int `json:"position"` // in the window
	Index    int `json:"index"`    // in the panel
	Ref      int `json:"ref"`      // a: the reference's choice
	Test     int `json:"test"`     // b: the test's
	// Margin is z_ref[a] − z_ref[b]; Gap is z_test[a] − z_test[b].
	Margin float64 `json:"margin"`
	Gap    float64 `json:"gap"`
	// Culprits are the units, those that undo the flip alone first, then
	// by share; Total is Σ of every unit's share.
	Culprits []Share `json:"culprits"`
	Total    float64 `json:"total_share"`
}

// Share is what restoring one unit does to a clear call: Share is the
// part of the margin it gives back, (gap_unit − Gap)/(Margin − Gap);
// Undoes says the reference's choice is the top-1 again.
type Share struct {
	Unit   string  `json:"unit"`
	Share  float64 `json:"share"`
	Undoes bool    `json:"undoes"`
}

// Marshal is r as sealed, indented JSON.
func (r *Result) Marshal() ([]byte, error) {
	for i := range r.Layers {
		if math.IsInf(r.Layers[i].SQNR, 1) {
			r.Layers[i].SQNR = 999 // identical states: JSON has no infinity
		}
	}
	return seal.Marshal(r, "seal", func(s string) { r.Seal = s })
}

// WriteText writes the sweep as tables: the whole and the floor, the
// units ranked, the divergence by layer and the clear calls' culprits,
// top of them (0: all).
func (r *Result) WriteText(w io.Writer, top int, text func(id int) string) error {
	var b strings.Builder
	p := func(f string, a ...any) { fmt.Fprintf(&b, f, a...) }
	p("sensitivity: %d units by %s, %d windows, %d positions; %s\n", len(r.Units), r.Unit, r.Windows, r.Positions, r.Criterion.Text)
	p("whole test:  mean KLD %.6f  99%% %.6f  flips %d (%d clear)  mean Δp %+.5f\n", r.Whole.MeanKLD, r.Whole.KLD99, r.Whole.Flips, r.Whole.Clear, r.Whole.MeanDeltaP)
	if r.Floor != nil {
		p("noise floor: mean KLD %.6f  99%% %.6f  flips %d (%d clear)  (bf16-rounding noise on every reference matrix)\n", r.Floor.MeanKLD, r.Floor.KLD99, r.Floor.Flips, r.Floor.Clear)
	}
	if r.ForwardOnly {
		p("additivity:  forward %.3f (Σ units alone / whole); no reverse sweep\n\n", r.Additivity.Forward)
	} else {
		p("additivity:  forward %.3f (Σ units alone / whole), reverse %.3f (Σ restored / whole)\n\n", r.Additivity.Forward, r.Additivity.Reverse)
	}
	nw := len("unit")
	for _, u := range r.Units {
		nw = max(nw, len(u.Name))
	}
	p("%-4s %-*s %-6s %5s  %10s %10s %5s %5s %9s", "rank", nw, "unit", "format", "bpw", "fwd KLD", "fwd 99%", "flips", "clear", "Δp")
	if !r.ForwardOnly {
		p("  %10s %5s", "rev ΔKLD", "clear")
	}
	iso := len(r.Units) > 0 && r.Units[0].Iso != nil
	if iso {
		p("  %10s %7s", "iso KLD", "rel err")
	}
	p("\n")
	for i, u := range r.Units {
		if top > 0 && i == top {
			p("… %d more units\n", len(r.Units)-top)
			break
		}
		p("%-4d %-*s %-6s %5.2f  %10.6f %10.6f %5d %5d %+9.5f", i+1, nw, u.Name, u.Format, u.Bits(),
			u.Forward.MeanKLD, u.Forward.KLD99, u.Forward.Flips, u.Forward.Clear, u.Forward.MeanDeltaP)
		if !r.ForwardOnly {
			p("  %10.6f %5d", r.Whole.MeanKLD-u.Reverse.MeanKLD, u.Reverse.Clear)
		}
		if u.Iso != nil {
			p("  %10.6f %7.4f", u.Iso.MeanKLD, *u.RelError)
		}
		p("\n")
	}
	if len(r.Layers) == 0 {
		p("\nno divergence by layer: swept on %s, which runs each window from the embeddings\n", r.Device)
	} else {
		p("\ndivergence by layer (the residual stream leaving it, test against reference):\n")
		p("%-5s %10s %10s %10s %10s %9s\n", "layer", "mean rel", "max rel", "mean cos", "min cos", "SQNR dB")
	}
	for _, d := range r.Layers {
		mark := ""
		if d.Layer == r.Start {
			mark = "  ← grows most here"
		}
		p("%-5d %10.6f %10.6f %10.7f %10.7f %9.2f%s\n", d.Layer, d.MeanRel, d.MaxRel, d.MeanCos, d.MinCos, d.SQNR, mark)
	}
	p("\nclear calls: %d\n", len(r.Calls))
	for i, c := range r.Calls {
		if top > 0 && i == top {
			p("… %d more\n", len(r.Calls)-top)
			break
		}
		p("  position %d (window %d, %d): reference %s, test %s, margin %.3f → %.3f", c.Index, c.Window+1, c.Position, quote(text, c.Ref), quote(text, c.Test), c.Margin, c.Gap)
		if r.ForwardOnly {
			p("\n")
			continue
		}
		p("; restoring:")
		for _, s := range c.Culprits {
			undo := ""
			if s.Undoes {
				undo = " undoes it"
			}
			p(" %s %.0f%%%s;", s.Unit, 100*s.Share, undo)
		}
		p(" Σ %.0f%%\n", 100*c.Total)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func quote(text func(int) string, id int) string {
	if text == nil {
		return fmt.Sprintf("#%d", id)
	}
	return fmt.Sprintf("%q", text(id))
}

// Parse reads a sealed sweep (Kind) or recipe (RecipeKind), name saying
// whose in errors: exactly one of the two comes back. A document of
// another kind or version, or whose seal does not match its content, is
// refused.
func Parse(data []byte, name string) (*Result, *Recipe, error) {
	var head struct {
		Kind    string `json:"kind"`
		Version int    `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, nil, fmt.Errorf("%s: %v", name, err)
	}
	want := map[string]int{Kind: Version, RecipeKind: RecipeVersion}
	if v, ok := want[head.Kind]; !ok {
		return nil, nil, fmt.Errorf("%s: kind %q: want %q (logitscope sensitivity --out) or %q (logitscope recipe --json)", name, head.Kind, Kind, RecipeKind)
	} else if head.Version != v {
		return nil, nil, fmt.Errorf("%s: %s version %d: this build reads version %d", name, head.Kind, head.Version, v)
	}
	if err := seal.Verify(data, "seal", name); err != nil {
		return nil, nil, err
	}
	if head.Kind == RecipeKind {
		var r Recipe
		if err := json.Unmarshal(data, &r); err != nil {
			return nil, nil, fmt.Errorf("%s: %v", name, err)
		}
		return nil, &r, nil
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, nil, fmt.Errorf("%s: %v", name, err)
	}
	for _, u := range r.Units {
		if u.Layer < -1 || u.Layer > r.NumLayers {
			return nil, nil, fmt.Errorf("%s: unit %s: layer %d of a model of %d", name, u.Name, u.Layer, r.NumLayers)
		}
	}
	if len(r.Layers) > r.NumLayers {
		return nil, nil, fmt.Errorf("%s: divergence of %d layers in a model of %d", name, len(r.Layers), r.NumLayers)
	}
	return &r, nil, nil
}
