package main

import (
	"fmt"
	"io"
	"slices"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/analysis/split"
	"logitscope/internal/format/dump"
)

// splitJSON is what report --engine-dump --json prints: the three sides
// and the split.
type splitJSON struct {
	Ref    side          `json:"ref"`
	File   side          `json:"file"`
	Engine side          `json:"engine"`
	Split  *split.Report `json:"split"`
}

// reportSplit is report with three sides: the reference (float), the
// file decoded exactly (--test: logitscope on the GGUF) and the engine
// (--engine-dump: llama.cpp on the same GGUF), split into what the file
// does and what the engine adds.
func reportSplit(refPath, filePath, enginePath string, opt margins.Options, asJSON bool, stdout io.Writer) error {
	var sides [3]side
	var logits [3]*dump.Logits
	for i, p := range []string{refPath, filePath, enginePath} {
		s, err := openSide(p, false)
		if err != nil {
			return err
		}
		logits[i], err = s.rows.ReadAll()
		s.rows.Close()
		if err != nil {
			return err
		}
		sides[i] = s
	}
	ref, file, engine := sides[0], sides[1], sides[2]
	if err := sameGGUF(file, engine); err != nil {
		return err
	}
	var targets []int
	if ref.Receipt != nil && ref.Receipt.Targets != nil {
		targets = ref.Receipt.Targets
		for _, s := range sides[1:] {
			if s.Receipt != nil && !slices.Equal(targets, s.Receipt.Targets) {
				return fmt.Errorf("%s and %s were captured on different panels", ref.Path, s.Path)
			}
		}
	}
	rep, err := split.Compare(logits[0], logits[1], logits[2], targets, opt)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, splitJSON{Ref: ref, File: file, Engine: engine, Split: rep})
	}
	fmt.Fprintf(stdout, "ref:    %s%s\nfile:   %s%s\nengine: %s%s\n", ref.Path, describe(ref.Receipt), file.Path, describe(file.Receipt),
		engine.Path, describe(engine.Receipt))
	if r := engine.Receipt; r != nil && r.Chain != nil && r.Chain.Backend != nil && r.Chain.Backend.LlamaCpp != nil {
		l := r.Chain.Backend.LlamaCpp
		fmt.Fprintf(stdout, "engine ran: %s (%s), %s, flash attention %s, KV %s/%s, %d threads, batch %d/%d\n",
			l.Package, l.Source, l.Device, l.FlashAttn, l.TypeK, l.TypeV, l.Threads, l.Batch, l.UBatch)
	}
	return rep.WriteText(stdout, opt.MaxFlips)
}

// sameGGUF refuses a split whose exact decode and engine ran different
// GGUF files, when their receipts say which: the split would then mix
// two files' errors into the engine's share.
func sameGGUF(file, engine side) error {
	f, e := file.Receipt, engine.Receipt
	if f == nil || e == nil {
		return nil
	}
	switch {
	case f.GGUF == nil:
		return fmt.Errorf("%s: --test is the GGUF file decoded exactly, but its receipt names no GGUF file (variant %s)", file.Path, f.Variant)
	case e.GGUF == nil:
		return fmt.Errorf("%s: --engine-dump is the engine on the same GGUF file, but its receipt names no GGUF file (variant %s)", engine.Path, e.Variant)
	case f.GGUF.SHA256 != e.GGUF.SHA256:
		return fmt.Errorf("%s ran GGUF %.12s…, %s ran %.12s…: the split needs the same file on both", file.Path, f.GGUF.SHA256, engine.Path, e.GGUF.SHA256)
	}
	return nil
}
