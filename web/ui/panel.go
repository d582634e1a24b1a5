//go:build js && wasm

package main

// A panel runs window by window, so that neither side's rows are ever
// whole in the page: the analysis (snapshot.Build, margins.CompareReaders)
// reads both sides a block of rows at a time and keeps per position only
// what it reports. The reference's rows reach the analysis in one of two
// ways (panelMode):
//
//   - alternate: both models open at once, each in its own worker; the
//     analysis runs the reference's next window, then the test's.
//   - opfs: the reference runs every window first and its rows go to a
//     file of the Origin Private File System, read back window by window
//     beside the test's run; one model at a time, as a short run holds.

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"syscall/js"
	"unsafe"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/routing"
	"logitscope/internal/run/session"
	"logitscope/wasm/abi"
)

// keepLimit is the most raw rows a side keeps for window.logitscope.logits
// (scripts and tests read a run's rows there): a longer panel's rows are
// only analysed, never held. ui.wasm's memory never shrinks, so whatever
// it once held stays the page's for its life.
const keepLimit = 64 << 20

// window is one window's rows as JS holds them: Rows·Width float32s in a
// Uint8Array.
type window struct {
	res        abi.Result
	width      int
	rows       js.Value
	ms         float64 // in the engine: 0 for a window read from the spool
	firstRowMs float64
}

// windowRows is one side of a panel as a dump.Reader: reading past the
// window in hand loads the next one (load: a run on the side's bridge, or
// a read of the spooled file) and copies rows out of it, a block at a
// time.
type windowRows struct {
	name    string
	windows [][]int
	load    func(i int) (window, error)
	vocab   int
	routes  *routing.Routes // filled window by window; nil for a dense model
	start   []int           // window i's rows are [start[i], start[i+1])
	cur     window
	curI    int
	keep    []byte // the raw rows when all fit keepLimit, else nil
	// ms is the time its windows took in the engine, firstRowMs the first
	// window's to its first row.
	ms, firstRowMs float64
}

// newWindowRows loads the first window (its rows say the row width and
// whether routes follow the logits) and returns the side's reader.
func newWindowRows(name string, windows [][]int, load func(int) (window, error)) (*windowRows, *dump.Reader, error) {
	w := &windowRows{name: name, windows: windows, load: load, curI: -1, start: make([]int, len(windows)+1)}
	for i, ids := range windows {
		w.start[i+1] = w.start[i] + len(ids) - 1
	}
	if err := w.next(0); err != nil {
		return nil, nil, err
	}
	res := w.cur.res
	w.vocab, w.firstRowMs = res.Vocab, w.cur.firstRowMs
	if res.Routes != nil {
		rows := w.start[len(windows)]
		w.routes = &routing.Routes{Layout: *res.Routes, Rows: rows, IDs: make([]int32, rows*res.Routes.Width())}
		w.fillRoutes(0)
	}
	// The routes are complete once the last row has been read, which is
	// before CompareReaders compares them.
	return w, dump.Concat(name, w.start[len(windows)], w.vocab, w.routes, nil, w.read), nil
}

// next loads window i and checks it is the window asked for.
func (w *windowRows) next(i int) error {
	win, err := w.load(i)
	if err != nil {
		return err
	}
	ids := w.windows[i]
	switch {
	case win.res.Rows != len(ids)-1:
		return fmt.Errorf("%s: window %d gave %d rows for %d tokens", w.name, i+1, win.res.Rows, len(ids))
	case win.res.Targets != nil && !slices.Equal(win.res.Targets, ids[1:]):
		return fmt.Errorf("%s: window %d predicted other targets than its tokens", w.name, i+1)
	case win.width != win.res.Width():
		return fmt.Errorf("%s: window %d has rows of %d values, the engine says %d", w.name, i+1, win.width, win.res.Width())
	case i > 0 && (win.res.Vocab != w.vocab || (win.res.Routes == nil) != (w.routes == nil)):
		return fmt.Errorf("%s: window %d's rows are not the first window's", w.name, i+1)
	}
	w.cur, w.curI, w.ms = win, i, w.ms+win.ms
	dropWindows()
	if i == 0 {
		// Kept whole or not at all, in one allocation: growing it a
		// window at a time left its earlier sizes in ui.wasm's memory.
		if all := 4 * w.start[len(w.windows)] * win.width; all <= keepLimit {
			w.keep = make([]byte, 0, all)
		}
	}
	if w.keep != nil {
		at := len(w.keep)
		w.keep = w.keep[:at+win.rows.Get("byteLength").Int()]
		js.CopyBytesToGo(w.keep[at:], win.rows)
	}
	if i > 0 && w.routes != nil {
		w.fillRoutes(i)
	}
	return nil
}

// fillRoutes copies the window in hand's route ids (the floats after each
// row's logits) into the side's routes.
func (w *windowRows) fillRoutes(i int) {
	wid, rw := w.cur.width, w.routes.Width()
	row := make([]float32, rw)
	for r := range w.cur.res.Rows {
		at := 4 * (r*wid + w.vocab)
		js.CopyBytesToGo(bytesOfFloats(row), w.cur.rows.Call("subarray", at, at+4*rw))
		for j, f := range row {
			w.routes.IDs[(w.start[i]+r)*rw+j] = int32(f)
		}
	}
}

