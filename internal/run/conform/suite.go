// Package conform runs conformance suites: cases that capture a reference
// and a test variant of a model, compare them with package margins and
// hold the metrics to thresholds, so that CI can gate an engine change on
// what it does to the logits. Results go to summary.json, a table and
// JUnit XML. See tiny.json beside this file for the format.
package conform

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"logitscope/internal/engine"
	"logitscope/internal/format/lookup"
	"logitscope/internal/model/hubquant"
)

// Suite is a conformance suite file. Paths in it (model directories,
// panels, goldens) are relative to the suite file, so that a suite and its
// data can move together.
type Suite struct {
	Name        string   `json:"name"`
	Description docLines `json:"description,omitempty"`
	Cases       []Case   `json:"cases"`
	dir         string
	sha256      string // the file's, which summaries record
}

// Case compares a test variant with a reference variant of one model on
// either greedy prompts or a teacher-forced panel.
type Case struct {
	Name      string `json:"name"`                // its outputs go to OUT/<name>/
	Model     string `json:"model"`               // a directory, or preset:NAME
	Reference string `json:"reference,omitempty"` // default f32
	Test      string `json:"test"`
	// Runtime, when set, is where the test side runs (capture's
	// --runtime: llama.cpp runs a GGUF test through llama.cpp's own
	// library); the reference runs where the suite runs.
	Runtime    string     `json:"runtime,omitempty"`
	Prompts    []string   `json:"prompts,omitempty"`
	MaxNew     int        `json:"max_new,omitempty"` // default 8
	Panel      string     `json:"panel,omitempty"`
	Window     int        `json:"window,omitempty"` // default 128, as capture's
	Golden     string     `json:"golden,omitempty"` // a dump the reference must match
	Thresholds Thresholds `json:"thresholds"`
	// Domains bound a panel's domains each on its own (their windows'
	// domain, from a .jsonl panel in the seed's layout): a change that
	// hurts code and helps prose fails on code. max_abs_logit_diff, a
	// golden's, has no domain.
	Domains map[string]Thresholds `json:"domains,omitempty"`
	// Sweep and Recipe, with a panel, also sweep the units over it on the
	// CPU (attribution.go): which matrix the damage comes from, and what a
	// recipe to a target size measures.
	Sweep  *SweepCheck  `json:"sweep,omitempty"`
	Recipe *RecipeCheck `json:"recipe,omitempty"`
	// Hub sets the writer of a test "hub:FORMAT" (quantize --format's
	// names), which quantizes the model into OUT/<case>/hub first; unset
	// settings keep the format's defaults.
	Hub *HubSettings `json:"hub,omitempty"`
	// Activations is the test side's capture --activations (default
	// f32); the rounded ones run natively: give runtime native.
	Activations string `json:"activations,omitempty"`
}

// HubSettings are quantize --format's settings, by its flags' names.
type HubSettings struct {
	Bits       *int    `json:"bits,omitempty"`
	GroupSize  *int    `json:"group_size,omitempty"`
	Sym        *bool   `json:"sym,omitempty"`
	DescAct    *bool   `json:"desc_act,omitempty"`
	Checkpoint *string `json:"checkpoint_format,omitempty"`
}

// options are h as hubquant's writers take them.
func (h *HubSettings) options() hubquant.Options {
	o := hubquant.Options{Bits: 4, GroupSize: 128, Sym: true, Given: map[string]bool{}}
	if h == nil {
		return o
	}
	set := func(flag string, given bool) { o.Given[flag] = given }
	if set("bits", h.Bits != nil); h.Bits != nil {
		o.Bits = *h.Bits
	}
	if set("group-size", h.GroupSize != nil); h.GroupSize != nil {
		o.GroupSize = *h.GroupSize
	}
	if set("sym", h.Sym != nil); h.Sym != nil {
		o.Sym = *h.Sym
	}
	if set("desc-act", h.DescAct != nil); h.DescAct != nil {
		o.DescAct = *h.DescAct
	}
	if set("checkpoint-format", h.Checkpoint != nil); h.Checkpoint != nil {
		o.Checkpoint = *h.Checkpoint
	}
	return o
}

// hubWriter is the format a test "hub:NAME" writes, or nil for any other
// test.
func (c Case) hubWriter() (lookup.Format, error) {
	name, ok := strings.CutPrefix(c.Test, "hub:")
	if !ok {
		if c.Hub != nil {
			return nil, fmt.Errorf("hub: settings for a test that is not hub:FORMAT (%s)", strings.Join(hubquant.WriterNames(), ", "))
		}
		return nil, nil
	}
	w, ok := hubquant.Writers[name]
	if !ok {
		return nil, fmt.Errorf("test %q: want hub: and one of %s", c.Test, strings.Join(hubquant.WriterNames(), ", "))
	}
	f, err := w(c.Hub.options())
	if err != nil {
		return nil, fmt.Errorf("test %s: %w", c.Test, err)
	}
	return f, nil
}

// Thresholds are optional: a nil one is not checked. They are pointers so
// that a threshold of zero is a real bound rather than "unset".
type Thresholds struct {
	MaxClearFlips   *int     `json:"max_clear_flips,omitempty"`
	MaxMeanKLD      *float64 `json:"max_mean_kld,omitempty"`
	MinSameTop1     *float64 `json:"min_same_top1,omitempty"`
	MaxAbsLogitDiff *float64 `json:"max_abs_logit_diff,omitempty"` // against golden; default 0 there
}

