//go:build js && wasm

package main

// Root is the page's state and the root component (root.vugu). Every
// other component gets a pointer to it (R) and calls its methods, so the
// state lives in one place:
//
//	URL ──ParseQuery──▶ Spec ◀── form edits ──▶ history.replaceState(Spec.Query())
//	Run ─▶ goroutine: tokenizer, bridge.open/run ×2, snapshot.Build ─▶ show(Doc)
//	/r/<id>, ?snapshot=URL, a dropped .json ─▶ goroutine: fetch or read, snapshot.Parse ─▶ show(Doc)
//	dropped dumps ─▶ goroutine: File.arrayBuffer, snapshot.Offline ─▶ show(Doc)
//	show(Doc) ─▶ window.logitscope.result (+ .logits for runs), State "done"
//
// Event handlers (vugu's, the keyboard's, the drop zone's) run with the
// EventEnv locked; goroutines take the lock with update() only to change
// state, never while they wait on a promise. body.dataset.state follows
// State after each render, so "done" means the page shows the result.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"syscall/js"

	"github.com/vugu/vugu"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/analysis/split"
	"logitscope/internal/text/chat"
	"logitscope/internal/text/tokenizer"
)

type Root struct {
	// Spec is the form: what Run runs and what the URL says.
	Spec snapshot.Spec
	// The form's text of fields that must parse, and their errors.
	MaxNewText, WindowText, StopsText string
	FieldErr                          map[string]string

	Models    []modelInfo
	ModelsErr string

	Probe     probeInfo
	ProbeDone bool
	BridgeErr string // no bridge or its probe failed

	State     string // idle | running | done | error
	Stage     string // what a run is working on, for the progress bar
	StageStep string // and what it does there until the bridge reports
	Progress  progress
	Err       string

	Doc    *snapshot.Doc
	Source string // run | snapshot | offline
	// Sweep, shown instead of Doc, is a sensitivity sweep or a recipe
	// (sweepdom.go), in the view SweepView.
	Sweep     *sweepDoc
	SweepView sweepView
	sweepSeq  int
	// Split is the three-way split of an offline comparison given a
	// third dump, the engine's (splitdom.go), drawn as splitHTML.
	Split       *split.Report
	splitMarkup string
	Sel         int
	Filter      string // the token strip's tab: all, flips or routes (snapshot.Tab*)
	Zoom        span   // the charts' positions
	SnapID      string // the /r/<id> this page shows, until the form is edited
	SnapURL     string // the ?snapshot=URL this page shows, likewise
	Ran         bool   // the form's spec has been run: its URL reruns it

	Share shareState
	Drop  dropState
	// Local holds the GGUF file chosen from disk for a side ("ref",
	// "test") whose variant is snapshot.LocalPrefix + its name.
	Local map[string]*localFile
	// Folder is the model folder chosen from disk, the model when Spec's
	// is snapshot.LocalPrefix + its name + "/".
	Folder *localFolder
	// Hub is the hub field: a model the page downloads from the Hugging
	// Face Hub into a Folder (hub.go).
	Hub hubState
	// autorunWaits: the link said autorun but names a local file or
	// folder, which no link can carry; the run starts once it is chosen.
	autorunWaits bool

	PageLoad float64 // ms from navigation start to the first render

	ee vugu.EventEnv
	br *bridge
	// br2 runs the test side of a panel that alternates with the
	// reference (panel.go), made on first use.
	br2      *bridge
	ls       js.Value // window.logitscope
	probed   chan struct{}
	wantView *snapshot.View // a link's view (pos, tab, zoom), for the first document shown
	// boot's query, kept until the model list arrives: the link's spec
	// takes the model's ready prompt, panel and variants where it names
	// none (afterModels), and runs when it says so.
	bootQuery url.Values

	docSeq    int    // bumps with each document; raw DOM content is keyed by it
	chartSeq  int    // bumps with each document and zoom; the charts are keyed by it
	strip     string // stripHTML(Doc)
	summary   string // summaryHTML(Doc)
	kldSVG    string
	marginSVG string
	bodyState string // what body.dataset.state says now

	urlPending bool    // a syncURL is due
	urlFlush   js.Func // its timer's callback

	logitGetters []js.Func // window.logitscope.logits' ref and test

	tokMu sync.Mutex
	toks  map[string]*tokenizer.Tokenizer
	chats map[string]chat.TemplateConfig // by model: its tokenizer_config.json's chat template
}

