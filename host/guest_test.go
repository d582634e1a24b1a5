package host

import (
	"context"
	"maps"
	"slices"
	"testing"

	"github.com/tetratelabs/wazero/api"
)

// fn is one export of a hand-assembled stand-in for engine.wasm: a body of
// raw instructions (before the final end), or, with body nil, one that
// passes its arguments to the Go function of its name in the host module
// "script", so that a test can script the guest's answers.
type fn struct {
	name            string
	params, results []api.ValueType
	body            []byte
}

// abiFns are the exports that the host calls, with their ABI signatures,
// all scripted.
func abiFns() []fn {
	var fns []fn
	for _, name := range slices.Sorted(maps.Keys(exports)) {
		fns = append(fns, fn{name: name, params: exports[name][0], results: exports[name][1]})
	}
	return fns
}

// loopForever is the body of a function that never returns.
var loopForever = []byte{0x03, 0x40, 0x0c, 0x00, 0x0b, 0x00} // loop br 0 end unreachable

func uleb(n int) []byte {
	var b []byte
	for {
		c := byte(n & 0x7f)
		if n >>= 7; n == 0 {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

func vec(items ...[]byte) []byte {
	out := uleb(len(items))
	for _, it := range items {
		out = append(out, it...)
	}
	return out
}

func wasmName(s string) []byte { return append(uleb(len(s)), s...) }

func section(id byte, items ...[]byte) []byte {
	c := vec(items...)
	return append(append([]byte{id}, uleb(len(c))...), c...)
}

func funcType(f fn) []byte {
	// api.ValueType is the type's byte in the binary format.
	return slices.Concat([]byte{0x60}, uleb(len(f.params)), f.params, uleb(len(f.results)), f.results)
}

// assemble writes a module of fns (exported under their names) and one
// exported memory of one page.
func assemble(fns []fn) []byte {
	var types, imports, funcs, exps, codes [][]byte
	var scripted []string
	for _, f := range fns {
		if f.body == nil {
			types = append(types, funcType(f))
			imports = append(imports, slices.Concat(wasmName("script"), wasmName(f.name), []byte{0x00}, uleb(len(scripted))))
			scripted = append(scripted, f.name)
		}
	}
	for i, f := range fns {
		body := f.body
		if body == nil {
			for j := range f.params {
				body = append(body, 0x20, byte(j)) // local.get j
			}
			body = append(append(body, 0x10), uleb(slices.Index(scripted, f.name))...) // call
		}
		funcs = append(funcs, uleb(len(types)))
		types = append(types, funcType(f))
		code := slices.Concat([]byte{0x00}, body, []byte{0x0b}) // no locals; end
		codes = append(codes, append(uleb(len(code)), code...))
		exps = append(exps, slices.Concat(wasmName(f.name), []byte{0x00}, uleb(len(scripted)+i)))
	}
	exps = append(exps, append(wasmName("memory"), 0x02, 0x00))
	return slices.Concat([]byte("\x00asm\x01\x00\x00\x00"),
		section(1, types...), section(2, imports...), section(3, funcs...),
		section(5, []byte{0x00, 0x01}), section(7, exps...), section(10, codes...))
}

// script answers a scripted export: its arguments come in stack, its
// result goes to stack[0]. An export without one returns 0.
type script map[string]func(mem api.Memory, stack []uint64)

// fakeGuest loads the ABI's exports, scripted by sc but for the raw ones
// given, and instantiates it with no model and no device.
func fakeGuest(t testing.TB, sc script, raw ...fn) (*Module, *Instance) {
	t.Helper()
	ctx := context.Background()
	fns := abiFns()
	for _, r := range raw {
		fns[slices.IndexFunc(fns, func(f fn) bool { return f.name == r.name })] = r
	}
	m, err := Load(ctx, assemble(fns), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(ctx) })
	b := m.rt.NewHostModuleBuilder("script")
	for _, f := range fns {
		if f.body != nil {
			continue
		}
		do := sc[f.name]
		b.NewFunctionBuilder().WithGoModuleFunction(api.GoModuleFunc(func(_ context.Context, mod api.Module, stack []uint64) {
			if do != nil {
				do(mod.Memory(), stack)
			} else if len(f.results) > 0 {
				stack[0] = 0
			}
		}), f.params, f.results).Export(f.name)
	}
	if _, err := b.Instantiate(ctx); err != nil {
		t.Fatal(err)
	}
	e, err := m.instantiate(ctx, nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(ctx) })
	return m, e
}

// ret puts an i32 result on the stack.
func ret(stack []uint64, r int32) { stack[0] = uint64(uint32(r)) }
