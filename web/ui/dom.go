//go:build js && wasm

package main

// The token strip and the charts hold thousands of nodes: vugu would send
// and diff all of them at every render (a key press, a progress report).
// Their elements have no vugu children, so vugu leaves their content
// alone; vg-js-populate calls these after each render, and they set the
// content only when the document changed (the element remembers which
// document it shows) and move the selection mark when the selection did.

import (
	"strconv"
	"syscall/js"

	"github.com/vugu/vugu"
	vjs "github.com/vugu/vugu/js"

	"logitscope/web/ui/chart"
)

// fill sets el's innerHTML to html unless el shows seq already (the
// document's, or for the charts the document's and zoom's); it reports
// whether it did. It is the page's only innerHTML write, and
// html is always built with package markup, which escapes every value.
func fill(el js.Value, seq int, html string) bool {
	if got := el.Get("__lsSeq"); got.Type() == js.TypeNumber && got.Int() == seq {
		return false
	}
	el.Set("innerHTML", html)
	el.Set("__lsSeq", seq)
	el.Set("__lsSel", -1)
	return true
}

// PopulateStrip fills the token strip and marks the selected token,
// scrolling the strip (not the page) to keep it in view.
func (r *Root) PopulateStrip(v vjs.Value) {
	el := js.Value(v)
	if r.Doc == nil {
		return
	}
	fill(el, r.docSeq, r.strip)
	if el.Get("__lsSel").Int() == r.Sel {
		return
	}
	if old := el.Call("querySelector", ".sel"); old.Truthy() {
		old.Get("classList").Call("remove", "sel")
	}
	// By its number: the prompt's tokens and a panel's window starts come
	// between the positions.
	cur := el.Call("querySelector", `[data-i="`+strconv.Itoa(r.Sel)+`"]`)
	if cur.Truthy() {
		cur.Get("classList").Call("add", "sel")
		top, h := cur.Get("offsetTop").Float(), cur.Get("offsetHeight").Float()
		st, ch := el.Get("scrollTop").Float(), el.Get("clientHeight").Float()
		switch {
		case top < st:
			el.Set("scrollTop", top-4)
		case top+h > st+ch:
			el.Set("scrollTop", top+h-ch+4)
		}
	}
	el.Set("__lsSel", r.Sel)
}

// ClickStrip selects the clicked token.
func (r *Root) ClickStrip(e vugu.DOMEvent) {
	t := js.Value(e.JSEventTarget())
	if !t.Truthy() || t.Get("closest").Type() != js.TypeFunction {
		return
	}
	if span := t.Call("closest", "[data-i]"); span.Truthy() {
		if i, err := strconv.Atoi(span.Call("getAttribute", "data-i").String()); err == nil {
			r.Select(i)
		}
	}
}

// PopulateKLD and PopulateMargin fill a chart and move its cursor.
func (r *Root) PopulateKLD(v vjs.Value)    { r.populateChart(js.Value(v), r.kldSVG) }
func (r *Root) PopulateMargin(v vjs.Value) { r.populateChart(js.Value(v), r.marginSVG) }

func (r *Root) populateChart(el js.Value, svg string) {
	if r.Doc == nil {
		return
	}
	fill(el, r.chartSeq, svg)
	if el.Get("__lsSel").Int() == r.Sel {
		return
	}
	if c := el.Call("querySelector", "rect.cursor"); c.Truthy() {
		from, to := r.Zoom.of(len(r.Doc.Report.Positions))
		if r.Sel < from || r.Sel >= to {
			c.Call("setAttribute", "visibility", "hidden")
		} else {
			x, w := chart.Default.Cursor(r.Sel-from, to-from)
			c.Call("setAttribute", "x", strconv.FormatFloat(x, 'f', 2, 64))
			c.Call("setAttribute", "width", strconv.FormatFloat(w, 'f', 2, 64))
			c.Call("removeAttribute", "visibility")
		}
	}
	el.Set("__lsSel", r.Sel)
}

// ClickChart selects the position under the click.
func (r *Root) ClickChart(e vugu.DOMEvent) {
	if r.Doc == nil {
		return
	}
	svg := js.Value(e.JSEventCurrentTarget()).Call("querySelector", "svg")
	if !svg.Truthy() {
		return
	}
	box := svg.Call("getBoundingClientRect")
	w := box.Get("width").Float()
	if w <= 0 {
		return
	}
	fx := (e.PropFloat64("clientX") - box.Get("left").Float()) / w
	from, to := r.Zoom.of(len(r.Doc.Report.Positions))
	if i := chart.Default.IndexAt(fx, to-from); i >= 0 {
		r.Select(from + i)
	}
}

// PopulateSummary fills the summary once per document.
func (r *Root) PopulateSummary(v vjs.Value) {
	if r.Doc != nil {
		fill(js.Value(v), r.docSeq, r.summary)
	}
}

// ClickSummary follows a link to a position (the first disagreement).
func (r *Root) ClickSummary(e vugu.DOMEvent) {
	t := js.Value(e.JSEventTarget())
	if !t.Truthy() || t.Get("closest").Type() != js.TypeFunction {
		return
	}
	a := t.Call("closest", "[data-pos]")
	if !a.Truthy() {
		return
	}
	e.PreventDefault()
	if i, err := strconv.Atoi(a.Call("getAttribute", "data-pos").String()); err == nil {
		r.Select(i)
		global.Get("document").Call("getElementById", "inspector").Call("scrollIntoView", map[string]any{"block": "start"})
	}
}

// PopulateValue puts s in an input's value, where it is not already
// (the user's typing put it there): set by the DOM and not by vugu's
// renderer, whose instructions must fit 16 KiB, which a long panel, a
// long prompt or a link carrying either does not.
func (r *Root) PopulateValue(v vjs.Value, s string) {
	el := js.Value(v)
	if el.Get("value").String() != s {
		el.Set("value", s)
	}
}

// ShowError scrolls a new error into view: it sits at the top of the page,
// and the Run that failed was pressed below, where nothing would change.
// The element remembers the error it scrolled to, so a render does not
// scroll again.
func (r *Root) ShowError(v vjs.Value) {
	el := js.Value(v)
	if el.Get("dataset").Get("shown").String() == r.Err {
		return
	}
	el.Get("dataset").Set("shown", r.Err)
	opts := global.Get("Object").New()
	opts.Set("block", "nearest")
	el.Call("scrollIntoView", opts)
}
