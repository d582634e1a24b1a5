// Package host runs engine.wasm (package logitscope/wasm) under wazero, the
// GPU imports served by a gpu.Device: the native side of the engine ABI
// (wasm/ABI.md). Pure Go; the device does the GPU work.
package host

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"

	"logitscope/internal/engine/wasmsimd"
	"logitscope/internal/gpu"
	"logitscope/wasm/abi"
)

// Mount is where an instance sees the model directory.
const Mount = "/model"

// Module is engine.wasm compiled for a runtime that holds the WASI and gpu
// host modules; each Open instantiates it afresh.
type Module struct {
	rt       wazero.Runtime
	compiled wazero.CompiledModule
	n        atomic.Int64 // instance names must be unique in a runtime
	// Stdout and Stderr receive the instances' output (os.Stderr by default).
	Stdout, Stderr *os.File
	// CallTimeout bounds each call into an instance (an export, or the
	// _initialize of Open) on top of the caller's ctx: a guest that loops
	// forever then fails that call and is discarded instead of hanging
	// its caller. 0: only ctx bounds a call.
	CallTimeout time.Duration
}

// Load compiles wasm, caching the machine code under cacheDir ("" for no
// cache): a cached compile takes milliseconds instead of a second.
//
// Every export that the host calls must be there with the ABI's signature:
// a module that lacks one is refused here, naming it, rather than failing
// at its first call. Calls honour their ctx: when it is done the call
// fails and its instance is discarded.
func Load(ctx context.Context, wasm []byte, cacheDir string) (*Module, error) {
	cfg := wazero.NewRuntimeConfig().WithCloseOnContextDone(true)
	if cacheDir != "" {
		cache, err := wazero.NewCompilationCacheWithDir(cacheDir)
		if err != nil {
			return nil, fmt.Errorf("host: compilation cache: %w", err)
		}
		cfg = cfg.WithCompilationCache(cache)
	}
	ctx = withAllocator(ctx)
	rt := wazero.NewRuntimeWithConfig(ctx, cfg)
	wasi_snapshot_preview1.MustInstantiate(ctx, rt)
	if _, err := gpuModule(rt).Instantiate(ctx); err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("host: gpu module: %w", err)
	}
	simd, err := rt.CompileModule(ctx, wasmsimd.Wasm)
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("host: compiling simd.wasm: %w", err)
	}
	if _, err := simdModule(rt, simd).Instantiate(ctx); err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("host: simd module: %w", err)
	}
	compiled, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("host: compiling engine.wasm: %w", err)
	}
	if err := checkExports(compiled); err != nil {
		rt.Close(ctx)
		return nil, err
	}
	return &Module{rt: rt, compiled: compiled, Stdout: os.Stdout, Stderr: os.Stderr}, nil
}

// Close releases the runtime and every instance.
func (m *Module) Close(ctx context.Context) error { return m.rt.Close(ctx) }

// Open instantiates the engine with modelDir mounted read-only at Mount
// and opens variant ("f32", "q8", "q6", "q4") of it on dev for sequences
// of up to capacity tokens. dev stays the caller's. A nil dev opens it on
// the engine's CPU path ("device":"cpu"): the guest computes in its own
// memory, the way a browser without WebGPU runs it.
func (m *Module) Open(ctx context.Context, dev gpu.Device, modelDir, variant string, capacity int) (*Instance, error) {
	e, err := m.instantiate(ctx, dev, modelDir)
	if err != nil {
		return nil, err
	}
	open := abi.Open{Model: Mount, Variant: variant, Capacity: capacity}
	if dev == nil {
		open.Device = "cpu"
	}
	args, err := json.Marshal(open)
	if err != nil {
		return nil, err
	}
	if _, err := e.callIn(ctx, "ls_open", args); err != nil {
		e.Close(ctx)
		return nil, err
	}
	return e, nil
}

var (
	i32 = api.ValueTypeI32
	// exports are the signatures (params, results) of what the host calls
	// (wasm/ABI.md, Exports); the test-only ls_probe and ls_trap are not
	// needed to run requests.
	exports = map[string][2][]api.ValueType{
		"_initialize": {nil, nil},
		"ls_malloc":   {{i32}, {i32}},
		"ls_free":     {{i32}, nil},
		"ls_error":    {{i32, i32}, {i32}},
		"ls_open":     {{i32, i32}, {i32}},
		"ls_request":  {{i32, i32}, {i32}},
		"ls_step":     {nil, {i32}},
		"ls_region":   {{i32}, {i32}},
		"ls_feed":     {{i32, i32}, {i32}},
		"ls_result":   {{i32, i32}, {i32}},
	}
)

// checkExports names every export of compiled that the host would call and
// is missing or mistyped, and a missing memory.
func checkExports(compiled wazero.CompiledModule) error {
	have := compiled.ExportedFunctions()
	var bad []string
	for _, name := range slices.Sorted(maps.Keys(exports)) {
		want := exports[name]
		f, ok := have[name]
		switch {
		case !ok:
			bad = append(bad, "no "+name)
		case !slices.Equal(f.ParamTypes(), want[0]) || !slices.Equal(f.ResultTypes(), want[1]):
			bad = append(bad, fmt.Sprintf("%s is %s, want %s", name, signature(f.ParamTypes(), f.ResultTypes()), signature(want[0], want[1])))
		}
	}
	if _, ok := compiled.ExportedMemories()["memory"]; !ok {
		bad = append(bad, "no memory")
	}
	if len(bad) > 0 {
		return fmt.Errorf("host: not an engine.wasm (wasm/ABI.md): exports %s", strings.Join(bad, "; "))
	}
	return nil
}

// signature writes a function type the way the WebAssembly text format does.
func signature(params, results []api.ValueType) string {
	names := func(ts []api.ValueType) string {
		s := make([]string, len(ts))
		for i, t := range ts {
			s[i] = api.ValueTypeName(t)
		}
		return strings.Join(s, " ")
	}
	return fmt.Sprintf("(%s) -> (%s)", names(params), names(results))
}

// instantiate starts a fresh instance (its _initialize runs the Go
// runtime's init) without opening a model. A nil dev serves the gpu
// imports with noGPU.
func (m *Module) instantiate(ctx context.Context, dev gpu.Device, modelDir string) (*Instance, error) {
	if dev == nil {
		dev = noGPU{}
	}
	st := &state{dev: dev, modelDir: modelDir}
	ctx, cancel := m.bound(ctx)
	defer cancel()
	ctx = withState(withAllocator(ctx), st)
	cfg := wazero.NewModuleConfig().
		WithName(fmt.Sprintf("engine-%d", m.n.Add(1))).
		WithStartFunctions("_initialize").
		WithSysWalltime().WithSysNanotime().WithSysNanosleep().
		WithStdout(m.Stdout).WithStderr(m.Stderr).
		WithFSConfig(wazero.NewFSConfig().WithReadOnlyDirMount(modelDir, Mount))
	mod, err := m.rt.InstantiateModule(ctx, m.compiled, cfg)
	if err != nil {
		return nil, fmt.Errorf("host: instantiating engine.wasm: %w", err)
	}
	return &Instance{mod: mod, st: st, timeout: m.CallTimeout}, nil
}

// bound is ctx limited to CallTimeout.
func (m *Module) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if m.CallTimeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, m.CallTimeout)
}

// ErrClosed is returned by an Instance that trapped or was closed.
var ErrClosed = errors.New("host: the engine instance is closed (it trapped or was closed); Open a new one")
