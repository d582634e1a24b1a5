package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/kldbase"
	"logitscope/internal/format/logitdir"
	"logitscope/internal/format/receipt"
	"logitscope/internal/model/ggufmodel"
	"logitscope/internal/run/session"
	"logitscope/internal/text/tokenizer"
)

// side is one dump of a report and, when present, its verified receipt.
type side struct {
	Path    string           `json:"path"`
	Receipt *receipt.Receipt `json:"receipt,omitempty"`
	rows    *dump.Reader
}

// reportJSON is what --json prints: both sides, their provenance, and the
// margins report.
type reportJSON struct {
	Ref        side                `json:"ref"`
	Test       side                `json:"test"`
	Provenance *receipt.Provenance `json:"provenance,omitempty"`
	// Notes say what the report could not check, such as a dump without
	// its receipt.
	Notes []string `json:"notes,omitempty"`
	// Breakdown summarizes the positions by their windows' domain and
	// role, when the reference's receipt carries its panel's.
	Breakdown margins.Breakdown `json:"breakdown,omitempty"`
	*margins.Report
}

// report compares two dumps position by position.
func report(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("report", stdout)
	refPath := fs.String("ref", "", "reference dump: binary dump or safetensors with a logits tensor (and a routes tensor for a mixture of experts), a windowed capture's directory (DIR[,DIR...] for its shards), or llama.cpp's --kl-divergence-base file (required)")
	testPath := fs.String("test", "", "test dump, same geometry, or windowed capture; against a llama.cpp base file, a capture of its chunks (capture --panel BASE) (required)")
	asJSON := fs.Bool("json", false, "print JSON for machines")
	closeRule := marginFlags(fs)
	globalSigma := fs.Bool("global-sigma", false, "pool σ over the whole capture instead of each position's own")
	topK := fs.Int("top-k", margins.DefaultTopK, "top tokens listed per side")
	flips := fs.Int("flips", margins.DefaultMaxFlips, "flips listed in the text report (0: none, only their count)")
	tokPath := fs.String("tokenizer", "", "tokenizer.json to show token text")
	snap := addSnapshotFlags(fs, "also write the comparison as the page's snapshot document to FILE: drop it on any logitscope page, or open /?snapshot=URL (two dumps, and the engine's with --engine-dump)")
	enginePath := fs.String("engine-dump", "", "a three-way report: the engine's dump (capture --runtime llama.cpp) of the GGUF file that --test decoded exactly; the divergence splits into what the file does and what the engine adds")
	if pos, err := parse(fs, args); err != nil {
		return err
	} else if len(pos) > 0 {
		return fmt.Errorf("unexpected argument %q", pos[0])
	}
	if *refPath == "" || *testPath == "" {
		return fmt.Errorf("--ref and --test are both required")
	}
	opt, err := closeRule()
	if err != nil {
		return err
	}
	if *flips < 0 {
		return fmt.Errorf("--flips %d: must be 0 or more", *flips)
	}
	opt.TopK, opt.GlobalSigma, opt.MaxFlips = *topK, *globalSigma, *flips
	if *flips == 0 {
		opt.MaxFlips = -1 // none; margins' 0 is its default
	}
	if *tokPath != "" {
		tok, err := tokenizer.Load(*tokPath)
		if err != nil {
			return err
		}
		opt.TokenText = tok.Piece // byte tokens as <0xNN>, as the page shows them, not "�"
	}
	if *enginePath != "" {
		return reportSplit(*refPath, *testPath, *enginePath, opt, snap, *asJSON, stdout, stderr)
	}
	refDirs, testDirs := strings.Split(*refPath, ","), strings.Split(*testPath, ",")
	if snap.wanted() && (kldbase.Is(*refPath) || logitdir.IsCapture(refDirs[0]) || logitdir.IsCapture(testDirs[0])) {
		return fmt.Errorf("--snapshot and --share take two dumps; %s and %s are a windowed capture or llama.cpp's base file", *refPath, *testPath)
	}
	if kldbase.Is(*refPath) {
		return reportBase(*refPath, testDirs, opt, *asJSON, stdout, stderr)
	}
	switch refWin, testWin := logitdir.IsCapture(refDirs[0]), logitdir.IsCapture(testDirs[0]); {
	case refWin && testWin:
		return reportWindows(refDirs, testDirs, opt, *asJSON, stdout)
	case refWin || testWin:
		return fmt.Errorf("%s and %s: one is a windowed capture (a directory with %s), the other a dump: compare two of a kind", *refPath, *testPath, logitdir.ReceiptName)
	}
	ref, err := openSide(*refPath, true)
	if err != nil {
		return err
	}
	defer ref.rows.Close()
	test, err := openSide(*testPath, true)
	if err != nil {
		return err
	}
	defer test.rows.Close()
	if ref.rows.Rows != test.rows.Rows || ref.rows.Vocab != test.rows.Vocab {
		return fmt.Errorf("%s is %d rows × %d vocab, %s is %d rows × %d vocab: not the same geometry",
			ref.Path, ref.rows.Rows, ref.rows.Vocab, test.Path, test.rows.Rows, test.rows.Vocab)
	}
	out := reportJSON{Ref: ref, Test: test}
	// A dump without its receipt may be another tool's, or a capture's
	// whose receipt was lost: either way nothing vouches for what made it,
	// which a reader of the report alone would not notice.
	for _, s := range []side{ref, test} {
		if s.Receipt == nil {
			note := s.Path + " has no receipt: its provenance cannot be checked"
			fmt.Fprintln(stderr, "note: "+note)
			out.Notes = append(out.Notes, note)
		}
	}
	// Routes are compared only when both sides kept them: a binary dump
	// of a mixture of experts, or another tool's, has none.
	if (ref.rows.Routes == nil) != (test.rows.Routes == nil) {
		with, without := ref, test
		if ref.rows.Routes == nil {
			with, without = test, ref
		}
		note := fmt.Sprintf("%s carries expert routes and %s none: routing is not compared", with.Path, without.Path)
		fmt.Fprintln(stderr, "note: "+note)
		out.Notes = append(out.Notes, note)
	}
	var targets []int
	if ref.Receipt != nil && test.Receipt != nil {
		p := receipt.Compare(ref.Receipt, test.Receipt)
		out.Provenance = &p
	}
	// A panel's targets are the text's next tokens: they make Δp and PPL
	// about the real text, and both sides must agree on them.
	if ref.Receipt != nil && ref.Receipt.Targets != nil {
		targets = ref.Receipt.Targets
		if test.Receipt != nil && !slices.Equal(targets, test.Receipt.Targets) {
			return fmt.Errorf("%s and %s were captured on different panels", ref.Path, test.Path)
		}
	}
	rep, err := margins.CompareReaders(ref.rows, test.rows, targets, opt)
	if err != nil {
		return err
	}
	// The binary dumps were hashed as they were read: their receipts are
	// checked now, and a report on a dump its receipt does not describe is
	// never printed.
	for _, s := range []side{ref, test} {
		if sum, ok := s.rows.SHA256(); ok && s.Receipt != nil {
			if err := s.Receipt.CheckSHA256(sum, s.Path); err != nil {
				return err
			}
		}
	}
	out.Report = rep
	// By the domains and roles of the panel the receipts bind.
	if p, err := receipt.Panel(ref.Receipt, test.Receipt, ref.Path, test.Path); err != nil {
		return err
	} else if p != nil {
		if out.Breakdown, err = rep.BreakdownOf(margins.PanelGroups(p)); err != nil {
			return err
		}
	}
	if err := snap.publish(reportSnapshot(ref, test, rep, out.Breakdown, opt.TokenText), stderr); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "ref:  %s%s\ntest: %s%s\n", ref.Path, describe(ref.Receipt), test.Path, describe(test.Receipt))
	for _, note := range out.Notes {
		fmt.Fprintf(stdout, "note: %s\n", note)
	}
	if p := out.Provenance; p != nil {
		fmt.Fprintf(stdout, "same checkpoint: %s; same token sequence: %s\n", yesNo(p.SameModel), yesNo(p.SameSequence))
		chainLine(stdout, "ref", ref.Receipt.Chain)
		chainLine(stdout, "test", test.Receipt.Chain)
		if !p.SameSequence && ref.Receipt.Request.Mode != session.Panel && test.Receipt.Request.Mode != session.Panel {
			fmt.Fprintf(stdout, "note: the sides decoded different tokens, so rows after the first difference compare different contexts;\n"+
				"      capture the test with --follow %s to feed it the reference's tokens\n", ref.Path)
		}
	}
	if err := rep.WriteText(stdout); err != nil {
		return err
	}
	return out.Breakdown.WriteText(stdout)
}

