//go:build js && wasm

package main

// Compare offline: two dropped dumps (and their receipts), no engine; a
// third, the engine's, adds the three-way split (splitdom.go).

import (
	"fmt"
	"strings"
	"syscall/js"
	"time"

	vjs "github.com/vugu/vugu/js"

	"github.com/vugu/vugu"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/analysis/split"
)

const receiptSuffix = ".receipt.json"

// dropFile is one dropped dump and the receipt dropped beside it. The
// dump stays a File, read a block at a time as the comparison goes; a
// receipt (small) is read whole.
type dropFile struct {
	Name    string
	Size    float64
	File    js.Value
	Receipt []byte // nil: none
}

type dropState struct {
	Dumps    []*dropFile       // in drop order: [0] is the reference
	Receipts map[string][]byte // receipts whose dump is not here (yet), by dump name
	Reading  int               // files being read
	Err      string
}

// wireDrop gives the drop zone its native drag and drop listeners, once
// per element (vg-js-create runs at every render). They are native, not
// vugu handlers, so that dragover (many per second) does not re-render.
func (r *Root) wireDrop(v vjs.Value) {
	el := js.Value(v)
	if el.Get("__lsDrop").Truthy() {
		return
	}
	el.Set("__lsDrop", true)
	cls := el.Get("classList")
	over := js.FuncOf(func(_ js.Value, args []js.Value) any {
		args[0].Call("preventDefault")
		cls.Call("add", "over")
		return nil
	})
	leave := js.FuncOf(func(_ js.Value, args []js.Value) any {
		cls.Call("remove", "over")
		return nil
	})
	drop := js.FuncOf(func(_ js.Value, args []js.Value) any {
		e := args[0]
		e.Call("preventDefault")
		cls.Call("remove", "over")
		files := e.Get("dataTransfer").Get("files")
		r.ee.Lock()
		r.addFiles(files)
		r.ee.UnlockRender()
		return nil
	})
	el.Call("addEventListener", "dragenter", over)
	el.Call("addEventListener", "dragover", over)
	el.Call("addEventListener", "dragleave", leave)
	el.Call("addEventListener", "drop", drop)
}

// PickFiles takes the files of the file input.
func (r *Root) PickFiles(e vugu.DOMEvent) {
	in := js.Value(e.JSEventTarget())
	r.addFiles(in.Get("files"))
	in.Set("value", "") // choosing the same file again is a change too
}

// addFiles reads a FileList in the background (lock held).
func (r *Root) addFiles(list js.Value) {
	n := list.Length()
	if n == 0 {
		return
	}
	files := make([]js.Value, 0, n)
	for i := range n {
		f := list.Index(i)
		// A .json that is no dump's receipt is a snapshot (the CLI's
		// report --snapshot, conform's), a sweep or a recipe.
		if name := f.Get("name").String(); strings.HasSuffix(name, ".json") && !strings.HasSuffix(name, receiptSuffix) {
			r.readDocFile(f)
			continue
		}
		files = append(files, f)
	}
	if n = len(files); n == 0 {
		return
	}
	r.Drop.Err = ""
	r.Drop.Reading += n
	go func() {
		type read struct {
			name string
			size float64
			file js.Value
			data []byte // a receipt's
			err  error
		}
		got := make([]read, n)
		for i, f := range files {
			got[i].name, got[i].size, got[i].file = f.Get("name").String(), f.Get("size").Float(), f
			if !strings.HasSuffix(got[i].name, receiptSuffix) {
				continue
			}
			buf, err := call(f, "arrayBuffer")
			if err != nil {
				got[i].err = fmt.Errorf("%s: %v", got[i].name, err)
				continue
			}
			got[i].data = bytesOf(buf)
		}
		r.update(func() {
			r.Drop.Reading -= n
			var errs []string
			for _, g := range got {
				if g.err != nil {
					errs = append(errs, g.err.Error())
					continue
				}
				r.Drop.add(g.name, g.size, g.file, g.data)
			}
			r.Drop.Err = strings.Join(errs, "; ")
			if r.Drop.Reading == 0 && len(r.Drop.Dumps) >= 2 && !r.Busy() {
				r.Compare()
			}
		})
	}()
}

