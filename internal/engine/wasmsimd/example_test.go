package wasmsimd_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tetratelabs/wazero"

	"logitscope/internal/engine/wasmsimd"
)

// A host instantiates simd.wasm on the memory of the module it serves
// (here a bare one: one page, exported as "memory") and calls a kernel
// with addresses in that memory: two float32 rows of three values times
// x, by f32_rows.
func ExampleInstantiate() {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	engine, err := rt.Instantiate(ctx, []byte{
		0, 'a', 's', 'm', 1, 0, 0, 0,
		5, 3, 1, 0, 1, // a memory of one page
		7, 10, 1, 6, 'm', 'e', 'm', 'o', 'r', 'y', 2, 0, // exported as "memory"
	})
	if err != nil {
		panic(err)
	}
	compiled, err := rt.CompileModule(ctx, wasmsimd.Wasm)
	if err != nil {
		panic(err)
	}
	simd, err := wasmsimd.Instantiate(ctx, rt, compiled, engine, "simd")
	if err != nil {
		panic(err)
	}
	mem := engine.Memory()
	put := func(p uint32, v ...float32) {
		for i, f := range v {
			mem.WriteUint32Le(p+uint32(4*i), math.Float32bits(f))
		}
	}
	const w, x, out = 0, 64, 128
	put(w, 1, 2, 3, 4, 5, 6) // rows (1, 2, 3) and (4, 5, 6): 12 bytes apart
	put(x, 1, 0.5, 2)
	// f32_rows(w, ldw, x, k, out, rows)
	if _, err := simd.ExportedFunction("f32_rows").Call(ctx, w, 12, x, 3, out, 2); err != nil {
		panic(err)
	}
	b, _ := mem.Read(out, 8)
	fmt.Println(math.Float32frombits(binary.LittleEndian.Uint32(b)), math.Float32frombits(binary.LittleEndian.Uint32(b[4:])))
	// Output: 8 18.5
}
