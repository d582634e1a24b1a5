//go:build js && wasm

package main

// A model from the Hugging Face Hub, downloaded by this browser straight
// from the hub (the hub serves CORS headers; nothing passes through our
// server) into memory, then run exactly as a model folder from this
// computer (folder.go): the files become the folder's Blobs, which the
// worker reads where they lie. Package hub's rules choose the files and
// check each against the sha256 (LFS) or git blob sha1 the hub's API
// gives for it. The form's hub field is hub-field.vugu; its id and
// endpoint are the URL's hf and hf_endpoint, so a link reopens the model
// (with autorun=1, downloads and runs it).

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"syscall/js"
	"time"

	"github.com/vugu/vugu"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/model/hub"
)

// hubState is the hub field and its download. Its fields change under
// the EventEnv lock.
type hubState struct {
	ID, Endpoint string // the form's fields
	Busy         bool
	File         string  // the file downloading
	Done, Total  float64 // bytes of every file so far, and together
	Err          string
	seq          int // bumps with each download; an older one stops
}

// hubBoot reads the hub field from the URL (hf, hf_endpoint). A link that
// says autorun and names a hub model downloads it, and the run starts
// once its folder is read (autorunLocal).
func (r *Root) hubBoot(q url.Values) {
	r.Hub.ID, r.Hub.Endpoint = q.Get("hf"), q.Get("hf_endpoint")
	if r.Hub.Endpoint == "" {
		r.Hub.Endpoint = hub.DefaultEndpoint
	}
	if r.Hub.ID == "" || q.Get("autorun") != "1" {
		return
	}
	id, err := hub.Parse(r.Hub.ID)
	if err != nil {
		r.Hub.Err = err.Error()
		return
	}
	if name, local := snapshot.LocalModel(r.Spec.Model); !local || name != id.Name() {
		r.Spec.Model, r.Spec.Fingerprint = snapshot.LocalPrefix+id.Name()+"/", ""
	}
	r.OpenHub()
}

// hubQuery adds the hub field to a URL's query.
func (r *Root) hubQuery(q url.Values) {
	if r.Hub.ID == "" {
		return
	}
	q.Set("hf", r.Hub.ID)
	if r.Hub.Endpoint != hub.DefaultEndpoint {
		q.Set("hf_endpoint", r.Hub.Endpoint)
	}
}

// SetHub sets the hub field's id or endpoint from an input event.
func (r *Root) SetHub(field string, e vugu.DOMEvent) {
	v := strings.TrimSpace(value(e))
	if field == "endpoint" {
		r.Hub.Endpoint = v
	} else {
		r.Hub.ID = v
	}
	r.Hub.Err = ""
	r.syncURL()
}

// OpenHub downloads the hub field's model in the background.
func (r *Root) OpenHub() {
	id, err := hub.Parse(r.Hub.ID)
	if err == nil && id.File != "" {
		err = fmt.Errorf("%s: the page runs a GGUF file beside its model's checkpoint: open the checkpoint's repo here, and choose the GGUF file as a side's file from this computer", id)
	}
	if err == nil {
		_, err = url.Parse(r.Hub.Endpoint)
	}
	if err != nil {
		r.Hub.Err = err.Error()
		return
	}
	r.Hub.seq++
	r.Hub.Busy, r.Hub.Err, r.Hub.File, r.Hub.Done, r.Hub.Total = true, "", "", 0, 0
	go r.downloadHub(id, strings.TrimRight(r.Hub.Endpoint, "/"), r.Hub.seq)
}

// downloadHub downloads id's model into a folder and makes it the model.
// Goroutines only.
func (r *Root) downloadHub(id hub.ID, endpoint string, seq int) {
	lf, err := r.hubFolder(id, endpoint, seq)
	r.update(func() {
		if r.Hub.seq != seq {
			return // another download replaced this one
		}
		r.Hub.Busy = false
		if err != nil {
			r.Hub.Err = err.Error()
			return
		}
		go r.readFolder(lf)
		r.chooseFolder(lf)
	})
}

// hubFolder asks the hub's API for the commit and files of id, downloads
// the files the model needs (hub.Pick, then the shards its index names)
// and checks each. Goroutines only.
func (r *Root) hubFolder(id hub.ID, endpoint string, seq int) (*localFolder, error) {
	api := hub.APIURL(endpoint, id, true)
	data, err := hubFetch(id, api)
	if err != nil {
		return nil, err
	}
	var info hub.RepoInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("%s: GET %s: %v", id, api, err)
	}
	if !hub.IsCommit(info.SHA) {
		return nil, fmt.Errorf("%s: GET %s: sha %q is not a commit id", id, api, info.SHA)
	}
	sib := map[string]hub.Sibling{}
	for _, s := range info.Siblings {
		sib[s.Name] = s
	}
	files, err := hub.Pick(id.Repo, info.Names(), "")
	if err == nil && len(files) == 1 {
		err = fmt.Errorf("%s holds GGUF files only: the page runs a GGUF file beside its model's checkpoint: open the checkpoint's repo here, and choose the GGUF file as a side's file from this computer", id)
	}
	if err != nil {
		return nil, err
	}
	total := func(files []string) {
		var n float64
		for _, f := range files {
			n += float64(sib[f].Size)
		}
		r.update(func() { r.Hub.Total = n })
	}
	total(files)
	lf := newFolder(id.Name())
	lf.Hub = fmt.Sprintf("hf:%s@%s from %s", id.Repo, info.SHA[:12], endpoint)
	var done float64
	seen := map[string]bool{} // each file once: the index's shards come from the network
	for i := 0; i < len(files); i++ {
		f := files[i]
		if seen[f] {
			continue
		}
		seen[f] = true
		s, ok := sib[f]
		if !ok {
			return nil, fmt.Errorf("%s: %s names %s, which the repo does not hold", id, hub.IndexFile, f)
		}
		blob, err := r.hubFile(id, hub.ResolveURL(endpoint, id.Repo, info.SHA, f), s, seq, &done)
		if err != nil {
			return nil, err
		}
		lf.Files[f] = blob
		lf.Bytes += float64(s.Size)
		if f == hub.IndexFile {
			b, err := blobBytes(blob, 0, int64(s.Size))
			if err != nil {
				return nil, err
			}
			shards, err := hub.Shards(id.Repo, b)
			if err != nil {
				return nil, err
			}
			files = append(files, shards...)
			total(files)
		}
	}
	return lf, nil
}

