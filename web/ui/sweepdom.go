//go:build js && wasm

package main

// A sweep or a recipe in the page: dropped as the CLI wrote it
// (addFiles, readDocFile), or shared at /r/<id> (loadSnapshot), drawn by sweep.go into
// #sweep-body, whose clicks and changes come here by delegation.

import (
	"net/url"
	"strconv"
	"syscall/js"

	"github.com/vugu/vugu"
	vjs "github.com/vugu/vugu/js"
)

// showSweep makes d the page's document (lock held), opening on the
// link's view when it has one.
func (r *Root) showSweep(d *sweepDoc, source string, q url.Values) {
	r.clearDoc()
	r.Sweep, r.Source = d, source
	r.SweepView = sweepQueryView(q)
	r.sweepSeq++
	r.Err = ""
	r.ls.Set("result", jsonObj.Call("parse", string(d.Raw)))
	r.ls.Delete("logits")
	r.ls.Delete("error")
	r.State = "done"
	r.syncURLNow()
}

// sweepQueryView reads a sweep's view from a link: measure, unit and
// call (1-based in links, as people count).
func sweepQueryView(q url.Values) sweepView {
	v := sweepView{Measure: q.Get("measure"), Unit: -1, Call: -1}
	if n, err := strconv.Atoi(q.Get("unit")); err == nil && n > 0 {
		v.Unit = n - 1
	}
	if n, err := strconv.Atoi(q.Get("call")); err == nil && n > 0 {
		v.Call = n - 1
	}
	return v
}

// setQuery puts the sweep's view in a link's query.
func (v sweepView) setQuery(q url.Values) {
	if v.Measure != "" {
		q.Set("measure", v.Measure)
	}
	if v.Unit >= 0 {
		q.Set("unit", strconv.Itoa(v.Unit+1))
	}
	if v.Call >= 0 {
		q.Set("call", strconv.Itoa(v.Call+1))
	}
}

// PopulateSweep draws the sweep when it or its view changed.
func (r *Root) PopulateSweep(v vjs.Value) {
	if r.Sweep != nil {
		fill(js.Value(v), r.sweepSeq, sweepHTML(r.Sweep, r.SweepView))
	}
}

// ClickSweep opens a heatmap cell's unit report, or a clear call's
// culprits (its "what caused this?" button; pressed again, it closes).
func (r *Root) ClickSweep(e vugu.DOMEvent) {
	t := js.Value(e.JSEventTarget())
	if r.Sweep == nil || !t.Truthy() || t.Get("closest").Type() != js.TypeFunction {
		return
	}
	v := r.SweepView
	if c := t.Call("closest", "[data-unit]"); c.Truthy() {
		v.Unit, _ = strconv.Atoi(c.Call("getAttribute", "data-unit").String())
	} else if c := t.Call("closest", "[data-call]"); c.Truthy() {
		n, _ := strconv.Atoi(c.Call("getAttribute", "data-call").String())
		if v.Call == n {
			n = -1
		}
		v.Call = n
	} else {
		return
	}
	r.setSweepView(v)
}

// ChangeSweep takes the heatmap's measure.
func (r *Root) ChangeSweep(e vugu.DOMEvent) {
	t := js.Value(e.JSEventTarget())
	if r.Sweep == nil || !t.Truthy() || t.Get("id").String() != "sweep-measure" {
		return
	}
	v := r.SweepView
	v.Measure = t.Get("value").String()
	r.setSweepView(v)
}

func (r *Root) setSweepView(v sweepView) {
	if v != r.SweepView {
		r.SweepView = v
		r.sweepSeq++
		r.syncURL()
	}
}

// ShareSweep stores the sweep's bytes as they came (their seal covers
// them): the link carries the view.
func (r *Root) ShareSweep() {
	if r.Sweep == nil || r.Share.Busy {
		return
	}
	d := r.Sweep
	r.post(d.Raw, func() bool { return r.Sweep == d })
}

// SweepLink is the shared sweep's link with the view shown now.
func (r *Root) SweepLink() string {
	q := url.Values{}
	r.SweepView.setQuery(q)
	if len(q) == 0 {
		return r.Share.URL
	}
	return r.Share.URL + "?" + q.Encode()
}

// SweepShareLabel is the share button's text.
func (r *Root) SweepShareLabel() string {
	switch {
	case r.Share.Busy:
		return "Sharing…"
	case r.Share.URL != "":
		return "Shared"
	}
	if r.Sweep != nil && r.Sweep.Rec != nil {
		return "Share this recipe"
	}
	return "Share this sweep"
}

// readDocFile reads a dropped or chosen .json file: a snapshot, a sweep
// or a recipe, shown as a shared one is (openDoc).
func (r *Root) readDocFile(f js.Value) {
	name := f.Get("name").String()
	r.begin("reading " + name)
	r.SnapID, r.SnapURL = "", ""
	go func() {
		buf, err := call(f, "arrayBuffer")
		var data []byte
		if err == nil {
			data = bytesOf(buf)
		}
		r.openDoc(data, err, name, nil)
	}()
}
