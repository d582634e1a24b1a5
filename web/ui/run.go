//go:build js && wasm

package main

// The run: the reference side decodes (or reads the panel), the test side
// is fed the same tokens, and snapshot.Build compares them.

import (
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"syscall/js"
	"time"

	"logitscope/snapshot"
)

// Run starts the form's spec (handlers and boot: the lock is held).
func (r *Root) Run() {
	if r.Busy() {
		return
	}
	fields := []string{"max_new", "stops"}
	if r.Spec.Mode == snapshot.Panel {
		fields = []string{"window"}
	}
	for _, f := range fields {
		if msg := r.FieldErr[f]; msg != "" {
			r.fail(errors.New(msg))
			return
		}
	}
	spec := cloneSpec(r.Spec)
	if err := spec.Check(); err != nil {
		r.fail(err)
		return
	}
	if side := r.localMissing(); side != "" {
		name, _ := snapshot.LocalName(r.sideVariant(side))
		if lf := r.Local[side]; lf != nil && lf.Err != "" {
			r.fail(fmt.Errorf("%s side: %s", side, lf.Err))
		} else {
			r.fail(fmt.Errorf("%s side: choose %s from this computer (nothing is uploaded: the file is read where it lies)", side, name))
		}
		return
	}
	local := map[string]*localFile{}
	for _, side := range []string{"ref", "test"} {
		if r.IsLocal(side) {
			local[side] = r.Local[side]
		}
	}
	r.SnapID, r.Ran = "", true
	r.begin("starting")
	r.syncURLNow()
	go func() {
		doc, raw, lg, err := r.run(spec, local)
		r.update(func() {
			if err != nil {
				r.fail(err)
				return
			}
			r.show(doc, raw, "run", lg)
		})
	}()
}

// cloneSpec copies s with its own Stops, so that later edits of the form
// do not reach a document's spec.
func cloneSpec(s snapshot.Spec) snapshot.Spec {
	if s.Stops != nil {
		v := slices.Clone(*s.Stops)
		s.Stops = &v
	}
	return s
}

// stage names what the run does now (on which side, which step), and
// paints it before going on.
func (r *Root) stage(side, step string) {
	r.update(func() { r.Stage, r.StageStep, r.Progress = side, step, progress{} })
	// Let the page render and paint: the next step may keep the thread busy.
	time.Sleep(20 * time.Millisecond)
}

