package native

import (
	"fmt"

	"github.com/gogpu/gputypes"
	"github.com/gogpu/naga"
	"github.com/gogpu/naga/ir"
	"github.com/gogpu/wgpu"

	"logitscope/internal/gpu"
)

type module struct {
	label string
	sm    *wgpu.ShaderModule
	ir    *ir.Module // naga's IR of the same source, for deriving layouts
}

type pipeline struct {
	label   string
	cp      *wgpu.ComputePipeline
	pl      *wgpu.PipelineLayout
	layouts []*wgpu.BindGroupLayout // one per group 0..max used, possibly empty
	groups  [][]resource            // the resources of each group
}

func (p *pipeline) release() {
	p.cp.Release()
	p.releaseLayouts()
}

// CreateShaderModule compiles WGSL. gogpu's Vulkan backend compiles with
// naga synchronously and returns naga's parse or validation message as the
// error, so no error scope is needed to see it.
//
// naga trap (gogpu/naga v0.18.0): unpack2x16float on a constant argument is
// folded at compile time with the high half lost (.y becomes 0); on runtime
// values it is correct. Kernels decode f16 from buffer contents, which are
// runtime values, so only hand-written tests with literals meet the trap.
func (d *device) CreateShaderModule(label, wgsl string) (gpu.Module, error) {
	if d.closed {
		return 0, errClosed
	}
	sm, err := d.dev.CreateShaderModule(&wgpu.ShaderModuleDescriptor{Label: label, WGSL: wgsl})
	if err != nil {
		return 0, fmt.Errorf("gpu/native: shader %q: %w", label, err)
	}
	ast, err := naga.Parse(wgsl)
	var m *ir.Module
	if err == nil {
		m, err = naga.LowerWithSource(ast, wgsl)
	}
	if err != nil {
		sm.Release()
		return 0, fmt.Errorf("gpu/native: shader %q: reflect: %w", label, err)
	}
	h, err := d.modules.add(&module{label: label, sm: sm, ir: m})
	if err != nil {
		sm.Release()
		return 0, err
	}
	return gpu.Module(h), nil
}

func (d *device) CreateComputePipeline(label string, mh gpu.Module, entryPoint string) (gpu.Pipeline, error) {
	if d.closed {
		return 0, errClosed
	}
	m, err := d.modules.get(uint32(mh))
	if err != nil {
		return 0, fmt.Errorf("gpu/native: pipeline %q: %w", label, err)
	}
	res, err := entryResources(m.ir, entryPoint)
	if err != nil {
		return 0, fmt.Errorf("gpu/native: pipeline %q (shader %q): %w", label, m.label, err)
	}
	p := &pipeline{label: label}
	if err := d.buildLayouts(p, res); err != nil {
		p.releaseLayouts()
		return 0, fmt.Errorf("gpu/native: pipeline %q (shader %q): %w", label, m.label, err)
	}
	p.cp, err = d.dev.CreateComputePipeline(&wgpu.ComputePipelineDescriptor{
		Label:      label,
		Layout:     p.pl,
		Module:     m.sm,
		EntryPoint: entryPoint,
	})
	if err != nil {
		p.releaseLayouts()
		// naga v0.18 lets some WGSL type errors through (a u32 stored into
		// an f32, mixed-type arithmetic) and emits invalid SPIR-V, which
		// the driver rejects here with a bare VkResult.
		return 0, fmt.Errorf("gpu/native: pipeline %q (shader %q): %w "+
			"(if the driver rejected the SPIR-V, look for a WGSL type mismatch naga did not report)", label, m.label, err)
	}
	h, err := d.pipelines.add(p)
	if err != nil {
		p.release()
		return 0, err
	}
	return gpu.Pipeline(h), nil
}

func (p *pipeline) releaseLayouts() {
	if p.pl != nil {
		p.pl.Release()
	}
	for _, l := range p.layouts {
		l.Release()
	}
}

// buildLayouts makes one bind group layout per group up to the highest one
// used, as WebGPU's "auto" layout does, and the pipeline layout over them.
func (d *device) buildLayouts(p *pipeline, res []resource) error {
	n := 0
	if len(res) > 0 {
		n = int(res[len(res)-1].group) + 1
	}
	if n > int(d.limits.MaxBindGroups) {
		return fmt.Errorf("uses @group(%d); the device allows %d groups", n-1, d.limits.MaxBindGroups)
	}
	p.groups = make([][]resource, n)
	for _, r := range res {
		p.groups[r.group] = append(p.groups[r.group], r)
	}
	for g, rs := range p.groups {
		entries := make([]wgpu.BindGroupLayoutEntry, len(rs))
		for i, r := range rs {
			entries[i] = wgpu.BindGroupLayoutEntry{
				Binding:    r.binding,
				Visibility: wgpu.ShaderStageCompute,
				Buffer:     &gputypes.BufferBindingLayout{Type: r.typ, MinBindingSize: uint64(r.minSize)},
			}
		}
		l, err := d.dev.CreateBindGroupLayout(&wgpu.BindGroupLayoutDescriptor{
			Label:   fmt.Sprintf("%s group %d", p.label, g),
			Entries: entries,
		})
		if err != nil {
			return fmt.Errorf("layout of group %d: %w", g, err)
		}
		p.layouts = append(p.layouts, l)
	}
	pl, err := d.dev.CreatePipelineLayout(&wgpu.PipelineLayoutDescriptor{
		Label:            p.label,
		BindGroupLayouts: p.layouts,
	})
	if err != nil {
		return fmt.Errorf("pipeline layout: %w", err)
	}
	p.pl = pl
	return nil
}
