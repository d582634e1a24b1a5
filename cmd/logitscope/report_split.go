package main

import (
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/analysis/split"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/receipt"
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
// does and what the engine adds. Its snapshot is the comparison of the
// reference with the file, the split beside it, as the page shows three
// dropped dumps.
func reportSplit(refPath, filePath, enginePath string, opt margins.Options, snap snapshotFlags, asJSON bool, stdout, stderr io.Writer) error {
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
	if err := split.SameFile(file.Receipt, engine.Receipt, file.Path, engine.Path); err != nil {
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
	if snap.wanted() {
		d, err := splitSnapshot(sides, logits, targets, rep, opt)
		if err == nil {
			err = snap.publish(d, stderr)
		}
		if err != nil {
			return err
		}
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

// splitSnapshot is the document of a three-way report: the reference
// against the file (a margins report with report's options, so the
// page's numbers are the CLI's), by the panel's domains and roles when
// the receipts bind one, and the split with the engine's side.
func splitSnapshot(sides [3]side, logits [3]*dump.Logits, targets []int, rep *split.Report, opt margins.Options) (*snapshot.Doc, error) {
	rf, err := margins.Compare(logits[0], logits[1], targets, opt)
	if err != nil {
		return nil, err
	}
	var b margins.Breakdown
	if p, err := receipt.Panel(sides[0].Receipt, sides[1].Receipt, sides[0].Path, sides[1].Path); err != nil {
		return nil, err
	} else if p != nil {
		if b, err = rf.BreakdownOf(margins.PanelGroups(p)); err != nil {
			return nil, err
		}
	}
	d := reportSnapshot(sides[0], sides[1], rf, b, opt.TokenText)
	var engine snapshot.Capture
	engine.Side.Label = filepath.Base(sides[2].Path)
	if sides[2].Receipt != nil {
		engine.SetReceipt(sides[2].Receipt)
	}
	d.SetSplit(engine.Side, rep, opt.TokenText)
	return d, nil
}