// openSide opens a dump to be read row by row and, if a receipt lies
// beside it, verifies the receipt's seal and that it describes this very
// dump: now, or, with whenRead, for a binary dump once its rows have been
// read and hashed (side.rows.SHA256), which saves reading it twice.
func openSide(path string, whenRead bool) (side, error) {
	r, err := dump.Open(path)
	if err != nil {
		return side{}, err
	}
	s := side{Path: path, rows: r}
	rp := receipt.Path(path)
	if _, err := os.Stat(rp); err == nil {
		if s.Receipt, err = receipt.Read(rp); err == nil && (!whenRead || dump.IsSafetensors(path)) {
			err = s.Receipt.CheckDump(path)
		} else if err == nil {
			r.Hash()
		}
		if err != nil {
			r.Close()
			return side{}, err
		}
	}
	return s, nil
}

func describe(r *receipt.Receipt) string {
	if r == nil {
		return " (no receipt)"
	}
	variant := r.Variant
	if r.VariantPolicy != "" {
		variant += " " + r.VariantPolicy
	}
	if r.GGUF != nil {
		variant += " [GGUF: " + ggufmodel.Mix(r.GGUF.Types) + "]"
	}
	if r.Hub != nil {
		variant += " [" + r.Hub.Format + "]"
	}
	return fmt.Sprintf(" (%s, %s, %d rows, model %.12s…)", variant, r.Request.Mode, r.Dump.Rows, r.Model)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// printJSON prints v as report --json does: indented, one trailing newline.
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// marginFlags adds --close-margin and --close-logits, the close/clear
// rule that report, sensitivity and recipe share, to fs; the function it
// returns reads them once parsed.
func marginFlags(fs *flag.FlagSet) func() (margins.Options, error) {
	k := fs.Float64("close-margin", margins.DefaultK, "a flip is close when the reference margin m ≤ X·σ")
	abs := fs.Float64("close-logits", 0, "if > 0, a flip is close when m ≤ this many logits instead")
	return func() (margins.Options, error) {
		if *k <= 0 {
			return margins.Options{}, fmt.Errorf("--close-margin %g: must be > 0", *k)
		}
		return margins.Options{K: *k, AbsMargin: *abs}, nil
	}
}
