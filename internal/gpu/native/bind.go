package native

import (
	"fmt"

	"github.com/gogpu/gputypes"
	"github.com/gogpu/wgpu"

	"logitscope/internal/gpu"
)

type bindGroup struct {
	bg       *wgpu.BindGroup
	pipeline *pipeline // bind groups of an "auto" layout fit only their pipeline
	group    uint32
}

// CreateBindGroup checks every entry against the pipeline's derived layout
// and the device limits first, so that mistakes come back naming the
// pipeline, the binding, the buffer and the sizes involved.
func (d *device) CreateBindGroup(ph gpu.Pipeline, group uint32, entries []gpu.Binding) (gpu.BindGroup, error) {
	if d.closed {
		return 0, errClosed
	}
	p, err := d.pipelines.get(uint32(ph))
	if err != nil {
		return 0, fmt.Errorf("gpu/native: CreateBindGroup: %w", err)
	}
	if int(group) >= len(p.groups) {
		return 0, fmt.Errorf("gpu/native: pipeline %q: no @group(%d) (it uses %d groups)", p.label, group, len(p.groups))
	}
	res := p.groups[group]
	out := make([]wgpu.BindGroupEntry, 0, len(entries))
	seen := make(map[uint32]bool, len(entries))
	for _, e := range entries {
		r, ok := findResource(res, e.Binding)
		if !ok {
			return 0, fmt.Errorf("gpu/native: pipeline %q: @group(%d) has no @binding(%d) used by the entry point",
				p.label, group, e.Binding)
		}
		if seen[e.Binding] {
			return 0, fmt.Errorf("gpu/native: pipeline %q: @group(%d) @binding(%d) given twice", p.label, group, e.Binding)
		}
		seen[e.Binding] = true
		be, err := d.bindEntry(p.label, r, e)
		if err != nil {
			return 0, err
		}
		out = append(out, be)
	}
	for _, r := range res {
		if !seen[r.binding] {
			return 0, fmt.Errorf("gpu/native: pipeline %q: @group(%d) @binding(%d) (%s) is not bound",
				p.label, group, r.binding, r.name)
		}
	}
	bg, err := d.dev.CreateBindGroup(&wgpu.BindGroupDescriptor{
		Label:   fmt.Sprintf("%s group %d", p.label, group),
		Layout:  p.layouts[group],
		Entries: out,
	})
	if err != nil {
		return 0, fmt.Errorf("gpu/native: pipeline %q: @group(%d): %w", p.label, group, err)
	}
	h, err := d.groups.add(&bindGroup{bg: bg, pipeline: p, group: group})
	if err != nil {
		bg.Release()
		return 0, err
	}
	return gpu.BindGroup(h), nil
}

func findResource(rs []resource, binding uint32) (resource, bool) {
	for _, r := range rs {
		if r.binding == binding {
			return r, true
		}
	}
	return resource{}, false
}

func (d *device) bindEntry(label string, r resource, e gpu.Binding) (wgpu.BindGroupEntry, error) {
	b, err := d.buffer(e.Buffer)
	if err != nil {
		return wgpu.BindGroupEntry{}, fmt.Errorf("gpu/native: pipeline %q: @binding(%d) %s: %w", label, r.binding, r.name, err)
	}
	fail := func(format string, args ...any) (wgpu.BindGroupEntry, error) {
		return wgpu.BindGroupEntry{}, fmt.Errorf("gpu/native: pipeline %q: @binding(%d) %s (%s) on buffer %q: %s",
			label, r.binding, r.name, r.kind(), b.label, fmt.Sprintf(format, args...))
	}
	size := e.Size
	if size == 0 {
		size = b.size - e.Offset
	}
	if e.Offset < 0 || size <= 0 || e.Offset+size > b.size {
		return fail("range offset %d size %d is outside its %d bytes", e.Offset, e.Size, b.size)
	}
	maxSize, align := int64(d.limits.MaxStorageBufferBindingSize), int64(d.limits.MinStorageBufferOffsetAlignment)
	if r.typ == gputypes.BufferBindingTypeUniform {
		maxSize, align = int64(d.limits.MaxUniformBufferBindingSize), int64(d.limits.MinUniformBufferOffsetAlignment)
	}
	if e.Offset%align != 0 {
		return fail("offset %d is not a multiple of %d", e.Offset, align)
	}
	if size > maxSize {
		return fail("binding size %d exceeds the device's limit %d: bind a smaller window", size, maxSize)
	}
	if size%4 != 0 {
		return fail("binding size %d is not a multiple of 4", size)
	}
	if size < r.minSize {
		return fail("binding size %d is smaller than the %d bytes the shader's type needs", size, r.minSize)
	}
	return wgpu.BindGroupEntry{Binding: r.binding, Buffer: b.buf, Offset: uint64(e.Offset), Size: uint64(size)}, nil
}

func (d *device) DestroyBindGroup(h gpu.BindGroup) {
	if d.closed {
		return
	}
	g, ok := d.groups.remove(uint32(h))
	switch {
	case !ok:
	case d.rec.enc != nil:
		d.rec.doomed = append(d.rec.doomed, g.bg)
	default:
		g.bg.Release()
	}
}
