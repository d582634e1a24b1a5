package main

import (
	"fmt"
	"io"
	"strings"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/kldbase"
	"logitscope/internal/format/logitdir"
)

// reportBase reports on a capture of a llama.cpp base file's chunks
// (capture --panel BASE) against the base file itself: llama.cpp's
// reference, as its user already has it, on the positions llama.cpp
// scores.
func reportBase(basePath string, testPaths []string, opt margins.Options, asJSON bool, stdout, stderr io.Writer) error {
	testPath := strings.Join(testPaths, ",")
	if kldbase.Is(testPaths[0]) {
		return fmt.Errorf("%s is a llama.cpp base file too: a base file is only a reference; capture the test on its chunks with capture --panel %s", testPaths[0], basePath)
	}
	f, err := kldbase.Open(basePath)
	if err != nil {
		return err
	}
	defer f.Close()
	out := reportJSON{Ref: side{Path: basePath}, Test: side{Path: testPath}}
	var rows *dump.Reader
	var targets []int
	if logitdir.IsCapture(testPaths[0]) {
		c, err := logitdir.Open(testPaths...)
		if err != nil {
			return err
		}
		if rows, targets, err = logitdir.Rows(testPath, c.Windows); err != nil {
			return err
		}
	} else {
		s, err := openSide(testPath, true)
		if err != nil {
			return err
		}
		out.Test, rows = s, s.rows
		if s.Receipt != nil {
			targets = s.Receipt.Targets
		}
	}
	defer rows.Close()
	ref, test, err := f.Pair(rows)
	if err != nil {
		return err
	}
	// The capture's targets are the chunks' tokens after the first, which
	// llama.cpp does not replace: they show that it ran the base's panel.
	if targets != nil {
		if err := sameTargets(f, targets, testPath); err != nil {
			return err
		}
	}
	note := fmt.Sprintf("%s is llama.cpp's --kl-divergence-base file: no receipt, its log-probabilities are 16-bit, and tokens under its floor (16 nats below the top) count as the test has them, as llama.cpp leaves them out of its KLD", basePath)
	fmt.Fprintln(stderr, "note: "+note)
	out.Notes = append(out.Notes, note)
	rep, err := margins.CompareReaders(ref, test, f.Targets(), opt)
	if err != nil {
		return err
	}
	if sum, ok := rows.SHA256(); ok && out.Test.Receipt != nil {
		if err := out.Test.Receipt.CheckSHA256(sum, testPath); err != nil {
			return err
		}
	}
	out.Report = rep
	if asJSON {
		return printJSON(stdout, out)
	}
	fmt.Fprintf(stdout, "ref:  %s (llama.cpp base file: %d chunks of %d tokens, positions %d…%d of each scored)\ntest: %s%s\n",
		basePath, f.Chunks, f.Ctx, f.First(), f.Ctx-2, testPath, describe(out.Test.Receipt))
	for _, note := range out.Notes {
		fmt.Fprintf(stdout, "note: %s\n", note)
	}
	return rep.WriteText(stdout)
}

// sameTargets checks a capture's targets, of every position of the
// chunks or of the scored ones, against the base file's tokens.
func sameTargets(f *kldbase.File, targets []int, name string) error {
	full := len(targets) == f.Chunks*(f.Ctx-1)
	if !full && len(targets) != f.Rows() {
		return fmt.Errorf("%s has %d targets for %d rows", name, len(targets), f.Rows())
	}
	for s, want := range f.Targets() {
		c, t := s/f.Scored(), s
		if full {
			t = c*(f.Ctx-1) + f.First() + s%f.Scored()
		}
		if targets[t] != want {
			return fmt.Errorf("%s was not captured on %s's chunks: in chunk %d, position %d predicts token %d there, %d in the base file",
				name, f.Name, c, f.First()+s%f.Scored(), targets[t], want)
		}
	}
	return nil
}
