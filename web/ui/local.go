//go:build js && wasm

package main

// Local GGUF files: a side the user runs from a file on their own disk.
// The page reads it where it lies: the worker reads slices of the File as
// engine.wasm asks for them (wasi.js's BlobFile), and this file reads its
// header (the type mix) and hashes it (the document records which file
// ran). No byte of it goes to the server.

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall/js"
	"time"

	"github.com/vugu/vugu"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/format/gguf"
	"logitscope/internal/format/receipt"
)

// localFile is the GGUF file chosen for one side. Its fields change under
// the EventEnv lock (update); hashed is closed once Sum or HashErr is set.
type localFile struct {
	File  js.Value // the File; the worker reads it itself
	Name  string
	Bytes float64
	Types map[string]int // tensors per ggml type, from the header
	Err   string         // not a GGUF file, or unreadable

	Hashed   float64 // bytes hashed so far, for the form's note
	Sum      string  // sha256, once hashed
	HashErr  string
	hashed   chan struct{}
	hashOnce sync.Once // starts hashing
}

// hashChunk is how much of a local file one await reads: large enough
// that the awaits cost little, small enough that the page stays
// responsive between them (Go's sha256 in wasm hashes about 70 MB/s, so
// a chunk holds the main thread for about 30 ms).
const hashChunk = 2 << 20

// PickLocal takes the GGUF file chosen in side's file input ("ref" or
// "test"): the side runs it, and its header and hash are read in the
// background.
func (r *Root) PickLocal(side string, e vugu.DOMEvent) {
	in := js.Value(e.JSEventTarget())
	files := in.Get("files")
	if files.Get("length").Int() == 0 {
		return
	}
	f := files.Index(0)
	lf := &localFile{File: f, Name: f.Get("name").String(), Bytes: f.Get("size").Float(), hashed: make(chan struct{})}
	r.Local[side] = lf
	if !snapshot.GGUFName(lf.Name) {
		lf.Err = fmt.Sprintf("%s is not a .gguf file", lf.Name)
		close(lf.hashed)
	} else {
		go r.readLocal(lf)
	}
	delete(r.FieldErr, side)
	r.setSide(side, snapshot.LocalPrefix+lf.Name)
	r.edited()
}

// autorunLocal starts the run an autorun link asked for once its local
// files are chosen and read as GGUF, and its model folder is chosen and
// read (lock held).
func (r *Root) autorunLocal() {
	if r.autorunWaits && r.localMissing() == "" {
		for _, side := range []string{"ref", "test"} {
			if r.IsLocal(side) && r.Local[side].Types == nil {
				return // its header is still being read
			}
		}
		if r.IsLocalModel() && !r.Folder.Read {
			return
		}
		r.autorunWaits = false
		r.Run()
	}
}

// setSide sets the spec's variant of side.
func (r *Root) setSide(side, v string) {
	if side == "ref" {
		r.Spec.Ref = v
	} else {
		r.Spec.Test = v
	}
}

// readLocal reads lf's header, then hashes it. Goroutines only.
func (r *Root) readLocal(lf *localFile) {
	types, err := localTypes(lf)
	r.update(func() {
		if err != nil {
			lf.Err = err.Error()
			return
		}
		lf.Types = types
		r.autorunLocal()
	})
	if err != nil {
		close(lf.hashed)
		return
	}
	lf.hashOnce.Do(func() { r.hashLocal(lf) })
}

// startHash starts hashing lf in the background, unless it has started:
// a model folder's GGUF files are hashed when a run uses them.
func (r *Root) startHash(lf *localFile) {
	lf.hashOnce.Do(func() { go r.hashLocal(lf) })
}

// hashLocal hashes lf, showing its progress in the form. Goroutines only.
func (r *Root) hashLocal(lf *localFile) {
	h := sha256.New()
	size := int64(lf.Bytes)
	shown := time.Now()
	for off := int64(0); off < size; off += hashChunk {
		if !r.chosen(lf) {
			// Another file replaced it: hashing this one is wasted work.
			r.update(func() { lf.HashErr = lf.Name + " was replaced by another file" })
			close(lf.hashed)
			return
		}
		b, err := blobBytes(lf.File, off, min(off+hashChunk, size))
		if err != nil {
			r.update(func() { lf.HashErr = fmt.Sprintf("reading %s: %v", lf.Name, err) })
			close(lf.hashed)
			return
		}
		h.Write(b)
		// The note shows progress; a render per chunk would cost more
		// than the hashing.
		if time.Since(shown) > 250*time.Millisecond {
			done := float64(off + int64(len(b)))
			r.update(func() { lf.Hashed = done })
			shown = time.Now()
		}
	}
	sum := hex.EncodeToString(h.Sum(nil))
	r.update(func() { lf.Sum = sum })
	close(lf.hashed)
}