// boot reads the URL and starts the background work; called once before
// the first render (no lock needed: nothing else runs yet).
func (r *Root) boot(ee vugu.EventEnv) {
	r.ee = ee
	r.State = "idle"
	r.Filter = snapshot.TabAll
	r.FieldErr = map[string]string{}
	r.Local = map[string]*localFile{}
	r.toks = map[string]*tokenizer.Tokenizer{}
	r.chats = map[string]chat.TemplateConfig{}
	r.probed = make(chan struct{})
	r.ls = global.Get("logitscope")
	if r.ls.Type() != js.TypeObject {
		r.ls = global.Get("Object").New()
		global.Set("logitscope", r.ls)
	}
	r.ls.Set("ready", true)

	loc := global.Get("location")
	q, _ := url.ParseQuery(trimQ(loc.Get("search").String()))
	if v, ok := snapshot.ViewQuery(q); ok {
		r.wantView = &v
	}
	spec, err := snapshot.ParseQuery(q)
	r.setSpec(spec)
	r.hubBoot(q)

	if br, berr := newBridge(); berr != nil {
		r.BridgeErr = berr.Error()
		close(r.probed)
	} else {
		r.br = br
		br.onProgress(func(p progress) { r.update(func() { r.Progress = p }) })
		go r.probe()
	}
	go r.loadModels()

	switch id := snapID(loc.Get("pathname").String()); {
	case id != "":
		r.SnapID = id
		r.begin("loading shared snapshot " + id)
		go r.loadSnapshot(id, q)
	case q.Get("snapshot") != "":
		r.SnapURL = q.Get("snapshot")
		r.begin("loading snapshot " + r.SnapURL)
		go r.loadSnapshotURL(r.SnapURL, q)
	case err != nil:
		r.fail(fmt.Errorf("this link's spec: %v", err))
	case q.Get("autorun") == "1" && r.localMissing() != "":
		r.autorunWaits = true
		r.syncURLNow()
	case r.IsLocalModel():
		if q.Get("autorun") == "1" {
			r.Run()
		} else {
			r.syncURLNow()
		}
	default:
		// A served model: its ready prompt and panel come with the model
		// list, and whether the link runs on open depends on them.
		r.bootQuery = q
		r.State = "loading"
	}
}

// afterModels completes boot once the model list is in (or failed): the
// spec takes the model's ready prompt and panel, a panel mode and the
// variants the model has where the link names none (readySpec), and the
// page runs it on open when the link says autorun=1, or when it names no
// spec at all and the model has a ready text (the demo: the first screen
// is a finished comparison). autorun=0 only fills the form. Lock held.
func (r *Root) afterModels() {
	q := r.bootQuery
	r.bootQuery = nil
	if r.State != "loading" {
		return // something started meanwhile (Run, a dropped dump): leave it be
	}
	r.State = "idle"
	m := r.model(r.Spec.Model)
	r.setSpec(readySpec(r.Spec, q, m))
	auto := q.Get("autorun")
	if auto == "1" || auto == "" && !specNamed(q) && m != nil && (m.Prompt != "" || m.Panel != "") {
		r.Run()
		return
	}
	r.syncURLNow()
}

func trimQ(s string) string {
	if len(s) > 0 && s[0] == '?' {
		return s[1:]
	}
	return s
}

// update changes state from a goroutine and asks for a render.
func (r *Root) update(f func()) {
	r.ee.Lock()
	defer r.ee.UnlockRender()
	f()
}

func (r *Root) probe() {
	p, err := r.br.probe()
	r.update(func() {
		r.Probe, r.ProbeDone = p, true
		if err != nil {
			r.BridgeErr = "the bridge's probe failed: " + err.Error()
		}
	})
	close(r.probed)
}

func (r *Root) loadModels() {
	data, err := fetchBytes("/models/")
	var ms []modelInfo
	if err == nil {
		err = json.Unmarshal(data, &ms)
	}
	r.update(func() {
		if err != nil {
			r.ModelsErr = "model list: " + err.Error()
		} else {
			r.Models = ms
		}
		if r.bootQuery != nil {
			r.afterModels()
		}
	})
}

// model is the listed model called name, or the chosen folder's when it
// is that one and has been read, or nil.
func (r *Root) model(name string) *modelInfo {
	if lf := r.folderFor(name); lf != nil && lf.Read && lf.Err == "" {
		return &lf.Info
	}
	for i := range r.Models {
		if r.Models[i].Name == name {
			return &r.Models[i]
		}
	}
	return nil
}

