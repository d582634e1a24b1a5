//go:build js && wasm

package main

// The three-way split in the page: a third dropped dump, the engine's,
// split with the reference and the test (the file decoded exactly) by
// package split, as `logitscope report --engine-dump` splits them, and
// drawn by split.go into #split-body.

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	vjs "github.com/vugu/vugu/js"

	"syscall/js"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/analysis/split"
)

// offlineSplit splits the divergence of the engine's dump from the
// reference (sides: reference, file, engine), refusing what report
// refuses: receipts that do not describe their dumps, two panels, or an
// exact decode and an engine that ran different GGUF files. Each dump is
// read whole: a split is of a panel's rows, not of a long capture.
// It returns the engine's side too, as the document records it.
func offlineSplit(sides [3]snapshot.Dropped) (*split.Report, snapshot.Side, error) {
	var caps [3]snapshot.Capture
	for i, d := range sides {
		c, err := d.Open()
		if err != nil {
			return nil, snapshot.Side{}, err
		}
		if c.Logits, err = c.Rows.ReadAll(); err != nil {
			return nil, snapshot.Side{}, err
		}
		if sum, ok := c.Rows.SHA256(); ok && c.Side.Receipt != nil {
			if err := c.Side.Receipt.CheckSHA256(sum, d.Name); err != nil {
				return nil, snapshot.Side{}, err
			}
		}
		caps[i] = c
	}
	ref, file, engine := caps[0], caps[1], caps[2]
	if err := split.SameFile(file.Side.Receipt, engine.Side.Receipt, sides[1].Name, sides[2].Name); err != nil {
		return nil, snapshot.Side{}, err
	}
	targets := ref.Targets
	if ref.Side.Receipt != nil {
		for i, c := range caps[1:] {
			if c.Side.Receipt != nil && !slices.Equal(targets, c.Targets) {
				return nil, snapshot.Side{}, fmt.Errorf("%s and %s were captured on different panels", sides[0].Name, sides[i+1].Name)
			}
		}
	}
	rep, err := split.Compare(ref.Logits, file.Logits, engine.Logits, targets, margins.Options{})
	return rep, engine.Side, err
}

// showSplit draws the split the document just shown carries, if any
// (lock held): an offline comparison's with a third dump, or a shared
// snapshot's.
func (r *Root) showSplit(d *snapshot.Doc) error {
	if d.Split == nil {
		return nil
	}
	rep := d.Split.Report
	raw, err := json.Marshal(rep)
	if err != nil {
		return fmt.Errorf("split: %v", err)
	}
	text := func(id int) string { return d.Texts[strconv.Itoa(id)] }
	r.Split, r.splitMarkup = rep, splitHTML(rep, [3]string{d.Ref.Label, d.Test.Label, d.Split.Engine.Label}, text)
	r.strip = stripHTMLMarked(d, engineFlips(rep, text))
	r.ls.Set("split", jsonObj.Call("parse", string(raw)))
	return nil
}

// PopulateSplit draws the split, once per document.
func (r *Root) PopulateSplit(v vjs.Value) {
	if r.Split != nil {
		fill(js.Value(v), r.docSeq, r.splitMarkup)
	}
}