// chosen says whether lf is still a side's file or in the chosen
// folder. Goroutines only.
func (r *Root) chosen(lf *localFile) bool {
	r.ee.RLock()
	defer r.ee.RUnlock()
	return r.Local["ref"] == lf || r.Local["test"] == lf || r.Folder != nil && r.Folder.GGUF[lf.Name] == lf
}

// localTypes parses lf's GGUF header (the metadata and tensor infos, a few
// MB at most, read through the File) and counts its tensors per type.
func localTypes(lf *localFile) (map[string]int, error) {
	f, err := gguf.Parse(blobReader{lf.File}, int64(lf.Bytes), lf.Name)
	if err != nil {
		return nil, err
	}
	types := map[string]int{}
	for _, t := range f.Tensors {
		types[t.Type.String()]++
	}
	return types, nil
}

// blobReader reads a Blob as an io.ReaderAt, awaiting each slice.
// Goroutines only.
type blobReader struct{ b js.Value }

func (br blobReader) ReadAt(p []byte, off int64) (int, error) {
	size := int64(br.b.Get("size").Float())
	if off >= size {
		return 0, io.EOF
	}
	b, err := blobBytes(br.b, off, min(off+int64(len(p)), size))
	n := copy(p, b)
	if err == nil && n < len(p) {
		err = io.EOF
	}
	return n, err
}

// blobBytes reads bytes [start, end) of a Blob.
func blobBytes(b js.Value, start, end int64) ([]byte, error) {
	buf, err := call(b.Call("slice", float64(start), float64(end)), "arrayBuffer")
	if err != nil {
		return nil, err
	}
	return bytesOf(buf), nil
}

// localMissing names what a link names from its author's disk but has no
// usable file or folder chosen here (a link cannot carry them): "model",
// a side, or "".
func (r *Root) localMissing() string {
	if r.IsLocalModel() {
		if lf := r.folderFor(r.Spec.Model); lf == nil || lf.Err != "" {
			return "model"
		}
	}
	for _, side := range []string{"ref", "test"} {
		name, ok := snapshot.LocalName(r.sideVariant(side))
		if !ok {
			continue
		}
		if lf := r.Local[side]; lf == nil || lf.Name != name || lf.Err != "" {
			return side
		}
	}
	return ""
}

func (r *Root) sideVariant(side string) string {
	if side == "ref" {
		return r.Spec.Ref
	}
	return r.Spec.Test
}

// localGGUF waits for a local side's hash, showing its progress, and
// describes its file for the document. Goroutines only.
func (r *Root) localGGUF(lf *localFile) (*snapshot.GGUF, error) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case <-lf.hashed:
			waiting = false
		case <-tick.C:
			r.update(func() { r.Progress = progress{Phase: "sha256", Message: lf.Name, Loaded: lf.Hashed, Total: lf.Bytes} })
		}
	}
	r.ee.RLock()
	defer r.ee.RUnlock()
	switch {
	case lf.Err != "":
		return nil, errors.New(lf.Err)
	case lf.HashErr != "":
		return nil, errors.New(lf.HashErr)
	}
	return &snapshot.GGUF{Name: lf.Name, SHA256: lf.Sum, Bytes: int64(lf.Bytes), Types: lf.Types, Local: true}, nil
}

// servedGGUF describes a GGUF file the server lists for model, or nil when
// v is not one.
func (r *Root) servedGGUF(model, v string) *snapshot.GGUF {
	if x := r.variantOf(model, "gguf", v); x != nil {
		return &snapshot.GGUF{Name: v, SHA256: x.SHA256, Bytes: int64(x.Bytes), Types: x.Types}
	}
	return nil
}

// servedHub is what the document records of side v when it runs a hub
// checkpoint of model: its format and fingerprint as the server lists
// them (a chosen folder's has no fingerprint: not hashed); nil otherwise.
func (r *Root) servedHub(model, v string) *receipt.Hub {
	if x := r.variantOf(model, "hub", v); x != nil {
		return &receipt.Hub{Format: x.Format, SHA256: x.SHA256}
	}
	return nil
}

// variantOf is model's variant named v of kind k, a copy, or nil.
func (r *Root) variantOf(model, k, v string) *variantInfo {
	r.ee.RLock()
	defer r.ee.RUnlock()
	if m := r.model(model); m != nil {
		for _, x := range m.Variants {
			if x.Kind == k && x.Name == v {
				return &x
			}
		}
	}
	return nil
}