// tokenizer loads (once) and returns a model's tokenizer: a served
// model's, or the chosen folder lf's (nil for a served model). Goroutines
// only.
func (r *Root) tokenizer(model string, lf *localFolder) (*tokenizer.Tokenizer, error) {
	r.tokMu.Lock()
	defer r.tokMu.Unlock()
	if lf != nil {
		if lf.tok == nil {
			data, err := lf.file("tokenizer.json")
			if err != nil {
				return nil, err
			}
			if lf.tok, err = tokenizer.Parse(data, lf.Name+"/tokenizer.json"); err != nil {
				return nil, err
			}
		}
		return lf.tok, nil
	}
	if t := r.toks[model]; t != nil {
		return t, nil
	}
	data, err := r.modelFile(model, "tokenizer.json")
	if err == nil && data == nil {
		err = fmt.Errorf("model %s: the server has no tokenizer.json: the page needs it to tokenize the prompt", model)
	}
	if err != nil {
		return nil, err
	}
	t, err := tokenizer.Parse(data, model+"/tokenizer.json")
	if err != nil {
		return nil, err
	}
	r.toks[model] = t
	return t, nil
}

// modelFile reads a served model's file through the worker's Cache
// Storage (modelcache.js), so that a file the engine reads too, such as
// tokenizer.json, crosses the network once. A file the model list does
// not list is nil, nil, as a model without tokenizer_config.json has.
// Goroutines only.
func (r *Root) modelFile(model, path string) ([]byte, error) {
	r.ee.RLock()
	var f *fileInfo
	if m := r.model(model); m != nil {
		for i := range m.Files {
			if m.Files[i].Path == path {
				f = &m.Files[i]
			}
		}
	}
	r.ee.RUnlock()
	if f == nil {
		return fetchOptional("/models/" + url.PathEscape(model) + "/" + path)
	}
	arg, err := toJS(f)
	if err != nil {
		return nil, err
	}
	v, err := call(global.Get("LogitscopeModelCache"), "bytes", model, arg)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %v", model, path, err)
	}
	return bytesOf(v), nil
}

// chatTemplate loads (once) and returns a model's chat template from its
// tokenizer_config.json (a served model's, or the chosen folder lf's), so
// the page prompts each model as transformers would; a model without
// that file is ChatML. Goroutines only.
func (r *Root) chatTemplate(model string, lf *localFolder) (chat.TemplateConfig, error) {
	r.tokMu.Lock()
	defer r.tokMu.Unlock()
	if lf != nil && lf.chat != nil {
		return *lf.chat, nil
	}
	if c, ok := r.chats[model]; ok && lf == nil {
		return c, nil
	}
	var data []byte
	var err error
	if lf != nil {
		data, err = lf.file("tokenizer_config.json")
	} else {
		data, err = r.modelFile(model, "tokenizer_config.json")
	}
	if err != nil {
		return chat.TemplateConfig{}, err
	}
	var c chat.TemplateConfig
	if data != nil {
		where := model
		if lf != nil {
			where = lf.Name
		}
		if c, err = chat.ParseConfig(data); err != nil {
			return chat.TemplateConfig{}, fmt.Errorf("%s/tokenizer_config.json: %w", where, err)
		}
		c.Source = where + "/tokenizer_config.json"
	}
	if lf != nil {
		lf.chat = &c
	} else {
		r.chats[model] = c
	}
	return c, nil
}

// begin enters the running state.
func (r *Root) begin(stage string) {
	r.Err, r.Stage, r.StageStep, r.Progress = "", stage, "", progress{}
	r.clearDoc()
	r.State = "running"
	for _, k := range []string{"result", "logits", "error"} {
		r.ls.Delete(k)
	}
}

func (r *Root) clearDoc() {
	r.Doc, r.strip, r.summary, r.kldSVG, r.marginSVG = nil, "", "", "", ""
	r.Sweep = nil
	r.Split, r.splitMarkup = nil, ""
	r.ls.Delete("split")
	r.Share = shareState{}
}

// fail shows err as it came, in the page and in window.logitscope.error.
func (r *Root) fail(err error) {
	r.Err = err.Error()
	r.State = "error"
	r.ls.Set("error", r.Err)
}

// logitsOut is window.logitscope.logits of a run: the rows as the engine
// wrote them, Width float32 each (Vocab logits, then a mixture of experts'
// routes), float32 little-endian. A script reads ref and test as base64,
// encoded when it asks: encoded with the document, the two strings and
// their JS copies were most of the page's peak memory past the engine's
// (about 100 MB for 33 rows of a 151,936-token vocabulary).
type logitsOut struct {
	Vocab, Width int
	Ref, Test    []byte
}

