package capture

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"logitscope/checkpoint"
	"logitscope/engine"
	"logitscope/gpu"
	"logitscope/gpu/native"
	"logitscope/host"
	"logitscope/session"
	"logitscope/variant"
	"logitscope/wasm/abi"
)

// DefaultEngine is where `make wasm` puts engine.wasm.
const DefaultEngine = ".out/engine.wasm"

// EnginePath is the engine.wasm to run: flagValue, else
// $LOGITSCOPE_ENGINE, else DefaultEngine.
func EnginePath(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	if env := os.Getenv("LOGITSCOPE_ENGINE"); env != "" {
		return env
	}
	return DefaultEngine
}

// AutoRuntime picks engine.wasm, the module browsers run, when it is built,
// the GPU is asked for (gpu or auto) and present, and the variant is one
// of the model's own (the guest sees only the model directory); else the
// native engine. It says which on opt.Log.
func AutoRuntime(opt Options, ownVariant bool) string {
	why := ""
	if _, err := os.Stat(EnginePath(opt.Engine)); err != nil {
		why = "no engine.wasm; make wasm builds it"
	} else if opt.Device == "cpu" {
		why = "--device cpu"
	} else if !ownVariant {
		why = "a variant outside MODEL/variants"
	} else if dev, err := native.Open(); err != nil {
		why = "no GPU adapter"
	} else {
		dev.Close()
		return "wasm"
	}
	fmt.Fprintf(opt.Log, "runtime: native (%s)\n", why)
	return "native"
}

// wasmCallTimeout bounds each call into engine.wasm, so that a guest
// stuck in a loop fails its capture (and a conform case) instead of
// hanging it. Generous: the longest call, ls_open of a large model
// (hashing and uploading its weights), takes minutes at most; a step
// takes well under a second.
const wasmCallTimeout = 30 * time.Minute

// runWasm runs req through engine.wasm under wazero, its GPU calls served
// by the native WebGPU, or on the engine's own CPU path.
func runWasm(ck *checkpoint.Checkpoint, variantName string, req session.Request, opt Options, c *Capture) error {
	path := EnginePath(opt.Engine)
	wasm, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w (build it with make wasm, or give --engine FILE)", err)
	}
	if !ownVariant(ck, variantName) {
		return fmt.Errorf("--runtime wasm opens variants by scheme under MODEL/variants, not %s", variantName)
	}
	base, err := session.New(req, 1, ck.Config.VocabSize) // refused before anything loads
	if err != nil {
		return err
	}
	// A nil device runs the engine's own CPU path, as in a browser
	// without WebGPU.
	dev, name, err := openDevice(opt, func(d gpu.Device) string { return "wasm+" + engine.DeviceName(d) })
	if err != nil {
		return err
	}
	if dev != nil {
		defer dev.Close()
	}
	c.Device = name

	ctx := context.Background()
	cache := ""
	if dir, err := os.UserCacheDir(); err == nil {
		cache = filepath.Join(dir, "logitscope", "wazero")
	}
	mod, err := host.Load(ctx, wasm, cache)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer mod.Close(ctx)
	mod.Stdout = os.Stderr // stdout carries capture's own lines
	mod.CallTimeout = wasmCallTimeout
	eng, err := mod.Open(ctx, dev, ck.Dir, c.Variant, req.Capacity())
	if err != nil {
		return err
	}
	defer eng.Close(ctx)
	start := time.Now()
	defer func() { c.Took = time.Since(start) }()
	ar := abi.Request{Mode: req.Mode, PromptIDs: req.PromptIDs, MaxNew: req.MaxNew, Outputs: req.Outputs, Windows: req.Windows}
	if req.Mode == session.Greedy && req.Stops != nil {
		stops := req.Stops
		ar.Stops = &stops
	}
	rows, res, err := eng.Run(ctx, ar)
	if err != nil {
		return err
	}
	switch req.Mode {
	case session.Panel:
		c.Targets = res.Targets
	case session.Forced:
		c.Result = base.Result() // the outputs fed back, and whether they stopped
	default:
		c.Output, c.Stopped = res.Output, res.Stopped
	}
	// The host kept the rows as the guest wrote them: the logits, then
	// any routes, which the result says how to split.
	if c.Rows, c.Routes, err = res.SplitRows(rows); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if res.Routes != nil && !res.Routes.Equal(c.Routing) {
		return fmt.Errorf("%s: the guest routes %s, the checkpoint says %s", path, res.Routes, c.Routing)
	}
	if req.Mode == session.Forced {
		for _, row := range c.Rows {
			c.Argmax = append(c.Argmax, session.Argmax(row))
		}
	}
	return nil
}

// ownVariant says whether a variant name is f32 or one of the model's own
// variants under MODEL/variants: all that engine.wasm can see.
func ownVariant(ck *checkpoint.Checkpoint, name string) bool {
	dir := engine.VariantDir(ck.Dir, name)
	return dir == "" || dir == variant.DefaultDir(ck.Dir, VariantLabel(name))
}
