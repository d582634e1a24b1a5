// Package wasmsimd holds engine.wasm's CPU kernels in WebAssembly SIMD128
// (simd.wat, built into the committed simd.wasm), which Go's wasm backend
// cannot emit. A host instantiates simd.wasm on an engine.wasm instance's
// memory and serves its exports as engine.wasm's "simd" imports (wasm/ABI.md):
// package host under wazero (Instantiate), the page's worker in the
// browser (web/static/worker.js), the same bytes in both.
package wasmsimd

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/experimental"
)

//go:generate sh -c "testdata/wabt/node_modules/.bin/wat2wasm simd.wat -o simd.wasm || { echo 'wat2wasm missing: make deps'; exit 1; }"

// Wasm is simd.wasm.
//
//go:embed simd.wasm
var Wasm []byte

// Kernel is an export of simd.wasm: Params i32 parameters, no results.
// engine.wasm imports each from module "simd" with the same signature.
type Kernel struct {
	Name   string
	Params int
}

// Kernels are simd.wasm's exports (simd.wat documents them).
var Kernels = []Kernel{
	{"q4_rows", 8},
	{"q8_rows", 8},
	{"q4_decode", 8},
	{"q8_decode", 8},
	{"q4_0_rows", 6},
	{"q8_0_rows", 6},
	{"q4_0_decode", 6},
	{"q8_0_decode", 6},
	{"f32_rows", 6},
	{"tile4x4", 8},
}

// MemoryModule is the module whose "memory" simd.wasm imports: a host
// resolves it to the engine.wasm instance the kernels serve.
const MemoryModule = "engine"

// Instantiate instantiates compiled (simd.wasm, compiled in rt) as name
// on engine's exported memory.
func Instantiate(ctx context.Context, rt wazero.Runtime, compiled wazero.CompiledModule, engine api.Module, name string) (api.Module, error) {
	ctx = experimental.WithImportResolver(ctx, func(m string) api.Module {
		if m == MemoryModule {
			return engine
		}
		return nil
	})
	mod, err := rt.InstantiateModule(ctx, compiled, wazero.NewModuleConfig().WithName(name).WithStartFunctions())
	if err != nil {
		return nil, fmt.Errorf("wasmsimd: instantiating simd.wasm on %s's memory: %w", engine.Name(), err)
	}
	return mod, nil
}
