package conform

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"

	"logitscope/internal/analysis/attribution"
	"logitscope/internal/analysis/margins"
	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/quant"
	"logitscope/internal/run/sensitivity"
)

// SweepCheck asserts what a sensitivity sweep of the case's test over its
// panel finds: the forward sweep's first unit.
type SweepCheck struct {
	Unit string `json:"unit,omitempty"` // tensor (default), layer or kind
	// TopUnit is a regexp the first unit's name must match
	// ("layers\\.1\\.mlp\\.down_proj").
	TopUnit string `json:"top_unit"`
}

// RecipeCheck asserts what a recipe to a target makes of sweeps of the
// case's model over its panel (package sensitivity's Recipe): its
// measured mean KLD, and that it beats a uniform scheme no smaller.
type RecipeCheck struct {
	TargetBPW  float64  `json:"target_bpw"`
	Schemes    []string `json:"schemes,omitempty"` // default q8, q6, q4
	Unit       string   `json:"unit,omitempty"`
	MaxMeanKLD *float64 `json:"max_mean_kld,omitempty"`
	Beats      string   `json:"beats,omitempty"`
}

func (s *SweepCheck) check() error {
	if s.Unit == "" {
		s.Unit = attribution.ByTensor
	}
	if s.TopUnit == "" {
		return fmt.Errorf("sweep: top_unit is required: what else would the sweep assert?")
	}
	if _, err := regexp.Compile(s.TopUnit); err != nil {
		return fmt.Errorf("sweep: top_unit: %v", err)
	}
	return checkUnit("sweep", s.Unit)
}

func (r *RecipeCheck) check() error {
	if r.Unit == "" {
		r.Unit = attribution.ByTensor
	}
	if len(r.Schemes) == 0 {
		r.Schemes = []string{"q8", "q6", "q4"}
	}
	for _, s := range r.Schemes {
		if _, err := quant.ParseScheme(s); err != nil {
			return fmt.Errorf("recipe: %v", err)
		}
	}
	switch {
	case !(r.TargetBPW > 0):
		return fmt.Errorf("recipe: target_bpw %g: want bits per weight > 0", r.TargetBPW)
	case r.MaxMeanKLD == nil && r.Beats == "":
		return fmt.Errorf("recipe: give max_mean_kld or beats: what else would the recipe assert?")
	case r.MaxMeanKLD != nil && *r.MaxMeanKLD < 0:
		return fmt.Errorf("recipe: max_mean_kld %g: a KL divergence is never negative, so no case could pass", *r.MaxMeanKLD)
	case r.Beats != "" && !contains(r.Schemes, r.Beats):
		return fmt.Errorf("recipe: beats %q: not one of the schemes swept, %v", r.Beats, r.Schemes)
	}
	return checkUnit("recipe", r.Unit)
}

func checkUnit(what, unit string) error {
	switch unit {
	case attribution.ByTensor, attribution.ByLayer, attribution.ByKind:
		return nil
	}
	return fmt.Errorf("%s: unit %q: want tensor, layer or kind", what, unit)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// attribute runs the case's sweep and recipe checks over windows, adding
// what they found to m and returning the failures; the sweep's JSON and
// the recipe's go to dir.
func attribute(c Case, ck *checkpoint.Checkpoint, test string, windows [][]int, dir string, m *Metrics, log io.Writer) ([]string, error) {
	var failures []string
	if s := c.Sweep; s != nil {
		fmt.Fprintf(log, "sweep %s by %s over %d windows\n", test, s.Unit, len(windows))
		x, _, err := sensitivity.OpenVariant(ck, test, engine.Options{})
		if err != nil {
			return nil, fmt.Errorf("sweep: %w", err)
		}
		res, err := func() (*attribution.Result, error) {
			defer x.Close()
			units, err := sensitivity.Units(x.Changed(), x.Geometry().NumLayers, s.Unit)
			if err != nil {
				return nil, err
			}
			return sensitivity.Sweep(x, windows, units, sensitivity.Options{Unit: s.Unit, ForwardOnly: true, Margins: margins.Options{K: margins.DefaultK}})
		}()
		if err != nil {
			return nil, fmt.Errorf("sweep: %w", err)
		}
		res.Model, res.Test = ck.Source(), test
		if err := writeSealed(filepath.Join(dir, "sweep.json"), res.Marshal); err != nil {
			return nil, err
		}
		m.TopUnit = res.Units[0].Name
		if !regexp.MustCompile(s.TopUnit).MatchString(m.TopUnit) {
			failures = append(failures, fmt.Sprintf("top_unit %s (forward mean KLD %.4g) does not match %q; next: %s", m.TopUnit, res.Units[0].Forward.MeanKLD, s.TopUnit, res.Units[min(1, len(res.Units)-1)].Name))
		}
	}
	if rc := c.Recipe; rc != nil {
		fmt.Fprintf(log, "recipe at %g bpw from %v by %s over %d windows\n", rc.TargetBPW, rc.Schemes, rc.Unit, len(windows))
		var schemes []quant.Scheme
		for _, s := range rc.Schemes {
			scheme, _ := quant.ParseScheme(s) // checked
			schemes = append(schemes, scheme)
		}
		r, err := sensitivity.Recipe(ck, windows, sensitivity.RecipeOptions{Schemes: schemes, Unit: rc.Unit, TargetBPW: rc.TargetBPW,
			Margins: margins.Options{K: margins.DefaultK}, Dir: filepath.Join(dir, "recipe"), Log: log})
		if err != nil {
			return nil, fmt.Errorf("recipe: %w", err)
		}
		if err := writeSealed(filepath.Join(dir, "recipe.json"), r.Marshal); err != nil {
			return nil, err
		}
		kld, bpw := r.Measured.Effect.MeanKLD, r.BPW
		m.RecipeMeanKLD, m.RecipeBPW = &kld, &bpw
		if rc.MaxMeanKLD != nil && !(kld <= *rc.MaxMeanKLD) {
			failures = append(failures, fmt.Sprintf("recipe mean_kld %.4g > max %g (%.3f bpw)", kld, *rc.MaxMeanKLD, bpw))
		}
		for _, u := range r.Uniform {
			if u.Name != rc.Beats {
				continue
			}
			if r.Bytes > u.Bytes || !(kld < u.Effect.MeanKLD) {
				failures = append(failures, fmt.Sprintf("the recipe (%.3f bpw, mean KLD %.4g) does not beat %s (%.3f bpw, mean KLD %.4g)", bpw, kld, u.Name, u.BPW, u.Effect.MeanKLD))
			}
		}
	}
	return failures, nil
}

// writeSealed writes what marshal makes to path.
func writeSealed(path string, marshal func() ([]byte, error)) error {
	data, err := marshal()
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
