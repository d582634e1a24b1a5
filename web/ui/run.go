//go:build js && wasm

package main

// The run: the reference side decodes (or reads the panel), the test side
// is fed the same tokens, and snapshot.Build compares them.

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall/js"
	"time"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/text/chat"
	"logitscope/wasm/abi"
	"logitscope/web/request"
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
	spec := r.Spec.Linked() // its own copy: later edits of the form do not reach the document
	if err := spec.Check(); err != nil {
		r.fail(err)
		return
	}
	if what := r.localMissing(); what != "" {
		r.fail(r.missing(what))
		return
	}
	// A variant the model does not have would fail only once its files
	// are asked for; say so now, with the command that makes it.
	m := r.model(spec.Model)
	if m == nil && !r.IsLocalModel() && r.Models != nil {
		// The list is in and lacks it: say so, rather than fail on the
		// first of its files the server does not have.
		var names []string
		for _, x := range r.Models {
			names = append(names, x.Name)
		}
		r.fail(fmt.Errorf("model %q: this server has no such model (it serves %s)", spec.Model, strings.Join(names, ", ")))
		return
	}
	for _, side := range [][2]string{{"ref", spec.Ref}, {"test", spec.Test}} {
		if msg := missingVariant(m, spec.Model, side[0], side[1]); msg != "" {
			r.fail(errors.New(msg))
			return
		}
	}
	nature := natureOf(m)
	local := map[string]*localFile{}
	for _, side := range []string{"ref", "test"} {
		if r.IsLocal(side) {
			local[side] = r.Local[side]
		}
	}
	folder := r.folderFor(spec.Model)
	r.SnapID, r.SnapURL, r.Ran = "", "", true
	r.begin("starting")
	r.syncURLNow()
	go func() {
		doc, raw, lg, err := r.run(spec, local, folder, nature)
		r.update(func() {
			var other otherCheckpoint
			if errors.As(err, &other) && r.Spec.Model == spec.Model {
				// Said once: Run now runs the folder as it is.
				r.Spec.Fingerprint = ""
				r.Ran = false
				r.syncURLNow()
			}
			if err != nil {
				r.fail(err)
				return
			}
			if folder != nil && r.Spec.Model == spec.Model {
				// The link now names the checkpoint that ran.
				r.Spec.Fingerprint = doc.Spec.Fingerprint
			}
			r.show(doc, raw, "run", lg)
		})
	}()
}

// otherCheckpoint is a run's folder that holds other weights than the
// link's fingerprint names.
type otherCheckpoint struct{ folder, got, want string }

func (e otherCheckpoint) Error() string {
	return fmt.Sprintf("model: folder %s holds another checkpoint than the link ran (fingerprint %s, the link's %s): choose the folder the link ran, or press Run to run this one as it is",
		e.folder, short(e.got), short(e.want))
}

