package host

import (
	"context"
	"fmt"
	"slices"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"logitscope/internal/engine/wasmsimd"
)

// simdModule builds the "simd" host module: engine.wasm's SIMD128 kernels
// (package wasmsimd), the very simd.wasm that the page runs, instantiated
// on each engine instance's memory on its first kernel call (the memory it
// imports is the instance's, which exists only once the instance does)
// and served by forwarding each import's stack to its export.
func simdModule(rt wazero.Runtime, compiled wazero.CompiledModule) wazero.HostModuleBuilder {
	b := rt.NewHostModuleBuilder("simd")
	b.NewFunctionBuilder().WithFunc(func() int32 { return 1 }).Export("available")
	for i, k := range wasmsimd.Kernels {
		params := slices.Repeat([]api.ValueType{api.ValueTypeI32}, k.Params)
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, m api.Module, stack []uint64) {
			st := stateOf(ctx)
			if st.simd == nil {
				mod, err := wasmsimd.Instantiate(ctx, rt, compiled, m, m.Name()+"-simd")
				if err != nil {
					panic(err) // a trap: the instance is discarded
				}
				st.simd = mod
				for _, k := range wasmsimd.Kernels {
					f := mod.ExportedFunction(k.Name)
					if f == nil {
						panic(fmt.Sprintf("host: simd.wasm exports no %s", k.Name))
					}
					st.kernels = append(st.kernels, f)
				}
				st.calls = make([]int, len(st.kernels))
			}
			st.calls[i]++
			if err := st.kernels[i].CallWithStack(ctx, stack); err != nil {
				panic(fmt.Errorf("simd.%s: %w", k.Name, err))
			}
		}), params, nil).Export(k.Name)
	}
	return b
}
