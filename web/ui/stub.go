//go:build !(js && wasm)

package main

import (
	"fmt"
	"os"
)

// main outside the browser: the page only runs as ui.wasm.
func main() {
	fmt.Fprintln(os.Stderr, "logitscope web/ui runs in a browser: GOOS=js GOARCH=wasm go build -o ui.wasm ./web/ui")
	os.Exit(2)
}
