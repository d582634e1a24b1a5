// Command ui is logitscope's page: a vugu UI compiled with GOOS=js
// GOARCH=wasm to ui.wasm, which web/static/index.html loads. It talks to
// the engine through the JS bridge (web/BRIDGE.md) and renders package
// snapshot's document: the run form (whose state is a snapshot.Spec, kept
// in the URL), progress, the token strip, the position inspector, the
// summary, the charts, the offline comparison of dropped dumps and
// sharing.
//
// Build:
//
//	GOOS=js GOARCH=wasm go build -o ui.wasm ./web/ui
//
// The *.vugu components are compiled to 0_components_gen.go by vugugen
// (go install github.com/vugu/vugu/cmd/vugugen), which stays committed so
// that the build does not need it; after editing a .vugu file run
//
//	go generate ./web/ui
//
// The second directive marks the generated file js-only (the natively
// built package is stub.go alone) and gofmts it.
//
// Files: main.go boots (the render loop, the keyboard); root.go holds the
// state, its transitions and window.logitscope (its comment draws how
// state flows); form.go is the run form's handlers; bridge.go wraps the
// JS bridge as blocking calls for goroutines (jsutil.go: await, fetch);
// run.go is the run sequence; share.go sharing and /r/<id>; offline.go
// the dropped dumps; dom.go the token strip, charts and summary, whose
// large content is set directly rather than diffed by vugu at every
// render. view.go and format.go are the pure view helpers, models.go what
// a link's spec takes from its model (ready texts, variants), and package
// chart draws the SVG charts: they build natively and are tested with
// `go test ./web/ui/...` (stub.go is the native main).
//
// The scripting contract (web/e2e relies on it): window.logitscope exists
// from the start (index.html); when a run, a shared snapshot or an offline
// comparison is shown, .result is the document (JSON.parse of its JSON)
// and, for runs, .logits is {vocab, width, ref, test} with the rows as the
// engine wrote them (width float32 each: vocab logits, then a mixture of
// experts' routes) as base64 of float32 little-endian; on failure .error is the message; and
// document.body.dataset.state is loading, idle, running, done or error,
// set after the render that shows that state.
package main

//go:generate vugugen -s -skip-go-mod -skip-main
//go:generate sh -c "{ printf '//go:build js && wasm\\n\\n'; cat 0_components_gen.go; } > 0_components_gen.go.tmp && mv 0_components_gen.go.tmp 0_components_gen.go && gofmt -w 0_components_gen.go"
