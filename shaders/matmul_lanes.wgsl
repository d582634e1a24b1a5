// matmul_lanes.wgsl — lanes_sum for matmul.wgsl's main and expert in core
// WGSL: a row's LANES partial sums added in workgroup memory.
//
// Bindings: none. Workgroup memory: partial, one f32 per invocation.

var<workgroup> partial: array<f32, WG>;

// lanes_sum is the sum of the LANES partial sums acc of invocation lid's
// row, in the row's lane 0 (lane = lid % LANES): lanes l and l + stride
// added for stride LANES/2, then half that, down to 1 (for LANES = 8,
// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))). Every invocation of the
// workgroup must call it: it holds barriers.
fn lanes_sum(acc: f32, lid: u32) -> f32 {
    let lane = lid % LANES;
    partial[lid] = acc;
    workgroupBarrier();
    for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
        if (lane < stride) {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    return partial[lid];
}