// missing says what localMissing found missing, as Run's error.
func (r *Root) missing(what string) error {
	if what == "model" {
		if lf := r.Folder; lf != nil && lf.Err != "" {
			return fmt.Errorf("model: %s", lf.Err)
		}
		name, _ := snapshot.LocalModel(r.Spec.Model)
		return fmt.Errorf("model: choose the folder %s from this computer (nothing is uploaded: its files are read where they lie)", name)
	}
	name, _ := snapshot.LocalName(r.sideVariant(what))
	if lf := r.Local[what]; lf != nil && lf.Err != "" {
		return fmt.Errorf("%s side: %s", what, lf.Err)
	}
	return fmt.Errorf("%s side: choose %s from this computer (nothing is uploaded: the file is read where it lies)", what, name)
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
// files of the sides that run one from this computer, folder the model
// folder from this computer (nil for a served model).
func (r *Root) run(spec snapshot.Spec, local map[string]*localFile, folder *localFolder, nature *snapshot.Model) (*snapshot.Doc, []byte, *logitsOut, error) {
	if r.br == nil {
		return nil, nil, nil, errors.New(r.BridgeErr)
	}
	<-r.probed
	// A side's model goes with its last run, or when the run failed: the
	// analysis needs only the rows, and the next run opens afresh.
	defer r.br.release()
	defer func() {
		if r.br2 != nil {
			r.br2.release()
		}
	}()
	files := js.Undefined() // the folder's Files, for the bridge
	if folder != nil {
		r.stage("reading folder", folder.Name)
		<-folder.ready
		r.ee.RLock()
		ferr := folder.Err
		r.ee.RUnlock()
		if ferr != "" {
			return nil, nil, nil, fmt.Errorf("model: %s", ferr)
		}
		files = folderArg(folder)
	}
	r.stage("tokenizer", modelName(spec.Model))
	tok, err := r.tokenizer(spec.Model, folder)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl, err := r.chatTemplate(spec.Model, folder)
	if err != nil {
		return nil, nil, nil, err
	}
	refReq, err := request.Ref(spec, tok, tmpl)
	if err != nil {
		return nil, nil, nil, err
	}
	device := spec.Device
	r.ee.RLock()
	if device == "auto" && (!r.Probe.WebGPU || softwareAdapter(r.Probe.Adapter)) {
		device = "cpu"
	}
	r.ee.RUnlock()

	a := &runArgs{spec: spec, refReq: refReq, device: device, local: local, folder: folder, files: files}
	var t snapshot.Timing
	sides := r.runGreedy
	if spec.Mode == snapshot.Panel {
		sides = r.runPanel
	}
	defer func() {
		for _, f := range a.cleanup {
			f()
		}
	}()
	ref, test, after, err := sides(a, &t)
	if err != nil {
		return nil, nil, nil, err
	}
	if spec.Mode == snapshot.Panel {
		ref.Prefix = len(chat.RawPrefix(tok, tmpl))
	}
	r.stage("analysis", "comparing the logits")
	t0 := now()
	var targets []int
	if spec.Mode == snapshot.Panel {
		targets = ref.Targets
	}
	for side, c := range map[string]*snapshot.Capture{"ref": &ref, "test": &test} {
		lf := local[side]
		if lf == nil && folder != nil {
			lf = folder.GGUF[c.Side.Label]
		}
		if lf != nil {
			r.stage("analysis", "hashing "+lf.Name)
			if c.Side.GGUF, err = r.localGGUF(lf); err != nil {
				return nil, nil, nil, err
			}
		} else {
			c.Side.GGUF = r.servedGGUF(spec.Model, c.Side.Label)
		}
		c.Side.Hub = r.servedHub(spec.Model, c.Side.Label)
	}
	if folder != nil {
		r.stage("analysis", "checkpoint fingerprint of "+folder.Name)
		fp, err := r.fingerprint(folder, spec)
		if err != nil {
			return nil, nil, nil, err
		}
		// A run of GGUF files only has none (fp ""): their sha256s,
		// which the document records, say what ran.
		if fp != "" && spec.Fingerprint != "" && fp != spec.Fingerprint {
			return nil, nil, nil, otherCheckpoint{folder.Name, fp, spec.Fingerprint}
		}
		spec.Fingerprint = fp
	}
	text := tok.Piece
	doc, err := snapshot.Build(&spec, ref, test, targets, text)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("analysis: %v", err)
	}
	t.Analysis = now() - t0
	lg := after(&t)
	doc.Model = nature
	r.ee.RLock()
	t.PageLoad = r.PageLoad
	r.ee.RUnlock()
	doc.Timing = t
	doc.Created = time.Now().UTC().Format(time.RFC3339)
	return doc, nil, lg, nil
}

// runArgs is what opening and running both sides takes.
type runArgs struct {
	spec   snapshot.Spec
	refReq abi.Request
	device string
	local  map[string]*localFile // the sides that run a file from this computer
	folder *localFolder          // the model folder from this computer, or nil
	files  js.Value              // folder's Files, for the bridge, or undefined
	// cleanup is what the run leaves to undo when it ends (a spool).
	cleanup []func()
}

// file is a side's local file, for the bridge (the worker reads it
// itself), or undefined.
func (a *runArgs) file(side string) js.Value {
	if lf := a.local[side]; lf != nil {
		return lf.File
	}
	return js.Undefined()
}

