// matmul_subgroup.wgsl — lanes_sum for matmul.wgsl's main and expert,
// and matmul_a8.wgsl's a8main, with subgroup shuffles: no workgroup
// memory, no barriers. The module starts with `enable subgroups;`
// (shaders.Matmul puts it there: a directive must precede every
// declaration).
//
// Bindings: none. It needs each row's n invocations in one subgroup:
// subgroups of at least n invocations (LANES; A8_LANES for a8main, which
// gpuengine never asks of it, having no subgroups of 16 to test on),
// laid along local_invocation_index (gpu.Info.SubgroupMinSize; package
// internal/gpu/native's probe checks the layout). Lane 0 then adds exactly what
// matmul_lanes.wgsl's tree adds, in the same order: lane l's value after
// the step of stride s is its own plus lane l+s's, so the same bits.

fn lanes_sum(acc: f32, lid: u32, n: u32) -> f32 {
    var s = acc;
    for (var stride = n / 2u; stride > 0u; stride /= 2u) {
        s += subgroupShuffleDown(s, stride);
    }
    return s;
}
