//go:build js && wasm

package main

import (
	"fmt"
	"syscall/js"

	"github.com/vugu/vugu"
	"github.com/vugu/vugu/domrender"
)

func main() {
	renderer, err := domrender.New("#root")
	if err != nil {
		panic(err)
	}
	defer renderer.Release()
	ee := renderer.EventEnv()
	env, err := vugu.NewBuildEnv(ee)
	if err != nil {
		panic(err)
	}
	r := &Root{}
	r.boot(ee)
	listenKeys(r)

	first := true
	for ok := true; ok; ok = renderer.EventWait() {
		ee.RLock() // goroutines change state under the write lock
		res := env.RunBuild(r)
		ee.RUnlock()
		asciiInnerHTML(res)
		if err := renderer.Render(res); err != nil {
			panic(err)
		}
		if first {
			first = false
			ee.Lock()
			r.PageLoad = now()
			ee.UnlockOnly()
			r.ls.Set("firstRenderMs", r.PageLoad)
			fmt.Printf("logitscope ui: first render %.0f ms after navigation start\n", r.PageLoad)
		}
		ee.RLock()
		r.flushBody()
		ee.RUnlock()
	}
}

// listenKeys makes ← and → step through the positions, and with Shift
// jump to the previous or next position the token strip's filter keeps
// (flips and routing changes when it shows all), unless the focus is in a
// field of the form.
func listenKeys(r *Root) {
	f := js.FuncOf(func(_ js.Value, args []js.Value) any {
		e := args[0]
		if e.Get("altKey").Bool() || e.Get("ctrlKey").Bool() || e.Get("metaKey").Bool() {
			return nil
		}
		if t := e.Get("target"); t.Truthy() {
			switch t.Get("tagName").String() {
			case "INPUT", "TEXTAREA", "SELECT":
				return nil
			}
			if t.Get("isContentEditable").Truthy() {
				return nil
			}
		}
		d := map[string]int{"ArrowLeft": -1, "ArrowRight": 1}[e.Get("key").String()]
		if d == 0 {
			return nil
		}
		r.ee.Lock()
		var moved bool
		if e.Get("shiftKey").Bool() {
			moved = r.JumpFlag(d)
		} else {
			moved = r.Step(d)
		}
		r.ee.UnlockRender()
		if moved {
			e.Call("preventDefault")
		}
		return nil
	})
	global.Get("document").Call("addEventListener", "keydown", f)
}