// read copies rows first… (len(dst)/vocab of them) into dst, loading the
// windows they lie in.
func (w *windowRows) read(first int, dst []float32) error {
	for len(dst) > 0 {
		for first >= w.start[w.curI+1] {
			if err := w.next(w.curI + 1); err != nil {
				return err
			}
		}
		if first < w.start[w.curI] {
			return fmt.Errorf("%s: row %d read after window %d", w.name, first, w.curI+1)
		}
		n := min(len(dst)/w.vocab, w.start[w.curI+1]-first)
		r0, wid := first-w.start[w.curI], w.cur.width
		if wid == w.vocab { // a dense model: the rows as they lie
			js.CopyBytesToGo(bytesOfFloats(dst[:n*wid]), w.cur.rows.Call("subarray", 4*r0*wid, 4*(r0+n)*wid))
		} else {
			for r := range n {
				at := 4 * (r0 + r) * wid
				js.CopyBytesToGo(bytesOfFloats(dst[r*w.vocab:(r+1)*w.vocab]), w.cur.rows.Call("subarray", at, at+4*w.vocab))
			}
		}
		first, dst = first+n, dst[n*w.vocab:]
	}
	return nil
}

// bytesOfFloats is f's memory as bytes (wasm is little-endian).
func bytesOfFloats(f []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 4*len(f))
}

// dropWindows lets JS free the windows Go no longer holds: a window's
// rows are garbage to JS only once Go drops its js.Values of them (the
// rows and their subarrays), which Go's collector does, and a heap that
// does not grow seldom runs it; the windows' rows (tens of MB each) piled
// up in the page, 11 GB of a 10,000-position panel before this.
func dropWindows() { runtime.GC() }

// runWindows is a load function that runs window i on br, releasing the
// model after the last one; each window runs as a panel of one.
func runWindows(br *bridge, windows [][]int, onWindow func(i int)) func(int) (window, error) {
	return func(i int) (window, error) {
		onWindow(i)
		j, err := br.runJS(abi.Request{Mode: session.Panel, Windows: windows[i : i+1]}, i == len(windows)-1)
		if err != nil {
			return window{}, err
		}
		return window{res: j.Result, width: j.Width, rows: j.Rows, ms: j.Ms, firstRowMs: j.FirstRowMs}, nil
	}
}

// spool is a file of the Origin Private File System that holds the
// reference's windows, written in order and read back by window.
type spool struct {
	dir, handle js.Value
	name        string
	at          []int64 // window i is bytes [at[i], at[i+1])
	res         []abi.Result
	widths      []int
	file        js.Value
}

// spoolPrefix names the page's files in the origin's private file system;
// a page that died mid-run left one, which the next run removes.
const spoolPrefix = "logitscope-rows-"

// newSpool creates the file, after removing the ones earlier runs left.
func newSpool() (s *spool, err error) {
	defer catch(&err)
	storage := global.Get("navigator").Get("storage")
	if !storage.Truthy() || storage.Get("getDirectory").Type() != js.TypeFunction {
		return nil, errors.New("this browser has no Origin Private File System (navigator.storage.getDirectory)")
	}
	dir, err := await(storage.Call("getDirectory"))
	if err != nil {
		return nil, fmt.Errorf("the origin private file system: %v", err)
	}
	names, err := await(global.Get("Array").Call("fromAsync", dir.Call("keys")))
	if err == nil {
		for i := range names.Length() {
			if n := names.Index(i).String(); len(n) > len(spoolPrefix) && n[:len(spoolPrefix)] == spoolPrefix {
				await(dir.Call("removeEntry", n))
			}
		}
	}
	s = &spool{dir: dir, name: fmt.Sprintf("%s%x", spoolPrefix, global.Get("Date").Call("now").Int()), at: []int64{0}}
	opts := global.Get("Object").New()
	opts.Set("create", true)
	if s.handle, err = await(dir.Call("getFileHandle", s.name, opts)); err != nil {
		return nil, fmt.Errorf("the origin private file system: creating %s: %v", s.name, err)
	}
	return s, nil
}

// write runs every window through load and appends its rows to the file.
func (s *spool) write(n int, load func(int) (window, error)) (err error) {
	defer catch(&err)
	wr, err := await(s.handle.Call("createWritable"))
	if err != nil {
		return fmt.Errorf("the origin private file system: %v", err)
	}
	for i := range n {
		win, err := load(i)
		if err == nil {
			_, err = await(wr.Call("write", win.rows))
		}
		if err != nil {
			await(wr.Call("abort"))
			return fmt.Errorf("the origin private file system: writing window %d: %v", i+1, err)
		}
		s.at = append(s.at, s.at[i]+int64(win.rows.Get("byteLength").Int()))
		s.res, s.widths = append(s.res, win.res), append(s.widths, win.width)
		dropWindows() // written: win is dead from here
	}
	if _, err := await(wr.Call("close")); err != nil {
		return fmt.Errorf("the origin private file system: %v", err)
	}
	s.file, err = await(s.handle.Call("getFile"))
	return err
}

