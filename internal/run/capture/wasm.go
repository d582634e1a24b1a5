package capture

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"logitscope/host"
	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/gguf"
	"logitscope/internal/format/routing"
	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native"
	"logitscope/internal/quant/variant"
	"logitscope/internal/run/session"
	"logitscope/internal/sys/cachedir"
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
// the guest can see (it sees only the model directory: guestVariant); else
// the native engine, saying why.
func AutoRuntime(opt Options, ck *checkpoint.Checkpoint, variantName string) (rt, why string) {
	if _, err := os.Stat(EnginePath(opt.Engine)); err != nil {
		why = "no engine.wasm; make wasm builds it"
	} else if opt.Device == "cpu" {
		why = "--device cpu"
	} else if _, err := guestVariant(ck, variantName); err != nil {
		why = err.Error()
	} else if dev, err := native.Open(); err != nil {
		why = "no GPU adapter"
	} else {
		dev.Close()
		return "wasm", ""
	}
	return "native", why
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
	// A hub quantization is a model of its own to engine.wasm, which runs
	// its weights (openWeights has checked it is ck's model).
	modelDir, guest := variantName, "f32"
	if !isHub(ck, variantName) {
		var err error
		if guest, err = guestVariant(ck, variantName); err != nil {
			return fmt.Errorf("--runtime wasm: %s: %v", variantName, err)
		}
		modelDir = ck.Dir
	}
	path := EnginePath(opt.Engine)
	wasm, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w (build it with make wasm, or give --engine FILE)", err)
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
	if root, err := cachedir.Root("compiled wasm"); err == nil {
		cache = filepath.Join(root, "wazero")
	}
	mod, err := host.Load(ctx, wasm, cache)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	defer mod.Close(ctx)
	mod.Stdout = os.Stderr // stdout carries capture's own lines
	mod.CallTimeout = wasmCallTimeout
	eng, err := mod.Open(ctx, dev, modelDir, guest, req.Capacity())
	if err != nil {
		return err
	}
	defer eng.Close(ctx)
	start := time.Now()
	defer func() { c.Took = time.Since(start) }()
	return drive(req, opt, c, func(req session.Request) (session.Result, error) {
		return runGuest(ctx, eng, base, req, c.Routing, path)
	})
}

// runGuest runs req on engine.wasm's open engine: base is the session the
// request makes (a forced request's result is the outputs it fed back),
// layout the routes the checkpoint says the guest reports.
func runGuest(ctx context.Context, eng *host.Instance, base *session.Run, req session.Request, layout routing.Layout, path string) (session.Result, error) {
	ar := abi.Request{Mode: req.Mode, PromptIDs: req.PromptIDs, MaxNew: req.MaxNew, Outputs: req.Outputs, Windows: req.Windows}
	if req.Mode == session.Greedy && req.Stops != nil {
		stops := req.Stops
		ar.Stops = &stops
	}
	rows, res, err := eng.Run(ctx, ar)
	if err != nil {
		return session.Result{}, err
	}
	var r session.Result
	switch req.Mode {
	case session.Panel:
		r.Targets = res.Targets
	case session.Forced:
		r = base.Result() // the outputs fed back, and whether they stopped
	default:
		r.Output, r.Stopped = res.Output, res.Stopped
	}
	// The host kept the rows as the guest wrote them: the logits, then
	// any routes, which the result says how to split.
	if r.Rows, r.Routes, err = res.SplitRows(rows); err != nil {
		return session.Result{}, fmt.Errorf("%s: %w", path, err)
	}
	if res.Routes != nil && !res.Routes.Equal(layout) {
		return session.Result{}, fmt.Errorf("%s: the guest routes %s, the checkpoint says %s", path, res.Routes, layout)
	}
	if req.Mode == session.Forced {
		for _, row := range r.Rows {
			r.Argmax = append(r.Argmax, session.Argmax(row))
		}
	}
	return r, nil
}

// guestVariant is what engine.wasm, which sees only the model directory,
// is asked to open for a variant name: f32 or the scheme of one of the
// model's own variants under MODEL/variants, or a GGUF file's path inside
// the model directory. Anything else it cannot see, and the error says so.
func guestVariant(ck *checkpoint.Checkpoint, name string) (string, error) {
	if gguf.IsFileName(name) {
		abs, err := filepath.Abs(name)
		if err != nil {
			return "", err
		}
		dir, err := filepath.Abs(ck.Dir)
		if err != nil {
			return "", err
		}
		rel, err := filepath.Rel(dir, abs)
		if err != nil || !filepath.IsLocal(rel) {
			return "", errors.New("a GGUF file outside MODEL")
		}
		return filepath.ToSlash(rel), nil
	}
	dir := engine.VariantDir(ck.Dir, name)
	if dir != "" && dir != variant.DefaultDir(ck.Dir, VariantLabel(name)) {
		return "", errors.New("a variant outside MODEL/variants")
	}
	return VariantLabel(name), nil
}
