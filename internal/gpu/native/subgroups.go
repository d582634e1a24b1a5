package native

import (
	"encoding/binary"

	"logitscope/internal/gpu"
)

// subgroupProbe sums 1 over each subgroup and records the size and each
// invocation's index in its subgroup. A driver or compiler that gets
// subgroups wrong fails it, not just one that lacks them.
const subgroupProbe = `
enable subgroups;

@group(0) @binding(0) var<storage, read_write> out: array<u32>;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) i: u32, @builtin(subgroup_size) n: u32, @builtin(subgroup_invocation_id) s: u32) {
    out[i] = subgroupAdd(1u);
    out[64u + i] = n;
    out[128u + i] = s;
}
`

// subgroupSize runs the probe: the subgroup size, which every invocation
// must see and every subgroup must sum to, its subgroups laid along the
// invocation index (invocation i is lane i % size) as the engine's
// subgroup kernels assume. It leaves no objects behind.
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
	buf, err := d.CreateBuffer("subgroup probe", 192*4)
	if err != nil {
		return 0, err
	}
	g, err := d.CreateBindGroup(p, 0, []gpu.Binding{{Binding: 0, Buffer: buf}})
	if err != nil {
		d.DestroyBuffer(buf)
		return 0, err
	}
	// The bind group goes first, released at the Submit after it (see
	// recorder.doomed), and only then the buffer it holds. Released the
	// other way round (the bind group pending, its buffer gone), a later
	// submission once failed with "references released buffer "subgroup
	// probe"" (TestCaptureRuntimeWasm, one run in five; not reproduced
	// since in 40 opens).
	defer func() {
		d.DestroyBindGroup(g)
		d.Submit()
		d.DestroyBuffer(buf)
	}()
	if err := d.Dispatch(p, []gpu.BindGroup{g}, 1, 1, 1); err != nil {
		return 0, err
	}
	raw, err := d.ReadBuffer(buf, 0, 192*4)
	if err != nil {
		return 0, err
	}
	word := func(i int) uint32 { return binary.LittleEndian.Uint32(raw[4*i:]) }
	size := word(64)
	if size == 0 {
		return 0, errSubgroupsWrong
	}
	for i := range 64 {
		// A subgroup wider than the workgroup (Adreno's 128) holds all 64.
		if word(i) != min(size, 64) || word(64+i) != size || word(128+i) != uint32(i)%size {
			return 0, errSubgroupsWrong
		}
	}
	return size, nil
}
