//go:build js && wasm

package main

// The JS bridge (web/BRIDGE.md, class LogitscopeBridge in bridge.js) as
// blocking Go calls. Call them from a goroutine, one at a time (the bridge
// rejects a call made while another runs).

import (
	"errors"
	"fmt"
	"syscall/js"

	"logitscope/internal/format/dump"
	"logitscope/internal/format/routing"
	"logitscope/wasm/abi"
)

type bridge struct{ v js.Value }

// newBridge starts the bridge (and its worker).
func newBridge() (b *bridge, err error) {
	defer catch(&err)
	ctor := global.Get("LogitscopeBridge")
	if ctor.Type() != js.TypeFunction {
		return nil, errors.New("bridge.js did not load: window.LogitscopeBridge is undefined, so nothing can run here (the offline comparison and shared snapshots still work)")
	}
	return &bridge{v: ctor.New()}, nil
}

// probeInfo is probe()'s reply.
type probeInfo struct {
	WebGPU  bool   `json:"webgpu"`
	Adapter string `json:"adapter"`
	Reason  string `json:"reason"`
}

func (b *bridge) probe() (p probeInfo, err error) {
	v, err := call(b.v, "probe")
	if err != nil {
		return p, err
	}
	return p, fromJS(v, &p)
}

// openInfo is open()'s reply.
type openInfo struct {
	Device      string  `json:"device"`
	Adapter     string  `json:"adapter"`
	Bytes       float64 `json:"bytes"`
	Vocab       int     `json:"vocab"`
	CachedBytes float64 `json:"cachedBytes"`
	Ms          float64 `json:"ms"`
}

// open opens variant of model; file is the File of a local variant
// (snapshot.LocalPrefix), folder the Files of a local model ([{path,
// file}], folderArg), else undefined.
func (b *bridge) open(model, variant string, capacity int, device string, file, folder js.Value) (o openInfo, err error) {
	arg, err := toJS(map[string]any{"model": model, "variant": variant, "capacity": capacity, "device": device})
	if err != nil {
		return o, err
	}
	if file.Truthy() {
		arg.Set("file", file)
	}
	if folder.Truthy() {
		arg.Set("folder", folder)
	}
	v, err := call(b.v, "open", arg)
	if err != nil {
		return o, err
	}
	return o, fromJS(v, &o)
}

// release drops the open model, and its memory with its worker, for a
// page that has the rows it needs (bridge.js).
func (b *bridge) release() { b.v.Call("release") }

// runReply is run()'s reply with the rows copied into Go: Raw holds them
// as the bridge gave them (float32 little-endian, Width per row: the
// logits, then a mixture of experts' routes), Rows decoded.
type runReply struct {
	Result     abi.Result
	Width      int
	Raw        []byte
	Rows       []float32
	FirstRowMs float64
	Ms         float64
}

// run runs req on the open model, its last: the page opens each side
// afresh, so the model goes (release) before the rows are copied in.
func (b *bridge) run(req abi.Request) (r runReply, err error) {
	j, err := b.runJS(req, true)
	if err != nil {
		return r, err
	}
	r = runReply{Result: j.Result, Width: j.Width, FirstRowMs: j.FirstRowMs, Ms: j.Ms}
	r.Raw = bytesOf(j.Rows)
	r.Rows = float32s(r.Raw)
	return r, nil
}

// jsReply is run()'s reply with the rows left in JS (a Uint8Array of
// Result.Rows·Width float32s): a long panel's page copies out a block at a
// time (windowRows).
type jsReply struct {
	Result     abi.Result
	Width      int
	Rows       js.Value
	FirstRowMs float64
	Ms         float64
}

// runJS runs req on the open model; release drops the model (bridge.js)
// once the rows are out.
func (b *bridge) runJS(req abi.Request, release bool) (r jsReply, err error) {
	arg, err := toJS(req)
	if err != nil {
		return r, err
	}
	opt, err := toJS(map[string]bool{"release": release})
	if err != nil {
		return r, err
	}
	v, err := call(b.v, "run", arg, opt)
	if err != nil {
		return r, err
	}
	defer catch(&err)
	if err := fromJS(v.Get("result"), &r.Result); err != nil {
		return r, fmt.Errorf("run: the reply's result: %v", err)
	}
	r.Width = v.Get("width").Int()
	r.FirstRowMs = v.Get("firstRowMs").Float()
	r.Ms = v.Get("ms").Float()
	rows := v.Get("rows")
	if !rows.Truthy() {
		return r, errors.New("run: the reply has no rows")
	}
	r.Rows = uint8Arr.New(rows.Get("buffer"), rows.Get("byteOffset"), rows.Get("byteLength"))
	if n := r.Rows.Get("byteLength").Int(); r.Width <= 0 || n != 4*r.Result.Rows*r.Width {
		return r, fmt.Errorf("run: %d bytes for %d rows of %d float32", n, r.Result.Rows, r.Width)
	}
	return r, nil
}

// logits splits the reply's rows, as the engine wrote them, into a dump
// of the logits and, for a mixture of experts, its routes, as the result
// says (abi.Result.SplitRow).
func (r runReply) logits() (*dump.Logits, error) {
	res := r.Result
	if w := res.Width(); w != r.Width {
		return nil, fmt.Errorf("run: rows of %d values, the engine says %d logits and %d route ids", r.Width, res.Vocab, w-res.Vocab)
	}
	l := &dump.Logits{Rows: res.Rows, Vocab: res.Vocab}
	if res.Routes == nil {
		l.Data = r.Rows // a dense model's rows are its logits
		return l, nil
	}
	l.Routes = &routing.Routes{Layout: *res.Routes, Rows: res.Rows}
	l.Data = make([]float32, 0, res.Rows*res.Vocab)
	for i := range res.Rows {
		logits, ids, err := res.SplitRow(r.Rows[i*r.Width : (i+1)*r.Width])
		if err != nil {
			return nil, fmt.Errorf("run: row %d: %v", i, err)
		}
		l.Data = append(l.Data, logits...)
		l.Routes.IDs = append(l.Routes.IDs, ids...)
	}
	return l, nil
}

// onProgress installs f as the bridge's progress callback.
func (b *bridge) onProgress(f func(p progress)) {
	b.v.Set("onprogress", js.FuncOf(func(_ js.Value, args []js.Value) any {
		var p progress
		if err := fromJS(arg0(args), &p); err == nil {
			f(p)
		}
		return nil
	}))
}

// progress is one progress report of the bridge.
type progress struct {
	Phase   string  `json:"phase"`
	Message string  `json:"message"`
	Loaded  float64 `json:"loaded"`
	Total   float64 `json:"total"`
}
