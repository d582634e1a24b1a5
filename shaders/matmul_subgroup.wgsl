// matmul_subgroup.wgsl — lanes_sum for matmul.wgsl's main and expert with
// subgroup shuffles: no workgroup memory, no barriers. The module starts
// with `enable subgroups;` (shaders.Matmul puts it there: a directive
// must precede every declaration).
//
// Bindings: none. It needs each row's LANES invocations in one subgroup:
// subgroups of at least LANES invocations, laid along
// local_invocation_index (gpu.Info.SubgroupMinSize; package gpu/native's
// probe checks the layout). Lane 0 then adds exactly what
// matmul_lanes.wgsl's tree adds, in the same order: lane l's value after
// the step of stride s is its own plus lane l+s's, so the same bits.

fn lanes_sum(acc: f32, lid: u32) -> f32 {
    var s = acc;
    for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
        s += subgroupShuffleDown(s, stride);
    }
    return s;
}
