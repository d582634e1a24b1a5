// Command wasm is the engine as a wasip1 reactor module (engine.wasm):
// tokenizer, checkpoint and variant parsing, the forward program and the
// decode policy run inside; the host only moves bytes and serves the GPU
// through the imports in gpuimport.go. See ABI.md.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o engine.wasm ./wasm
package main

import "runtime/debug"

// init keeps the heap near what is live. A wasm module's memory grows
// and never shrinks, so the heap's high-water mark is held for the page's
// life: with Go's default GOGC=100 a forward pass's garbage piled up to
// as much again as the weights (which are most of the heap) before a
// collection, and the page held twice the model. The weights hold no
// pointers, so a collection costs little beside them.
func init() { debug.SetGCPercent(gcPercent) }

// gcPercent: garbage up to a tenth of the live heap.
const gcPercent = 10

// main never runs in a reactor (the host calls _initialize, then exports);
// it exists because c-shared still wants a main package.
func main() {}