// read loads window i from the file.
func (s *spool) read(i int) (w window, err error) {
	defer catch(&err)
	buf, err := await(s.file.Call("slice", s.at[i], s.at[i+1]).Call("arrayBuffer"))
	if err != nil {
		return w, fmt.Errorf("the origin private file system: reading window %d: %v", i+1, err)
	}
	return window{res: s.res[i], width: s.widths[i], rows: uint8Arr.New(buf)}, nil
}

// remove deletes the file.
func (s *spool) remove() {
	await(s.dir.Call("removeEntry", s.name))
}

// alternateLimit is the most a reference's files may take for the page
// to open the test's model beside it (panelMode): the test side, most
// often a quantization of the reference, takes no more, so the two fit
// one side's memory budget (bridge.js: 1 GiB).
const alternateLimit = 512 << 20

// panelMode is how a panel's reference reaches the analysis: "alternate"
// when its model is small enough to keep open beside the test's, else
// "opfs". window.LOGITSCOPE_PANEL, when a script sets it, chooses (the
// benchmark measures both).
func panelMode(ref openInfo) (string, error) {
	if m := global.Get("LOGITSCOPE_PANEL"); m.Truthy() {
		if s := m.String(); s == "alternate" || s == "opfs" {
			return s, nil
		}
		return "", fmt.Errorf("window.LOGITSCOPE_PANEL is %q: want \"alternate\" or \"opfs\"", m.String())
	}
	if ref.Bytes <= alternateLimit {
		return "alternate", nil
	}
	return "opfs", nil
}

// runPanel readies both sides of a panel to run window by window as the
// analysis reads them (the package comment says how).
func (r *Root) runPanel(a *runArgs, t *snapshot.Timing) (ref, test snapshot.Capture, after func(*snapshot.Timing) *logitsOut, err error) {
	spec, windows := a.spec, a.refReq.Windows
	var targets []int
	for _, w := range windows {
		targets = append(targets, w[1:]...)
	}
	progress := func(side, variant string) func(int) {
		return func(i int) { r.stage(side+" "+variant, fmt.Sprintf("window %d / %d", i+1, len(windows))) }
	}
	r.stage("reference "+spec.Ref, "opening")
	t0 := now()
	ro, err := r.open(r.br, a, "ref", a.refReq)
	if err != nil {
		return ref, test, nil, err
	}
	t.OpenRef = now() - t0
	mode, err := panelMode(ro)
	if err != nil {
		return ref, test, nil, err
	}
	refLoad := runWindows(r.br, windows, progress("reference", spec.Ref))
	testBr := r.br
	if mode == "opfs" {
		sp, err := newSpool()
		if err != nil {
			return ref, test, nil, err
		}
		a.cleanup = append(a.cleanup, sp.remove)
		t0 = now()
		if err := sp.write(len(windows), refLoad); err != nil {
			return ref, test, nil, err
		}
		t.RefRun = now() - t0
		refLoad = sp.read
	} else if testBr, err = r.second(); err != nil {
		return ref, test, nil, err
	}
	r.stage("test "+spec.Test, "opening")
	t0 = now()
	to, err := r.open(testBr, a, "test", a.refReq)
	if err != nil {
		return ref, test, nil, err
	}
	t.OpenTest = now() - t0
	rw, rr, err := newWindowRows(spec.Ref, windows, refLoad)
	if err != nil {
		return ref, test, nil, fmt.Errorf("run %s: %v", spec.Ref, err)
	}
	tw, tr, err := newWindowRows(spec.Test, windows, runWindows(testBr, windows, progress("test", spec.Test)))
	if err != nil {
		return ref, test, nil, fmt.Errorf("run %s: %v", spec.Test, err)
	}
	ref = snapshot.Capture{Side: snapshot.Side{Label: sideLabel(spec.Ref), Device: ro.Device, Adapter: ro.Adapter},
		Rows: rr, Targets: targets, Windows: windows}
	test = snapshot.Capture{Side: snapshot.Side{Label: sideLabel(spec.Test), Device: to.Device, Adapter: to.Adapter},
		Rows: tr, Targets: targets}
	return ref, test, func(t *snapshot.Timing) *logitsOut {
		// The runs read as the analysis went are not the analysis.
		if mode == "alternate" {
			t.RefRun = rw.ms
			t.Analysis -= rw.ms
		}
		t.TestRun = tw.ms
		t.Analysis -= tw.ms
		t.FirstToken = rw.firstRowMs
		if rw.keep == nil || tw.keep == nil {
			return nil
		}
		return &logitsOut{Vocab: rw.vocab, Width: rw.cur.width, Ref: rw.keep, Test: tw.keep}
	}, nil
}

// second is the bridge the test side of an alternating panel runs on,
// its own worker beside the reference's.
func (r *Root) second() (*bridge, error) {
	if r.br2 == nil {
		br, err := newBridge()
		if err != nil {
			return nil, err
		}
		br.onProgress(func(p progress) { r.update(func() { r.Progress = p }) })
		r.br2 = br
	}
	return r.br2, nil
}
