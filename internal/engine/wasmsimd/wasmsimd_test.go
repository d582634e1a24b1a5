package wasmsimd

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"

	"logitscope/internal/sys/prereq"
)

// wat2wasm is WABT's, installed by make deps.
const wat2wasm = "testdata/wabt/node_modules/.bin/wat2wasm"

// The committed simd.wasm is what simd.wat builds to: an edit of the
// source must come with go generate ./internal/engine/wasmsimd.
func TestWasmIsBuiltFromWat(t *testing.T) {
	if _, err := exec.LookPath("node"); err != nil {
		prereq.Missing(t, prereq.Node, "no node to run wat2wasm")
	}
	if _, err := os.Stat(wat2wasm); err != nil {
		prereq.Missing(t, prereq.Node, "no wat2wasm (make deps): "+err.Error())
	}
	out := filepath.Join(t.TempDir(), "simd.wasm")
	if b, err := exec.Command(wat2wasm, "simd.wat", "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm simd.wat: %v\n%s", err, b)
	}
	built, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(built, Wasm) {
		t.Fatalf("simd.wasm (%d bytes) is not what simd.wat builds to (%d bytes): run go generate ./internal/engine/wasmsimd", len(Wasm), len(built))
	}
}

// simd.wasm exports Kernels with their signatures and nothing else, and
// imports only the engine's memory: what a host forwards and provides.
func TestExports(t *testing.T) {
	ctx := context.Background()
	rt := wazero.NewRuntime(ctx)
	defer rt.Close(ctx)
	c, err := rt.CompileModule(ctx, Wasm)
	if err != nil {
		t.Fatal(err)
	}
	fns := c.ExportedFunctions()
	if len(fns) != len(Kernels) {
		t.Errorf("simd.wasm exports %d functions, Kernels lists %d", len(fns), len(Kernels))
	}
	for _, k := range Kernels {
		f, ok := fns[k.Name]
		if !ok {
			t.Errorf("simd.wasm exports no %s", k.Name)
			continue
		}
		want := slices.Repeat([]api.ValueType{api.ValueTypeI32}, k.Params)
		if !slices.Equal(f.ParamTypes(), want) || len(f.ResultTypes()) != 0 {
			t.Errorf("%s takes %v and returns %v, want %d i32 and nothing", k.Name, f.ParamTypes(), f.ResultTypes(), k.Params)
		}
	}
	imports := c.ImportedMemories()
	if len(imports) != 1 || len(c.ImportedFunctions()) != 0 {
		t.Fatalf("simd.wasm imports %d memories and %d functions, want the engine's memory alone", len(imports), len(c.ImportedFunctions()))
	}
	if mod, name, _ := imports[0].Import(); mod != MemoryModule || name != "memory" {
		t.Errorf("simd.wasm imports memory %s.%s, want %s.memory", mod, name, MemoryModule)
	}
}
