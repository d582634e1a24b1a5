// Command wasm is the engine as a wasip1 reactor module (engine.wasm):
// tokenizer, checkpoint and variant parsing, the forward program and the
// decode policy run inside; the host only moves bytes and serves the GPU
// through the imports in gpuimport.go. See ABI.md.
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o engine.wasm ./wasm
package main

// main never runs in a reactor (the host calls _initialize, then exports);
// it exists because c-shared still wants a main package.
func main() {}