// show makes doc the page's document; raw is its JSON (nil: marshal it).
func (r *Root) show(doc *snapshot.Doc, raw []byte, source string, lg *logitsOut) {
	if raw == nil {
		b, err := json.Marshal(doc)
		if err != nil {
			r.fail(fmt.Errorf("snapshot: %v", err))
			return
		}
		raw = b
	}
	r.clearDoc()
	r.Doc, r.Source = doc, source
	r.docSeq++
	r.strip = stripHTML(doc)
	r.summary = summaryHTML(summaryView(doc))
	if err := r.showSplit(doc); err != nil {
		r.fail(err)
		return
	}
	r.setView(doc)
	r.drawCharts()
	r.Err = ""
	r.ls.Set("result", jsonObj.Call("parse", string(raw)))
	for _, f := range r.logitGetters {
		f.Release()
	}
	r.logitGetters = nil
	if lg != nil {
		object := global.Get("Object")
		l := object.New()
		l.Set("vocab", lg.Vocab)
		l.Set("width", lg.Width)
		for _, side := range []struct {
			name string
			rows []byte
		}{{"ref", lg.Ref}, {"test", lg.Test}} {
			get := js.FuncOf(func(js.Value, []js.Value) any { return base64.StdEncoding.EncodeToString(side.rows) })
			r.logitGetters = append(r.logitGetters, get)
			desc := object.New()
			desc.Set("get", get)
			desc.Set("enumerable", true)
			object.Call("defineProperty", l, side.name, desc)
		}
		r.ls.Set("logits", l)
	} else {
		r.ls.Delete("logits")
	}
	r.ls.Delete("error")
	r.State = "done"
	r.syncURLNow()
}

// setView takes the view a new document opens on: the link's (pos, tab,
// zoom), else the one the document was shared with, else the first
// disagreement, all positions and no zoom. A part that does not fit the
// document is left at its default.
func (r *Root) setView(doc *snapshot.Doc) {
	n := len(doc.Report.Positions)
	r.Sel, r.Filter, r.Zoom = 0, snapshot.TabAll, span{}
	if f := doc.Report.Summary.FirstDisagreement; f >= 0 && f < n {
		r.Sel = f
	}
	v := r.wantView
	r.wantView = nil
	if v == nil {
		v = doc.View
	}
	if v == nil {
		return
	}
	if v.Pos < n {
		r.Sel = v.Pos
	}
	if v.Tab != "" { // ViewQuery and Parse admit only the tabs there are
		r.Filter = v.Tab
	}
	if z := (span{v.From, v.To}); z.To > 0 {
		if from, to := z.of(n); from == z.From && to == z.To {
			r.Zoom = z
		}
	}
}

// view is what the page shows of its document now.
func (r *Root) view() snapshot.View {
	return snapshot.View{Pos: r.Sel, Tab: r.StripFilter(), From: r.Zoom.From, To: r.Zoom.To}
}

// drawCharts draws both charts for the zoom in effect.
func (r *Root) drawCharts() {
	r.chartSeq++
	r.kldSVG = kldChart(r.Doc, -1, r.Zoom)
	r.marginSVG = marginChart(r.Doc, -1, r.Zoom)
}

// ZoomBy zooms the charts in (factor 0.5) or out (2) around the selected
// position; 0 shows every position.
func (r *Root) ZoomBy(factor float64) {
	if r.Doc == nil {
		return
	}
	z := span{}
	if factor > 0 {
		z = r.Zoom.zoomed(factor, r.Sel, len(r.Doc.Report.Positions))
	}
	if z != r.Zoom {
		r.Zoom = z
		r.drawCharts()
		r.syncURL()
	}
}

// ZoomText says which positions the charts show.
func (r *Root) ZoomText() string {
	n := len(r.Doc.Report.Positions)
	from, to := r.Zoom.of(n)
	if from == 0 && to == n {
		return "all " + strconv.Itoa(n) + " positions"
	}
	return "positions " + strconv.Itoa(from) + "–" + strconv.Itoa(to-1) + " of " + strconv.Itoa(n)
}

// CanZoom says whether ZoomBy(factor) would change the charts.
func (r *Root) CanZoom(factor float64) bool {
	if r.Doc == nil {
		return false
	}
	if factor == 0 {
		return r.Zoom != span{}
	}
	return r.Zoom.zoomed(factor, r.Sel, len(r.Doc.Report.Positions)) != r.Zoom
}

