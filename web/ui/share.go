//go:build js && wasm

package main

// Sharing: POST /api/runs stores the document, /r/<id> shows it again.

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"syscall/js"

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

// share posts body with the write token this browser keeps, and once
// more with one asked for when the server refuses it for want of one.
func share(body []byte) (string, error) {
	reply, err := postJSON("/api/runs", body, writeToken())
	if err != nil && (strings.Contains(err.Error(), "HTTP 401") || strings.Contains(err.Error(), "HTTP 403") && !strings.Contains(err.Error(), "read-only")) {
		if tok := askWriteToken(err); tok != "" {
			reply, err = postJSON("/api/runs", body, tok)
		}
	}
	if err != nil {
		return "", fmt.Errorf("share: %v", err)
	}
	var v struct {
		ID   string `json:"id"`
		URL  string `json:"url"`
		Link string `json:"link"` // names the server's public URL
	}
	if err := json.Unmarshal(reply, &v); err != nil || v.URL == "" {
		return "", fmt.Errorf("share: the server's reply %q has no url", string(reply))
	}
	if v.Link != "" {
		return v.Link, nil
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
	r.openDoc(data, err, "shared snapshot "+id, q)
}

// loadSnapshotURL shows the document at u, a link's ?snapshot=URL: a file
// the CLI wrote (report --snapshot, conform's), served by this server or
// any the page may fetch from. The page's Content-Security-Policy lets it
// fetch only from its own origin (and the model hubs), so the message of
// a refused fetch says where to put the file.
func (r *Root) loadSnapshotURL(u string, q url.Values) {
	data, err := fetchBytes(u)
	if err != nil {
		err = fmt.Errorf("%v (the page reads snapshots from its own server only: open the file with the drop zone's file chooser, or share it with logitscope report --share)", err)
	}
	r.openDoc(data, err, "snapshot "+u, q)
}

// openDoc shows a document's bytes (lock not held): a sweep or a recipe,
// or a run's snapshot, checked by snapshot.Parse whether it came from
// this server, another, or a file: no engine is needed to show it.
func (r *Root) openDoc(data []byte, err error, name string, q url.Values) {
	if err == nil && isSweep(data) {
		d, err := parseSweep(data, name)
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
			r.fail(fmt.Errorf("%s: %v", name, err))
			return
		}
		if doc.Spec != nil {
			r.setSpec(cloneSpec(*doc.Spec))
		}
		r.show(doc, data, "snapshot", nil)
	})
}

// writeToken is the token a team's server asks of a share (sent as
// Authorization: Bearer), kept in this browser's localStorage once given.
const writeTokenKey = "logitscope.writeToken"

func writeToken() string {
	ls := global.Get("localStorage")
	if !ls.Truthy() {
		return ""
	}
	v := ls.Call("getItem", writeTokenKey)
	if v.Type() != js.TypeString {
		return ""
	}
	return v.String()
}

// askWriteToken asks for the server's write token after a refusal (HTTP
// 401 or 403) and keeps it; "" when the user gives none.
func askWriteToken(refusal error) string {
	v := global.Call("prompt", "This logitscope server takes shared runs only with its write token.\n"+refusal.Error()+"\n\nWrite token (kept in this browser):")
	if v.Type() != js.TypeString || v.String() == "" {
		return ""
	}
	if ls := global.Get("localStorage"); ls.Truthy() {
		ls.Call("setItem", writeTokenKey, v.String())
	}
	return v.String()
}
