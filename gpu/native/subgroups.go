package native

import (
	"encoding/binary"

	"logitscope/gpu"
)

// subgroupProbe sums 1 over each subgroup; every invocation must see the
// subgroup size, which must be at least 1. A driver or compiler that gets
// subgroups wrong fails this, not just one that lacks them.
const subgroupProbe = `
enable subgroups;

@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) i: u32, @builtin(subgroup_size) n: u32) {
    out[i] = subgroupAdd(1u);
    out[64u + i] = n;
}
`

// probeSubgroups reports whether subgroup built-ins compile and compute the
// right thing on this device. It leaves no objects behind.
func (d *device) probeSubgroups() bool {
	size, err := d.subgroupSize()
	d.subgroupSz = size
	return err == nil && size > 0
}

func (d *device) subgroupSize() (uint32, error) {
	m, err := d.CreateShaderModule("subgroup probe", subgroupProbe)
	if err != nil {
		return 0, err
	}
	defer d.destroyModule(m)
	p, err := d.CreateComputePipeline("subgroup probe", m, "main")
	if err != nil {
		return 0, err
	}
	defer d.destroyPipeline(p)
	buf, err := d.CreateBuffer("subgroup probe", 128*4)
	if err != nil {
		return 0, err
	}
	defer d.DestroyBuffer(buf)
	g, err := d.CreateBindGroup(p, 0, []gpu.Binding{{Binding: 0, Buffer: buf}})
	if err != nil {
		return 0, err
	}
	defer d.DestroyBindGroup(g)
	if err := d.Dispatch(p, []gpu.BindGroup{g}, 1, 1, 1); err != nil {
		return 0, err
	}
	raw, err := d.ReadBuffer(buf, 0, 128*4)
	if err != nil {
		return 0, err
	}
	size := binary.LittleEndian.Uint32(raw[64*4:])
	for i := range 64 {
		sum := binary.LittleEndian.Uint32(raw[i*4:])
		n := binary.LittleEndian.Uint32(raw[(64+i)*4:])
		if n != size || sum != size {
			return 0, errSubgroupsWrong
		}
	}
	return size, nil
}