// open opens side ("ref" or "test") on br, with a KV cache for req, and
// starts hashing what the document names of it.
func (r *Root) open(br *bridge, a *runArgs, side string, req abi.Request) (openInfo, error) {
	v := a.spec.Ref
	if side == "test" {
		v = a.spec.Test
	}
	o, err := br.open(a.spec.Model, v, request.Capacity(req), a.device, a.file(side), a.files)
	if err != nil {
		return o, fmt.Errorf("open %s %s: %v", a.spec.Model, v, err)
	}
	// Hashing starts once the files opened: the engine has refused a
	// folder or file that cannot run by now, and the hashing overlaps
	// the runs.
	r.startHashes(a.spec, side, a.folder)
	return o, nil
}

// runGreedy runs the reference, then feeds its tokens to the test: each
// side's model opened, run once and released, its rows whole in the page
// (a decode's are few). after, called once the analysis is done, gives
// the rows the page keeps (window.logitscope.logits), or nil.
func (r *Root) runGreedy(a *runArgs, t *snapshot.Timing) (ref, test snapshot.Capture, after func(*snapshot.Timing) *logitsOut, err error) {
	spec, refReq := a.spec, a.refReq
	r.stage("reference "+spec.Ref, "opening")
	t0 := now()
	ro, err := r.open(r.br, a, "ref", refReq)
	if err != nil {
		return ref, test, nil, err
	}
	t.OpenRef = now() - t0
	r.stage("reference "+spec.Ref, "running")
	t0 = now()
	rr, err := r.br.run(refReq)
	if err != nil {
		return ref, test, nil, fmt.Errorf("run %s: %v", spec.Ref, err)
	}
	t.RefRun, t.FirstToken = now()-t0, rr.FirstRowMs

	testReq := request.Test(refReq, rr.Result)
	r.stage("test "+spec.Test, "opening")
	t0 = now()
	to, err := r.open(r.br, a, "test", testReq)
	if err != nil {
		return ref, test, nil, err
	}
	t.OpenTest = now() - t0
	r.stage("test "+spec.Test, "running")
	t0 = now()
	tr, err := r.br.run(testReq)
	if err != nil {
		return ref, test, nil, fmt.Errorf("run %s: %v", spec.Test, err)
	}
	t.TestRun = now() - t0
	// The rows carry a mixture of experts' routes after the logits: split
	// here, so that the analysis sees the logits and the routes apart.
	refLogits, err := rr.logits()
	if err != nil {
		return ref, test, nil, fmt.Errorf("%s: %v", spec.Ref, err)
	}
	testLogits, err := tr.logits()
	if err != nil {
		return ref, test, nil, fmt.Errorf("%s: %v", spec.Test, err)
	}
	ref = snapshot.Capture{
		Side:      snapshot.Side{Label: sideLabel(spec.Ref), Device: ro.Device, Adapter: ro.Adapter},
		Logits:    refLogits,
		PromptIDs: rr.Result.PromptIDs, Output: rr.Result.Output, Targets: rr.Result.Targets,
	}
	test = snapshot.Capture{
		Side:      snapshot.Side{Label: sideLabel(spec.Test), Device: to.Device, Adapter: to.Adapter},
		Logits:    testLogits,
		PromptIDs: tr.Result.PromptIDs, Output: tr.Result.Output, Targets: tr.Result.Targets,
	}
	return ref, test, func(*snapshot.Timing) *logitsOut {
		return &logitsOut{Vocab: rr.Result.Vocab, Width: rr.Width, Ref: rr.Raw, Test: tr.Raw}
	}, nil
}

// startHashes starts hashing what the document will name of side once
// it opened: its GGUF file when it is one in folder, and folder's
// checkpoint when no variant's manifest will say its fingerprint.
// A local GGUF chosen by itself is hashed from the moment it is chosen.
func (r *Root) startHashes(spec snapshot.Spec, side string, folder *localFolder) {
	if folder == nil {
		return
	}
	v := spec.Ref
	if side == "test" {
		v = spec.Test
	}
	if lf := folder.GGUF[v]; lf != nil {
		r.startHash(lf)
	}
	if side == "ref" && hashesFolder(folder, spec) {
		r.startFingerprint(folder)
	}
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
	case p.Phase == "prefill": // input tokens through the model
		s += fmt.Sprintf(" %.0f / %.0f", p.Loaded, p.Total)
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
