package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"logitscope/checkpoint"
	"logitscope/gpu/native"
	"logitscope/host"
	"logitscope/session"
)

// defaultEngine is where `make wasm` puts engine.wasm.
const defaultEngine = ".out/engine.wasm"

// runWasm runs a request through engine.wasm under wazero, its GPU calls
// served by the native WebGPU: the same module the browser runs. It
// returns the result, the device name for the receipt, and the time the
// request took once the model was loaded.
func runWasm(ck *checkpoint.Checkpoint, variantName, enginePath string, run session.Request, stderr io.Writer) (res session.Result, name string, wall time.Duration, err error) {
	if enginePath == "" {
		if enginePath = os.Getenv("LOGITSCOPE_ENGINE"); enginePath == "" {
			enginePath = defaultEngine
		}
	}
	wasm, err := os.ReadFile(enginePath)
	if err != nil {
		return res, "", 0, fmt.Errorf("%w (build it with make wasm, or give --engine FILE)", err)
	}
	if variantName != "f32" && variantDir(ck.Dir, variantName) != filepath.Join(ck.Dir, "variants", variantName) {
		return res, "", 0, fmt.Errorf("--runtime wasm opens variants by scheme under MODEL/variants, not %s", variantName)
	}
	if run.Mode == session.Forced {
		return res, "", 0, fmt.Errorf("--follow is not in engine.wasm's ABI yet: use --runtime native")
	}
	dev, err := native.Open()
	if err != nil {
		return res, "", 0, err
	}
	defer dev.Close()
	info := dev.Info()
	name = fmt.Sprintf("wasm+gpu: %s (%s)", info.Adapter, info.Backend)
	fmt.Fprintf(stderr, "device: %s\n", name)

	ctx := context.Background()
	cache := ""
	if dir, err := os.UserCacheDir(); err == nil {
		cache = filepath.Join(dir, "logitscope", "wazero")
	}
	mod, err := host.Load(ctx, wasm, cache)
	if err != nil {
		return res, "", 0, err
	}
	defer mod.Close(ctx)
	mod.Stdout = os.Stderr // stdout carries capture's own lines
	eng, err := mod.Open(ctx, dev, ck.Dir, variantLabel(variantName), run.Capacity())
	if err != nil {
		return res, "", 0, err
	}
	defer eng.Close(ctx)
	start := time.Now()
	if run.Mode == session.Panel {
		res.Rows, res.Targets, err = eng.Panel(ctx, run.Windows)
	} else {
		res.Rows, res.Output, res.Stopped, err = eng.Greedy(ctx, run.PromptIDs, run.MaxNew, run.Stops)
	}
	return res, name, time.Since(start), err
}
