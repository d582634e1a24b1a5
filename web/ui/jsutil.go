//go:build js && wasm

package main

// Small helpers over syscall/js. Every function that waits (await and
// what calls it) must run in a goroutine of its own, never in an event
// handler or a js.FuncOf callback: the promise settles on the JS event
// loop, which a blocked handler holds up.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall/js"
	"unsafe"
)

var (
	global   = js.Global()
	jsonObj  = global.Get("JSON")
	uint8Arr = global.Get("Uint8Array")
)

// jsErr turns a rejection reason or thrown value into an error whose text
// is the message as it came (an Error's message, else the value as text).
func jsErr(v js.Value) error {
	if v.Type() == js.TypeObject {
		if m := v.Get("message"); m.Type() == js.TypeString {
			return errors.New(m.String())
		}
	}
	if v.Type() == js.TypeString {
		return errors.New(v.String())
	}
	return errors.New(jsonObj.Call("stringify", v).String())
}

// catch turns a panic of a js call (a thrown exception: js.Error) into
// *err. Use as `defer catch(&err)`.
func catch(err *error) {
	if p := recover(); p != nil {
		if je, ok := p.(js.Error); ok {
			*err = jsErr(je.Value)
			return
		}
		*err = fmt.Errorf("%v", p)
	}
}

// await blocks until p (a promise, or any value) settles.
func await(p js.Value) (v js.Value, err error) {
	defer catch(&err)
	type settled struct {
		v   js.Value
		err error
	}
	ch := make(chan settled, 1)
	ok := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- settled{v: arg0(args)}
		return nil
	})
	fail := js.FuncOf(func(_ js.Value, args []js.Value) any {
		ch <- settled{err: jsErr(arg0(args))}
		return nil
	})
	defer ok.Release()
	defer fail.Release()
	global.Get("Promise").Call("resolve", p).Call("then", ok, fail)
	s := <-ch
	return s.v, s.err
}

func arg0(args []js.Value) js.Value {
	if len(args) == 0 {
		return js.Undefined()
	}
	return args[0]
}

// call calls obj.method(args...) and awaits its promise; a synchronous
// throw is an error too.
func call(obj js.Value, method string, args ...any) (v js.Value, err error) {
	p, err := func() (p js.Value, err error) {
		defer catch(&err)
		return obj.Call(method, args...), nil
	}()
	if err != nil {
		return js.Undefined(), err
	}
	return await(p)
}

// toJS turns a Go value into a plain JS object through JSON.
func toJS(v any) (js.Value, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return js.Undefined(), err
	}
	return jsonObj.Call("parse", string(b)), nil
}

// fromJS decodes a JS value into dst through JSON.
func fromJS(v js.Value, dst any) error {
	if v.IsUndefined() {
		return errors.New("undefined")
	}
	return json.Unmarshal([]byte(jsonObj.Call("stringify", v).String()), dst)
}

// bytesOf copies a typed array, ArrayBuffer or DataView into Go.
func bytesOf(v js.Value) []byte {
	var u8 js.Value
	if v.Get("buffer").Truthy() { // a view
		u8 = uint8Arr.New(v.Get("buffer"), v.Get("byteOffset"), v.Get("byteLength"))
	} else {
		u8 = uint8Arr.New(v)
	}
	b := make([]byte, u8.Get("byteLength").Int())
	js.CopyBytesToGo(b, u8)
	return b
}

// float32s is b as the little-endian float32s it holds, in place, not a
// copy: wasm is little-endian, and a slice that make gave (bytesOf's) is
// aligned for them. A run's rows are tens of MB, which ui.wasm's memory
// would keep for the page's life.
func float32s(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

// fetchBytes GETs url and returns the body; an HTTP error's text says
// the status and the start of the body (the server's message).
func fetchBytes(url string) ([]byte, error) {
	return fetchWith(url, nil)
}

// fetchOptional is fetchBytes with nil, nil for a file the server does
// not have (HTTP 404).
func fetchOptional(url string) ([]byte, error) {
	resp, err := call(global, "fetch", url)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", url, err)
	}
	switch {
	case resp.Get("status").Int() == 404:
		return nil, nil
	case !resp.Get("ok").Bool():
		return fetchBytes(url) // for fetchWith's error, body and all
	}
	buf, err := call(resp, "arrayBuffer")
	if err != nil {
		return nil, fmt.Errorf("%s: %v", url, err)
	}
	return bytesOf(buf), nil
}

func fetchWith(url string, init any) ([]byte, error) {
	args := []any{url}
	if init != nil {
		args = append(args, init)
	}
	resp, err := call(global, "fetch", args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", url, err)
	}
	buf, err := call(resp, "arrayBuffer")
	if err != nil {
		return nil, fmt.Errorf("%s: %v", url, err)
	}
	body := bytesOf(buf)
	if !resp.Get("ok").Bool() {
		msg := strings.TrimSpace(string(body))
		if len(msg) > 300 {
			msg = msg[:300] + "…"
		}
		if msg != "" {
			msg = ": " + msg
		}
		return nil, fmt.Errorf("%s: HTTP %d%s", url, resp.Get("status").Int(), msg)
	}
	return body, nil
}

// postJSON POSTs body as application/json, with a team server's write
// token when not "", and returns the reply's body.
func postJSON(url string, body []byte, token string) ([]byte, error) {
	headers := map[string]any{"Content-Type": "application/json"}
	if token != "" {
		headers["Authorization"] = "Bearer " + token
	}
	init := map[string]any{
		"method":  "POST",
		"headers": headers,
		"body":    string(body),
	}
	return fetchWith(url, init)
}

// now is performance.now(): milliseconds since navigation start.
func now() float64 { return global.Get("performance").Call("now").Float() }

// jsFunc wraps f as a JS function that ignores its arguments.
func jsFunc(f func()) js.Func {
	return js.FuncOf(func(js.Value, []js.Value) any {
		f()
		return nil
	})
}

// blob reads a JS Blob (a File) as an io.ReaderAt: each read is a slice
// of it, read by the browser from where the file lies.
type blob struct{ v js.Value }

func (b blob) ReadAt(p []byte, off int64) (n int, err error) {
	defer catch(&err)
	size := int64(b.v.Get("size").Float())
	if off >= size {
		return 0, io.EOF
	}
	end := min(off+int64(len(p)), size)
	buf, err := call(b.v.Call("slice", off, end), "arrayBuffer")
	if err != nil {
		return 0, fmt.Errorf("reading %s: %v", b.v.Get("name").String(), err)
	}
	n = js.CopyBytesToGo(p, uint8Arr.New(buf))
	if n < len(p) {
		err = io.EOF
	}
	return n, err
}