// Load reads and checks a suite. A malformed suite stops the run before
// any case runs: a typo should not cost a CI run its captures.
func Load(path string) (*Suite, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := parse(b, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	sum := sha256.Sum256(b)
	s.sha256 = hex.EncodeToString(sum[:])
	return s, nil
}

// parse decodes and checks a suite whose relative paths start at dir.
func parse(b []byte, dir string) (*Suite, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields() // a misspelt threshold must not silently pass
	s := &Suite{dir: dir}
	if err := dec.Decode(s); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("data after the suite's closing brace")
	}
	return s, s.check()
}

// docLines is a description as one string or, for a suite documented at
// length (JSON has no comments), a list of lines.
type docLines []string

func (d *docLines) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*d = docLines{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(d))
}

func (s *Suite) check() error {
	if s.Name == "" {
		s.Name = "conform"
	}
	if len(s.Cases) == 0 {
		return fmt.Errorf("no cases")
	}
	seen := map[string]bool{}
	for i := range s.Cases {
		c := &s.Cases[i]
		if err := checkName(c.Name); err != nil {
			return fmt.Errorf("case %d: %v", i+1, err)
		}
		// Directory names compare without case on some file systems.
		key := strings.ToLower(c.Name)
		if seen[key] {
			return fmt.Errorf("case %q: two cases share this name", c.Name)
		}
		seen[key] = true
		if err := c.check(); err != nil {
			return fmt.Errorf("case %q: %v", c.Name, err)
		}
		if c.Golden != "" {
			if _, err := os.Stat(s.path(c.Golden)); err != nil {
				return fmt.Errorf("case %q: golden: %v", c.Name, err)
			}
		}
	}
	return nil
}

// checkName refuses a case name that is not a plain directory name: a
// case's outputs replace OUT/<name>/, so "..", "a/b" or "" must never
// reach the file system.
func checkName(name string) error {
	switch name {
	case "":
		return fmt.Errorf("no name")
	case ".", "..":
		return fmt.Errorf("name %q: not a directory name", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return fmt.Errorf("name %q: a case name is its output directory's name: letters, digits, '-', '_' and '.' only", name)
		}
	}
	return nil
}

func (c *Case) check() error {
	if c.Reference == "" {
		c.Reference = "f32"
	}
	if c.MaxNew == 0 {
		c.MaxNew = 8
	}
	if c.Window == 0 {
		c.Window = 128
	}
	if err := c.Thresholds.check(""); err != nil {
		return err
	}
	if err := c.checkRuntime(); err != nil {
		return err
	}
	for _, d := range slices.Sorted(maps.Keys(c.Domains)) {
		t := c.Domains[d]
		switch {
		case c.Panel == "":
			return fmt.Errorf("domains: a panel's windows have domains: give one")
		case t.MaxAbsLogitDiff != nil:
			return fmt.Errorf("domains %q: max_abs_logit_diff is a golden dump's, which has no domains", d)
		}
		if err := t.check(fmt.Sprintf("domains %q: ", d)); err != nil {
			return err
		}
	}
	t := c.Thresholds
	switch {
	case c.Model == "":
		return fmt.Errorf("no model")
	case c.Test == "":
		return fmt.Errorf("no test variant")
	case (len(c.Prompts) > 0) == (c.Panel != ""):
		return fmt.Errorf("give either prompts or a panel")
	case c.MaxNew < 1:
		return fmt.Errorf("max_new %d: must be at least 1", c.MaxNew)
	case c.Window < 2:
		return fmt.Errorf("window %d: a window needs at least 2 tokens", c.Window)
	case c.Golden != "" && len(c.Prompts) > 1:
		return fmt.Errorf("a golden dump matches one capture: give one prompt or a panel")
	case t.MaxAbsLogitDiff != nil && c.Golden == "":
		return fmt.Errorf("max_abs_logit_diff needs a golden dump")
	case (c.Sweep != nil || c.Recipe != nil) && c.Panel == "":
		return fmt.Errorf("a sweep or a recipe measures over a panel: give one")
	}
	if _, err := c.hubWriter(); err != nil {
		return err
	}
	if err := engine.CheckActivations(c.Activations); err != nil {
		return err
	}
	if c.Sweep != nil {
		if err := c.Sweep.check(); err != nil {
			return err
		}
	}
	if c.Recipe != nil {
		return c.Recipe.check()
	}
	return nil
}

// check refuses bounds no case could pass; where prefixes its messages.
func (t Thresholds) check(where string) error {
	switch {
	case t.MinSameTop1 != nil && (*t.MinSameTop1 < 0 || *t.MinSameTop1 > 1):
		return fmt.Errorf("%smin_same_top1 %g: a fraction, 0 to 1", where, *t.MinSameTop1)
	case t.MaxMeanKLD != nil && *t.MaxMeanKLD < 0:
		return fmt.Errorf("%smax_mean_kld %g: a KL divergence is never negative, so no case could pass", where, *t.MaxMeanKLD)
	case t.MaxClearFlips != nil && *t.MaxClearFlips < 0:
		return fmt.Errorf("%smax_clear_flips %d: a count is never negative, so no case could pass", where, *t.MaxClearFlips)
	case t.MaxAbsLogitDiff != nil && *t.MaxAbsLogitDiff < 0:
		return fmt.Errorf("%smax_abs_logit_diff %g: a distance is never negative, so no case could pass", where, *t.MaxAbsLogitDiff)
	}
	return nil
}

// path resolves a path in the suite relative to the suite file.
func (s *Suite) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(s.dir, p)
}
