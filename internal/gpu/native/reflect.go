package native

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gogpu/gputypes"
	"github.com/gogpu/naga/ir"
)

// gogpu/wgpu has no "auto" pipeline layout on native backends (only its
// browser backend forwards layout: "auto"), so the layout is derived here
// the way WebGPU derives it: from the resources the entry point statically
// uses, read from naga's IR of the same WGSL.

// resource is one buffer binding an entry point uses.
type resource struct {
	group, binding uint32
	name           string
	typ            gputypes.BufferBindingType
	minSize        int64 // bytes the shader's type needs (one element for runtime arrays)
}

func (r resource) kind() string {
	switch r.typ {
	case gputypes.BufferBindingTypeUniform:
		return "uniform"
	case gputypes.BufferBindingTypeReadOnlyStorage:
		return "storage, read"
	default:
		return "storage, read_write"
	}
}

// entryResources lists the buffer bindings that entry point uses, sorted
// by group and binding.
func entryResources(m *ir.Module, entry string) ([]resource, error) {
	var ep *ir.EntryPoint
	var names []string
	for i := range m.EntryPoints {
		e := &m.EntryPoints[i]
		if e.Stage != ir.StageCompute {
			continue
		}
		names = append(names, e.Name)
		if e.Name == entry {
			ep = e
		}
	}
	if ep == nil {
		return nil, fmt.Errorf("no @compute entry point %q (have: %s)", entry, strings.Join(names, ", "))
	}

	u := usage{m: m, globals: map[ir.GlobalVariableHandle]bool{}, funcs: map[ir.FunctionHandle]bool{}}
	u.function(&ep.Function)

	var out []resource
	for h := range u.globals {
		gv := &m.GlobalVariables[h]
		if gv.Binding == nil {
			continue
		}
		r := resource{group: gv.Binding.Group, binding: gv.Binding.Binding, name: gv.Name,
			minSize: int64(ir.TypeSize(m, gv.Type))}
		switch {
		case gv.Space == ir.SpaceUniform:
			r.typ = gputypes.BufferBindingTypeUniform
		case gv.Space == ir.SpaceStorage && gv.Access == ir.StorageRead:
			r.typ = gputypes.BufferBindingTypeReadOnlyStorage
		case gv.Space == ir.SpaceStorage:
			r.typ = gputypes.BufferBindingTypeStorage
		default:
			return nil, fmt.Errorf("binding @group(%d) @binding(%d) %s: only uniform and storage buffers are supported",
				r.group, r.binding, gv.Name)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].group != out[j].group {
			return out[i].group < out[j].group
		}
		return out[i].binding < out[j].binding
	})
	return out, nil
}

// usage collects the globals a function and its callees reference.
type usage struct {
	m       *ir.Module
	globals map[ir.GlobalVariableHandle]bool
	funcs   map[ir.FunctionHandle]bool
}

func (u *usage) function(f *ir.Function) {
	for _, e := range f.Expressions {
		switch k := e.Kind.(type) {
		case ir.ExprGlobalVariable:
			u.globals[k.Variable] = true
		case ir.ExprCallResult:
			u.call(k.Function)
		}
	}
	u.block(f.Body)
}

func (u *usage) call(h ir.FunctionHandle) {
	if u.funcs[h] || int(h) >= len(u.m.Functions) {
		return
	}
	u.funcs[h] = true
	u.function(&u.m.Functions[h])
}

// block finds calls to functions without a result, which leave no
// expression behind, only a statement.
func (u *usage) block(b ir.Block) {
	for _, s := range b {
		switch k := s.Kind.(type) {
		case ir.StmtCall:
			u.call(k.Function)
		case ir.StmtBlock:
			u.block(k.Block)
		case ir.StmtIf:
			u.block(k.Accept)
			u.block(k.Reject)
		case ir.StmtSwitch:
			for _, c := range k.Cases {
				u.block(c.Body)
			}
		case ir.StmtLoop:
			u.block(k.Body)
			u.block(k.Continuing)
		}
	}
}
