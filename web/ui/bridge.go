//go:build js && wasm

package main

// The JS bridge (web/BRIDGE.md, class LogitscopeBridge in bridge.js) as
// blocking Go calls. Call them from a goroutine, one at a time (the bridge
// rejects a call made while another runs).

import (
	"errors"
	"fmt"
	"syscall/js"

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
	CachedBytes float64 `json:"cachedBytes"`
	Ms          float64 `json:"ms"`
}

func (b *bridge) open(model, variant string, capacity int, device string) (o openInfo, err error) {
	arg, err := toJS(map[string]any{"model": model, "variant": variant, "capacity": capacity, "device": device})
	if err != nil {
		return o, err
	}
	v, err := call(b.v, "open", arg)
	if err != nil {
		return o, err
	}
	return o, fromJS(v, &o)
}

// runReply is run()'s reply with the rows copied into Go: Raw holds them
// as the bridge gave them (float32 little-endian), Rows decoded.
type runReply struct {
	Result     abi.Result
	Vocab      int
	Raw        []byte
	Rows       []float32
	FirstRowMs float64
	Ms         float64
}

func (b *bridge) run(req abi.Request) (r runReply, err error) {
	arg, err := toJS(req)
	if err != nil {
		return r, err
	}
	v, err := call(b.v, "run", arg)
	if err != nil {
		return r, err
	}
	defer catch(&err)
	if err := fromJS(v.Get("result"), &r.Result); err != nil {
		return r, fmt.Errorf("run: the reply's result: %v", err)
	}
	r.Vocab = v.Get("vocab").Int()
	r.FirstRowMs = v.Get("firstRowMs").Float()
	r.Ms = v.Get("ms").Float()
	rows := v.Get("rows")
	if !rows.Truthy() {
		return r, errors.New("run: the reply has no rows")
	}
	r.Raw = bytesOf(rows)
	r.Rows = float32s(r.Raw)
	if r.Vocab <= 0 || len(r.Rows) != r.Result.Rows*r.Vocab {
		return r, fmt.Errorf("run: %d values for %d rows × %d vocab", len(r.Rows), r.Result.Rows, r.Vocab)
	}
	return r, nil
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