// flushBody writes State to body.dataset.state; the render loop calls it
// after each render.
func (r *Root) flushBody() {
	if r.State == r.bodyState {
		return
	}
	r.bodyState = r.State
	global.Get("document").Get("body").Get("dataset").Set("state", r.State)
}

// syncURL updates the address bar soon: edits and key presses come in
// bursts, and Chromium ignores replaceState beyond a few hundred calls in
// ten seconds.
func (r *Root) syncURL() {
	if r.urlPending {
		return
	}
	r.urlPending = true
	if r.urlFlush.IsUndefined() {
		r.urlFlush = js.FuncOf(func(js.Value, []js.Value) any {
			r.ee.Lock()
			defer r.ee.UnlockOnly()
			if r.urlPending {
				r.syncURLNow()
			}
			return nil
		})
	}
	global.Call("setTimeout", r.urlFlush, 150)
}

// syncURLNow puts the spec (or the shared snapshot's path) and the view
// (selected position, tab, zoom) into the address bar, without a new
// history entry.
func (r *Root) syncURLNow() {
	r.urlPending = false
	var u string
	q := url.Values{}
	switch {
	case r.SnapID != "":
		u = "/r/" + r.SnapID
	case r.SnapURL != "":
		u = "/"
		q.Set("snapshot", r.SnapURL)
	default:
		q = r.Spec.Query()
		r.hubQuery(q)
		if r.Ran {
			q.Set("autorun", "1")
		}
		u = "/"
	}
	if r.Doc != nil {
		r.view().SetQuery(q)
	}
	if r.Sweep != nil {
		r.SweepView.setQuery(q)
	}
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	global.Get("history").Call("replaceState", js.Null(), "", u)
}

// Select makes position i (clamped) the inspected one.
func (r *Root) Select(i int) {
	if r.Doc == nil {
		return
	}
	n := len(r.Doc.Report.Positions)
	i = min(max(i, 0), n-1)
	if i != r.Sel {
		r.Sel = i
		r.syncURL()
	}
}

// Step moves the selection by d; false when it cannot move.
func (r *Root) Step(d int) bool {
	if r.Doc == nil {
		return false
	}
	i := r.Sel + d
	if i < 0 || i >= len(r.Doc.Report.Positions) {
		return false
	}
	r.Select(i)
	return true
}

// Inspect is the inspector's view of the selected position.
func (r *Root) Inspect() inspector { return inspectorView(r.Doc, r.Sel) }

// Filters lists the strip's filters that apply to the document: routing
// changes only for a mixture of experts.
func (r *Root) Filters() [][2]string {
	f := [][2]string{{snapshot.TabAll, "all positions"}, {snapshot.TabFlips, "argmax flips"}}
	if r.Doc != nil && r.Doc.Report.Routing != nil {
		f = append(f, [2]string{snapshot.TabRoutes, "routing changes"})
	}
	return f
}

// StripFilter is the filter in effect: routes falls back to all for a
// document without routing.
func (r *Root) StripFilter() string {
	if r.Filter == snapshot.TabRoutes && (r.Doc == nil || r.Doc.Report.Routing == nil) {
		return snapshot.TabAll
	}
	return r.Filter
}

// SetTab changes the strip's tab.
func (r *Root) SetTab(tab string) {
	switch tab {
	case snapshot.TabAll, snapshot.TabFlips, snapshot.TabRoutes:
		if tab != r.Filter {
			r.Filter = tab
			r.syncURL()
		}
	}
}

// Flagged counts the positions the strip's filter keeps.
func (r *Root) Flagged() int {
	n := 0
	for i := range r.Doc.Report.Positions {
		if flagged(r.Doc, i, r.StripFilter()) {
			n++
		}
	}
	return n
}

// JumpFlag selects the next (d 1) or previous (d −1) position the filter
// keeps; false when there is none.
func (r *Root) JumpFlag(d int) bool {
	if r.Doc == nil {
		return false
	}
	i := nextFlagged(r.Doc, r.Sel, d, r.StripFilter())
	if i < 0 {
		return false
	}
	r.Select(i)
	return true
}

// CanJump says whether JumpFlag(d) would move.
func (r *Root) CanJump(d int) bool {
	return r.Doc != nil && nextFlagged(r.Doc, r.Sel, d, r.StripFilter()) >= 0
}