// run is the sequence; it runs in its own goroutine. local holds the
// files of the sides that run one from this computer.
func (r *Root) run(spec snapshot.Spec, local map[string]*localFile) (*snapshot.Doc, []byte, *logitsOut, error) {
	if r.br == nil {
		return nil, nil, nil, errors.New(r.BridgeErr)
	}
	<-r.probed
	r.stage("tokenizer", spec.Model)
	tok, err := r.tokenizer(spec.Model)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl, err := r.chatTemplate(spec.Model)
	if err != nil {
		return nil, nil, nil, err
	}
	refReq, err := spec.RefRequest(tok, tmpl)
	if err != nil {
		return nil, nil, nil, err
	}
	device := spec.Device
	r.ee.RLock()
	if device == "auto" && !r.Probe.WebGPU {
		device = "cpu"
	}
	r.ee.RUnlock()

	// A side's file, for the bridge: the worker reads a local file itself.
	file := func(side string) js.Value {
		if lf := local[side]; lf != nil {
			return lf.File
		}
		return js.Undefined()
	}
	var t snapshot.Timing
	r.stage("reference "+spec.Ref, "opening")
	t0 := now()
	ro, err := r.br.open(spec.Model, spec.Ref, snapshot.Capacity(refReq), device, file("ref"))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open %s %s: %v", spec.Model, spec.Ref, err)
	}
	t.OpenRef = now() - t0
	r.stage("reference "+spec.Ref, "running")
	t0 = now()
	rr, err := r.br.run(refReq)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("run %s: %v", spec.Ref, err)
	}
	t.RefRun, t.FirstToken = now()-t0, rr.FirstRowMs

	testReq := snapshot.TestRequest(refReq, rr.Result)
	r.stage("test "+spec.Test, "opening")
	t0 = now()
	to, err := r.br.open(spec.Model, spec.Test, snapshot.Capacity(testReq), device, file("test"))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("open %s %s: %v", spec.Model, spec.Test, err)
	}
	t.OpenTest = now() - t0
	r.stage("test "+spec.Test, "running")
	t0 = now()
	tr, err := r.br.run(testReq)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("run %s: %v", spec.Test, err)
	}
	t.TestRun = now() - t0

	r.stage("analysis", "comparing the logits")
	t0 = now()
	var targets []int
	if spec.Mode == snapshot.Panel {
		targets = rr.Result.Targets
	}
	// The rows carry a mixture of experts' routes after the logits: split
	// here, so that the analysis sees the logits and the routes apart.
	refLogits, err := rr.logits()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %v", spec.Ref, err)
	}
	testLogits, err := tr.logits()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("%s: %v", spec.Test, err)
	}
	ref := snapshot.Capture{
		Side:      snapshot.Side{Label: sideLabel(spec.Ref), Device: ro.Device, Adapter: ro.Adapter},
		Logits:    refLogits,
		PromptIDs: rr.Result.PromptIDs, Output: rr.Result.Output, Targets: rr.Result.Targets,
	}
	test := snapshot.Capture{
		Side:      snapshot.Side{Label: sideLabel(spec.Test), Device: to.Device, Adapter: to.Adapter},
		Logits:    testLogits,
		PromptIDs: tr.Result.PromptIDs, Output: tr.Result.Output, Targets: tr.Result.Targets,
	}
	for side, c := range map[string]*snapshot.Capture{"ref": &ref, "test": &test} {
		if lf := local[side]; lf != nil {
			r.stage("analysis", "hashing "+lf.Name)
			if c.Side.GGUF, err = r.localGGUF(lf); err != nil {
				return nil, nil, nil, err
			}
		} else {
			c.Side.GGUF = r.servedGGUF(spec.Model, c.Side.Label)
		}
	}
	text := func(id int) string { return tok.Decode([]int{id}, false) }
	doc, err := snapshot.Build(&spec, ref, test, targets, text)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("analysis: %v", err)
	}
	t.Analysis = now() - t0
	r.ee.RLock()
	t.PageLoad = r.PageLoad
	r.ee.RUnlock()
	doc.Timing = t
	doc.Created = time.Now().UTC().Format(time.RFC3339)
	lg := &logitsOut{Vocab: rr.Result.Vocab, Width: rr.Width,
		Ref:  base64.StdEncoding.EncodeToString(rr.Raw),
		Test: base64.StdEncoding.EncodeToString(tr.Raw)}
	return doc, nil, lg, nil
}

// sideLabel is how the document names a side: its variant, or a local
// file's name (Side.GGUF says it is local).
func sideLabel(v string) string {
	if name, local := snapshot.LocalName(v); local {
		return name
	}
	return v
}

// ProgressPct is the progress bar's fill (0–100), or -1 when the total is
// unknown.
func (r *Root) ProgressPct() float64 {
	p := r.Progress
	if p.Total <= 0 {
		return -1
	}
	return min(100, 100*p.Loaded/p.Total)
}

// ProgressText says what the progress bar shows, in words.
func (r *Root) ProgressText() string {
	p := r.Progress
	s := r.Stage
	switch {
	case p.Phase != "":
		s += " · " + p.Phase
	case r.StageStep != "":
		s += " · " + r.StageStep
	}
	switch {
	case p.Phase == "rows" && p.Total > 0:
		s += fmt.Sprintf(" %.0f / %.0f", p.Loaded, p.Total)
	case p.Phase == "rows":
		s += fmt.Sprintf(" %.0f", p.Loaded)
	case p.Total > 0:
		s += " " + size(p.Loaded) + " / " + size(p.Total)
	case p.Loaded > 0:
		s += " " + size(p.Loaded)
	}
	if p.Message != "" {
		s += " · " + p.Message
	}
	return s
}
