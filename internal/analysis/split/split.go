// Package split divides a quantized model's divergence from its float
// reference between the file and the engine that runs it. Three captures
// of the same token ids take part: the reference (float weights), the
// file decoded exactly (logitscope on the GGUF: what the format does to
// the weights) and the engine (llama.cpp on the same GGUF: the format
// plus the engine's own arithmetic, such as its 8-bit activations). At
// each position the file's share is KLD(reference ‖ file) and its flips;
// the engine's share is KLD(file ‖ engine) and its flips; and each flip of
// the engine against the reference gets its cause: the file's, the
// engine's alone (the exact decode does not have it), or both.
package split

import (
	"fmt"
	"io"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/receipt"
)

// Causes of a position's top-1 choices: a, f, e are the reference's, the
// file's and the engine's argmax.
const (
	Same       = ""       // a = f = e
	File       = "file"   // a ≠ f = e: the file's flip, which the engine keeps
	Engine     = "engine" // a = f ≠ e: the engine alone: the exact decode has no flip here
	Both       = "both"   // a ≠ f, e ∉ {a, f}: the file flipped, the engine moved it again
	EngineUndo = "undone" // a ≠ f, e = a: the file's flip, which the engine's arithmetic undid
)

// Causes are the causes a flip can have, in the order reports list them.
var Causes = []string{File, Engine, Both, EngineUndo}

// Side is one share of the divergence: its mean KLD (with its standard
// error) and its flips, over the positions.
type Side struct {
	KLD   margins.Estimate `json:"kld_mean"`
	Flips int              `json:"flips"`
	// SameTop is the share of positions whose argmax the two agree on.
	SameTop float64 `json:"same_top"`
}

// Position is one row's split.
type Position struct {
	Index int `json:"index"`
	// KLDFile is KLD(reference ‖ file), KLDEngine KLD(file ‖ engine),
	// KLDTotal KLD(reference ‖ engine).
	KLDFile   float64 `json:"kld_file"`
	KLDEngine float64 `json:"kld_engine"`
	KLDTotal  float64 `json:"kld_total"`
	Ref       int     `json:"ref_choice"`
	FileTop   int     `json:"file_choice"`
	EngineTop int     `json:"engine_choice"`
	Cause     string  `json:"cause,omitempty"` // one of Causes, or none
	// EngineMargin is the file's own margin between its choice and the
	// engine's, z_file[f] − z_file[e], on an engine flip: how little the
	// engine had to move.
	EngineMargin float64 `json:"engine_margin,omitempty"`
}

// Report is the three-way split.
type Report struct {
	Positions int `json:"positions"`
	Vocab     int `json:"vocab"`
	// File is what the file does (reference → file), Engine what the
	// engine adds (file → engine), Total both (reference → engine).
	File   Side `json:"file"`
	Engine Side `json:"engine"`
	Total  Side `json:"total"`
	// ByCause counts the positions of each cause (Causes).
	ByCause map[string]int `json:"by_cause"`
	// EngineOnly lists the positions whose flip the engine alone caused.
	EngineOnly []int      `json:"engine_only"`
	Rows       []Position `json:"rows"`
}

// Compare splits the divergence of engine from ref at each position,
// file being the exact decode of the weights engine ran. targets, if not
// nil, are the panel's next tokens (as margins.Compare takes them).
func Compare(ref, file, engine *dump.Logits, targets []int, opt margins.Options) (*Report, error) {
	for _, d := range []struct {
		name string
		l    *dump.Logits
	}{{"file", file}, {"engine", engine}} {
		if d.l.Rows != ref.Rows || d.l.Vocab != ref.Vocab {
			return nil, fmt.Errorf("split: the %s is %d rows × %d vocab, the reference %d × %d: not the same positions",
				d.name, d.l.Rows, d.l.Vocab, ref.Rows, ref.Vocab)
		}
	}
	rf, err := margins.Compare(ref, file, targets, opt)
	if err != nil {
		return nil, fmt.Errorf("split: reference → file: %w", err)
	}
	fe, err := margins.Compare(file, engine, targets, opt)
	if err != nil {
		return nil, fmt.Errorf("split: file → engine: %w", err)
	}
	re, err := margins.Compare(ref, engine, targets, opt)
	if err != nil {
		return nil, fmt.Errorf("split: reference → engine: %w", err)
	}
	r := &Report{Positions: ref.Rows, Vocab: ref.Vocab, File: side(rf), Engine: side(fe), Total: side(re),
		ByCause: map[string]int{}, EngineOnly: []int{}}
	for _, c := range Causes {
		r.ByCause[c] = 0
	}
	for i := range rf.Positions {
		p := Position{Index: i, KLDFile: rf.Positions[i].KLD, KLDEngine: fe.Positions[i].KLD, KLDTotal: re.Positions[i].KLD,
			Ref: rf.Positions[i].RefChoice, FileTop: rf.Positions[i].TestChoice, EngineTop: fe.Positions[i].TestChoice}
		p.Cause = CauseOf(p.Ref, p.FileTop, p.EngineTop)
		if p.Cause != Same {
			r.ByCause[p.Cause]++
		}
		if p.Cause == Engine {
			p.EngineMargin = fe.Positions[i].Margin
			r.EngineOnly = append(r.EngineOnly, i)
		}
		r.Rows = append(r.Rows, p)
	}
	return r, nil
}