// add files a dropped file: a receipt joins its dump (by name), a dump
// takes the receipt that came before it; a file dropped again replaces
// the earlier one in its place.
func (d *dropState) add(name string, size float64, file js.Value, data []byte) {
	if d.Receipts == nil {
		d.Receipts = map[string][]byte{}
	}
	if base, ok := strings.CutSuffix(name, receiptSuffix); ok {
		for _, f := range d.Dumps {
			if f.Name == base {
				f.Receipt = data
				return
			}
		}
		d.Receipts[base] = data
		return
	}
	f := &dropFile{Name: name, Size: size, File: file, Receipt: d.Receipts[name]}
	delete(d.Receipts, name)
	for i, old := range d.Dumps {
		if old.Name == name {
			if f.Receipt == nil {
				f.Receipt = old.Receipt
			}
			d.Dumps[i] = f
			return
		}
	}
	d.Dumps = append(d.Dumps, f)
}

// Role names a dump's part in the comparison.
func (d *dropState) Role(i int) string {
	switch i {
	case 0:
		return "reference"
	case 1:
		return "test"
	case 2:
		return "engine"
	}
	return "unused"
}

// PendingReceipts lists the receipts still waiting for their dump.
func (d *dropState) PendingReceipts() []string {
	var names []string
	for n := range d.Receipts {
		names = append(names, n+receiptSuffix)
	}
	return names
}

// SwapDumps makes the test the reference and compares again.
func (r *Root) SwapDumps() {
	if len(r.Drop.Dumps) < 2 {
		return
	}
	r.Drop.Dumps[0], r.Drop.Dumps[1] = r.Drop.Dumps[1], r.Drop.Dumps[0]
	r.Compare()
}

// RemoveDump drops dump i from the list.
func (r *Root) RemoveDump(i int) {
	if i >= 0 && i < len(r.Drop.Dumps) {
		r.Drop.Dumps = append(r.Drop.Dumps[:i], r.Drop.Dumps[i+1:]...)
	}
}

// ClearDrops forgets every dropped file.
func (r *Root) ClearDrops() { r.Drop = dropState{} }

// Compare compares the first two dumps, and splits with the third, the
// engine's, when there is one (lock held).
func (r *Root) Compare() {
	if r.Busy() || len(r.Drop.Dumps) < 2 {
		return
	}
	a, b := r.Drop.Dumps[0], r.Drop.Dumps[1]
	ref := snapshot.Dropped{Name: a.Name, File: blob{a.File}, Size: int64(a.Size), Receipt: a.Receipt}
	test := snapshot.Dropped{Name: b.Name, File: blob{b.File}, Size: int64(b.Size), Receipt: b.Receipt}
	var engine *snapshot.Dropped
	stage := "comparing " + a.Name + " with " + b.Name
	if len(r.Drop.Dumps) > 2 {
		c := r.Drop.Dumps[2]
		engine = &snapshot.Dropped{Name: c.Name, File: blob{c.File}, Size: int64(c.Size), Receipt: c.Receipt}
		stage += " and the engine's " + c.Name
	}
	model := r.model(r.Spec.Model)
	r.begin(stage)
	go func() {
		time.Sleep(20 * time.Millisecond) // paint "running" before the work
		t0 := now()
		textFor := func(vocab int) func(int) string {
			if model == nil || model.Vocab != vocab {
				return nil
			}
			tok, err := r.tokenizer(model.Name, nil)
			if err != nil {
				return nil
			}
			return tok.Piece
		}
		doc, err := snapshot.Offline(ref, test, textFor)
		if err == nil && engine != nil {
			var rep *split.Report
			var side snapshot.Side
			if rep, side, err = offlineSplit([3]snapshot.Dropped{ref, test, *engine}); err == nil {
				doc.SetSplit(side, rep, textFor(rep.Vocab))
			}
		}
		if err == nil {
			doc.Timing.Analysis = now() - t0
			doc.Created = time.Now().UTC().Format(time.RFC3339)
		}
		r.update(func() {
			if err != nil {
				r.fail(err)
				return
			}
			r.show(doc, nil, "offline", nil)
		})
	}()
}
