package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"logitscope/checkpoint"
	"logitscope/generate"
	"logitscope/gpu"
	"logitscope/gpu/native"
	"logitscope/host"
	"logitscope/session"
)

// defaultEngine is where `make wasm` puts engine.wasm.
const defaultEngine = ".out/engine.wasm"

// enginePathOf is --engine, else $LOGITSCOPE_ENGINE, else defaultEngine.
func enginePathOf(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if env := os.Getenv("LOGITSCOPE_ENGINE"); env != "" {
		return env
	}
	return defaultEngine
}

// autoRuntime picks engine.wasm, the module browsers run, when it is built
// and the GPU is asked for (--device gpu or auto) and present; else the
// native engine. It says which on stderr.
func autoRuntime(enginePath, device string, schemeVariant bool, stderr io.Writer) string {
	why := ""
	if _, err := os.Stat(enginePathOf(enginePath)); err != nil {
		why = "no engine.wasm; make wasm builds it"
	} else if device == "cpu" {
		why = "--device cpu"
	} else if !schemeVariant {
		why = "a variant outside MODEL/variants"
	} else if dev, err := native.Open(); err != nil {
		why = "no GPU adapter"
	} else {
		dev.Close()
		return "wasm"
	}
	fmt.Fprintf(stderr, "runtime: native (%s)\n", why)
	return "native"
}

// runWasm runs a request through engine.wasm under wazero, its GPU calls
// served by the native WebGPU, or on the engine's own CPU path: the same
// module the browser runs. It returns the result, the device name for the
// receipt, and the time the request took once the model was loaded.
func runWasm(ck *checkpoint.Checkpoint, variantName, enginePath, device string, run session.Request, stderr io.Writer) (res session.Result, name string, wall time.Duration, err error) {
	wasm, err := os.ReadFile(enginePathOf(enginePath))
	if err != nil {
		return res, "", 0, fmt.Errorf("%w (build it with make wasm, or give --engine FILE)", err)
	}
	if variantName != "f32" && variantDir(ck.Dir, variantName) != filepath.Join(ck.Dir, "variants", variantName) {
		return res, "", 0, fmt.Errorf("--runtime wasm opens variants by scheme under MODEL/variants, not %s", variantName)
	}
	base, err := session.New(run) // checks the request; forced outputs and stop
	if err != nil {
		return res, "", 0, err
	}
	dev, name, err := wasmDevice(device, stderr)
	if err != nil {
		return res, "", 0, err
	}
	if dev != nil {
		defer dev.Close()
	}

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
	switch run.Mode {
	case session.Panel:
		res.Rows, res.Targets, err = eng.Panel(ctx, run.Windows)
	case session.Forced:
		res = base.Result()
		if res.Rows, err = eng.Forced(ctx, run.PromptIDs, run.Outputs); err == nil {
			for _, row := range res.Rows {
				res.Argmax = append(res.Argmax, generate.Argmax(row))
			}
		}
	default:
		res.Rows, res.Output, res.Stopped, err = eng.Greedy(ctx, run.PromptIDs, run.MaxNew, run.Stops)
	}
	return res, name, time.Since(start), err
}

// wasmDevice serves engine.wasm's gpu imports: the native WebGPU for
// --device gpu or auto, nil (the engine's CPU path, as in a browser
// without WebGPU) for cpu and for auto without an adapter. It says which
// on stderr and returns the name for the receipt.
func wasmDevice(device string, stderr io.Writer) (gpu.Device, string, error) {
	switch device {
	case "gpu", "auto":
		dev, err := native.Open()
		if err == nil {
			info := dev.Info()
			name := fmt.Sprintf("wasm+gpu: %s (%s)", info.Adapter, info.Backend)
			fmt.Fprintf(stderr, "device: %s\n", name)
			return dev, name, nil
		}
		if device == "gpu" {
			return nil, "", err
		}
		fmt.Fprintf(stderr, "device: wasm+cpu (%v)\n", err)
	case "cpu":
		fmt.Fprintln(stderr, "device: wasm+cpu")
	default:
		return nil, "", fmt.Errorf("--device %q: want gpu, cpu or auto", device)
	}
	return nil, "wasm+cpu", nil
}
