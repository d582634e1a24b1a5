//go:build js && wasm

package main

// Sharing: POST /api/runs stores the document, /r/<id> shows it again.

import (
	"encoding/json"
	"fmt"
	"net/url"

	"logitscope/internal/analysis/snapshot"
)

type shareState struct {
	Busy   bool
	URL    string // the absolute /r/<id> link (ShareLink adds the view)
	Err    string
	Copied bool
}

// ShareNow posts the document with the view it is shown in (the share
// button), so that the snapshot reopens on the same position, tab and
// zoom even from its bare /r/<id>.
func (r *Root) ShareNow() {
	if r.Doc == nil || r.Share.Busy {
		return
	}
	d := *r.Doc
	v := r.view()
	d.View = &v
	body, err := json.Marshal(&d)
	if err != nil {
		r.Share = shareState{Err: "share: " + err.Error()}
		return
	}
	seq := r.docSeq
	r.post(body, func() bool { return r.docSeq == seq })
}

// post stores body in the background (lock held) and shows its link,
// unless shown says another document has taken the page meanwhile.
func (r *Root) post(body []byte, shown func() bool) {
	r.Share = shareState{Busy: true}
	go func() {
		link, err := share(body)
		r.update(func() {
			if !shown() {
				return
			}
			r.Share = shareState{URL: link}
			if err != nil {
				r.Share.Err = err.Error()
			}
		})
	}()
}

func share(body []byte) (string, error) {
	reply, err := postJSON("/api/runs", body)
	if err != nil {
		return "", fmt.Errorf("share: %v", err)
	}
	var v struct {
		ID  string `json:"id"`
		URL string `json:"url"`
	}
	if err := json.Unmarshal(reply, &v); err != nil || v.URL == "" {
		return "", fmt.Errorf("share: the server's reply %q has no url", string(reply))
	}
	return global.Get("location").Get("origin").String() + v.URL, nil
}

// ShareLink is the shared snapshot's link with the view shown now, which
// the link's query carries past what the snapshot recorded when shared.
func (r *Root) ShareLink() string {
	q := url.Values{}
	r.view().SetQuery(q)
	if len(q) == 0 {
		return r.Share.URL
	}
	return r.Share.URL + "?" + q.Encode()
}

// CopyShare copies the link: the input's text is selected and copied
// (inside the click, where the browser allows it), with the async
// clipboard API as a second try.
func (r *Root) CopyShare() {
	if r.Share.URL == "" {
		return
	}
	doc := global.Get("document")
	in := doc.Call("getElementById", "share-link")
	ok := false
	if in.Truthy() {
		in.Call("select")
		ok = doc.Call("execCommand", "copy").Truthy()
	}
	if !ok {
		if cb := global.Get("navigator").Get("clipboard"); cb.Truthy() {
			cb.Call("writeText", r.ShareLink()).Call("catch", noop)
			ok = true
		}
	}
	r.Share.Copied = ok
}

var noop = jsFunc(func() {})

// loadSnapshot shows a stored document without running anything: a
// run's snapshot, or a sweep or a recipe in the view the link's query q
// says.
func (r *Root) loadSnapshot(id string, q url.Values) {
	data, err := fetchBytes("/api/runs/" + id)
	if err == nil && isSweep(data) {
		d, err := parseSweep(data, "shared sweep "+id)
		r.update(func() {
			if err != nil {
				r.fail(err)
				return
			}
			r.showSweep(d, "snapshot", q)
		})
		return
	}
	var doc *snapshot.Doc
	if err == nil {
		doc, err = snapshot.Parse(data)
	}
	r.update(func() {
		if err != nil {
			r.fail(fmt.Errorf("shared snapshot %s: %v", id, err))
			return
		}
		if doc.Spec != nil {
			r.setSpec(cloneSpec(*doc.Spec))
		}
		r.show(doc, data, "snapshot", nil)
	})
}