// hubFetch GETs a small answer of the hub, wording its failures for the
// user.
func hubFetch(id hub.ID, u string) ([]byte, error) {
	resp, err := call(global, "fetch", u)
	if err != nil {
		return nil, fmt.Errorf("%s: GET %s: %v (offline, or the hub does not let this page's origin read it)", id, u, err)
	}
	if err := hubStatus(id, u, resp); err != nil {
		return nil, err
	}
	buf, err := call(resp, "arrayBuffer")
	if err != nil {
		return nil, fmt.Errorf("%s: GET %s: %v", id, u, err)
	}
	return bytesOf(buf), nil
}

// hubStatus is the error of a response that is not OK, with the hub's
// X-Error-Code and message.
func hubStatus(id hub.ID, u string, resp js.Value) error {
	if resp.Get("ok").Bool() {
		return nil
	}
	status := resp.Get("status").Int()
	s := fmt.Sprintf("%s: GET %s: HTTP %d", id, u, status)
	h := resp.Get("headers")
	if c := h.Call("get", "X-Error-Code"); c.Truthy() {
		s += " " + c.String()
	}
	if m := h.Call("get", "X-Error-Message"); m.Truthy() {
		s += ": " + m.String()
	}
	if status == 401 || status == 403 {
		s += " (a gated or private repo: the page downloads public repos; the CLI takes HF_TOKEN: logitscope capture --model " + id.String() + ")"
	}
	return fmt.Errorf("%s", s)
}

// hubFile downloads one file into a Blob, checking it as it arrives and
// showing the progress of the whole download (done: the bytes of the
// files before it). Goroutines only.
func (r *Root) hubFile(id hub.ID, u string, s hub.Sibling, seq int, done *float64) (js.Value, error) {
	what := "hf:" + id.Repo + "/" + s.Name
	r.update(func() { r.Hub.File = s.Name })
	resp, err := call(global, "fetch", u)
	if err != nil {
		return js.Undefined(), fmt.Errorf("%s: GET %s: %v", what, u, err)
	}
	if err := hubStatus(id, u, resp); err != nil {
		return js.Undefined(), err
	}
	var chk *hub.Check
	if s.ETag() != "" {
		chk = hub.NewCheck(what, s.ETag(), s.Size)
	}
	reader := resp.Get("body").Call("getReader")
	chunks := global.Get("Array").New()
	var buf []byte
	var got int64
	shown := time.Now()
	for {
		res, err := call(reader, "read")
		if err != nil {
			return js.Undefined(), fmt.Errorf("%s: GET %s: %v", what, u, err)
		}
		if res.Get("done").Bool() {
			break
		}
		chunk := res.Get("value") // a Uint8Array
		n := chunk.Get("byteLength").Int()
		// Never more than the API announced: a server that keeps
		// sending would otherwise fill the page's memory.
		if got += int64(n); got > s.Size {
			reader.Call("cancel")
			return js.Undefined(), fmt.Errorf("%s: GET %s: more than the %d bytes the hub's API announced: refused", what, u, s.Size)
		}
		if cap(buf) < n {
			buf = make([]byte, n)
		}
		js.CopyBytesToGo(buf[:n], chunk)
		if chk != nil {
			chk.Write(buf[:n])
		}
		chunks.Call("push", chunk)
		*done += float64(n)
		if time.Since(shown) > 250*time.Millisecond {
			d := *done
			stale := false
			r.update(func() { r.Hub.Done, stale = d, r.Hub.seq != seq })
			if stale {
				reader.Call("cancel")
				return js.Undefined(), fmt.Errorf("%s: another download replaced this one", id)
			}
			shown = time.Now()
		}
	}
	if chk != nil {
		if err := chk.Verify(); err != nil {
			return js.Undefined(), fmt.Errorf("%v (%s)", err, u)
		}
	}
	d := *done
	r.update(func() { r.Hub.Done = d })
	return global.Get("Blob").New(chunks), nil
}

// HubNote says what the hub field is doing or did.
func (r *Root) HubNote() string {
	h := r.Hub
	switch {
	case h.Err != "":
		return h.Err
	case h.Busy && h.Total > 0:
		return fmt.Sprintf("downloading %s · %s of %s", h.File, size(h.Done), size(h.Total))
	case h.Busy:
		return "asking " + h.Endpoint + " for " + h.ID + "…"
	case r.Folder != nil && r.Folder.Hub != "":
		return "downloaded " + r.Folder.Hub + ": the model folder " + r.Folder.Name
	}
	return ""
}

// HubPct is the download's progress in percent.
func (r *Root) HubPct() string {
	if r.Hub.Total <= 0 {
		return "0"
	}
	return fmt.Sprintf("%.1f", 100*r.Hub.Done/r.Hub.Total)
}