// CauseOf is why the engine's choice e differs from the reference's a (or
// the file's f from a), Same when all three agree.
func CauseOf(a, f, e int) string {
	switch {
	case a == f && f == e:
		return Same
	case a == f:
		return Engine
	case e == f:
		return File
	case e == a:
		return EngineUndo
	}
	return Both
}

func side(r *margins.Report) Side {
	return Side{KLD: r.Summary.KLD, Flips: r.Summary.Flips, SameTop: r.Summary.SameTop.Value}
}

// WriteText prints the split as one view: what the file does next to
// what the engine adds, the flips by cause and the first listed (0: 10,
// negative: none) of the positions whose flip the engine alone caused.
func (r *Report) WriteText(w io.Writer, listed int) error {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("three-way split over %d positions (vocab %d)\n", r.Positions, r.Vocab)
	p("%-28s %-28s %s\n", "what your file does", "what your engine adds", "together")
	p("%-28s %-28s %s\n", "(reference → exact decode)", "(exact decode → engine)", "(reference → engine)")
	p("%-28s %-28s %s\n", "KLD "+Mean(r.File.KLD), "KLD "+Mean(r.Engine.KLD), "KLD "+Mean(r.Total.KLD))
	p("%-28s %-28s %s\n", fmt.Sprintf("flips %d", r.File.Flips), fmt.Sprintf("flips %d", r.Engine.Flips), fmt.Sprintf("flips %d", r.Total.Flips))
	p("%-28s %-28s %s\n", fmt.Sprintf("same top-1 %.2f%%", 100*r.File.SameTop), fmt.Sprintf("same top-1 %.2f%%", 100*r.Engine.SameTop),
		fmt.Sprintf("same top-1 %.2f%%", 100*r.Total.SameTop))
	p("flips by cause: the file's %d, the engine's alone %d, both %d, the file's undone by the engine %d\n",
		r.ByCause[File], r.ByCause[Engine], r.ByCause[Both], r.ByCause[EngineUndo])
	switch {
	case listed == 0:
		listed = 10
	case listed < 0:
		listed = 0
	}
	for n, i := range r.EngineOnly {
		if n == listed {
			p("  … and %d more engine-only flips (--flips N lists more)\n", len(r.EngineOnly)-n)
			break
		}
		q := r.Rows[i]
		p("  engine-only flip at %d: reference and file pick %d, the engine %d (file margin %.4g, KLD file→engine %.3g)\n",
			q.Index, q.Ref, q.EngineTop, q.EngineMargin, q.KLDEngine)
	}
	return nil
}

// Mean prints a side's mean KLD as the reports show it (the CLI's text,
// the page): six decimals, with its standard error when it has one.
func Mean(e margins.Estimate) string {
	if e.Err == nil {
		return fmt.Sprintf("%.6f", e.Value)
	}
	return fmt.Sprintf("%.6f ± %.6f", e.Value, *e.Err)
}

// SameFile refuses a split whose exact decode and engine ran different
// GGUF files, when their receipts (nil: none) say which: the split would
// then mix two files' errors into the engine's share. fileName and
// engineName name the dumps in the error.
func SameFile(file, engine *receipt.Receipt, fileName, engineName string) error {
	switch {
	case file == nil || engine == nil:
		return nil
	case file.GGUF == nil:
		return fmt.Errorf("%s: the file decoded exactly is a GGUF file, but its receipt names none (variant %s)", fileName, file.Variant)
	case engine.GGUF == nil:
		return fmt.Errorf("%s: the engine runs the same GGUF file, but its receipt names none (variant %s)", engineName, engine.Variant)
	case file.GGUF.SHA256 != engine.GGUF.SHA256:
		return fmt.Errorf("%s ran GGUF %.12s…, %s ran %.12s…: the split needs the same file on both", fileName, file.GGUF.SHA256, engineName, engine.GGUF.SHA256)
	}
	return nil
}
