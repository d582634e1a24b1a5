// matmul_lanes.wgsl — lanes_sum for matmul.wgsl's main and expert, and
// matmul_a8.wgsl's a8main, in core WGSL: a row's partial sums added in
// workgroup memory.
//
// Bindings: none. Workgroup memory: partial, one f32 per invocation.

var<workgroup> partial: array<f32, WG>;

// lanes_sum is the sum of the n partial sums acc of invocation lid's row
// (n invocations a row, n a power of two: LANES, or matmul_a8.wgsl's
// A8_LANES), in the row's lane 0 (lane = lid % n): lanes l and l + stride
// added for stride n/2, then half that, down to 1 (for n = 8,
// ((a0+a4)+(a2+a6)) + ((a1+a5)+(a3+a7))). Every invocation of the
// workgroup must call it: it holds barriers.
fn lanes_sum(acc: f32, lid: u32, n: u32) -> f32 {
    let lane = lid % n;
    partial[lid] = acc;
    workgroupBarrier();
    for (var stride = n / 2u; stride > 0u; stride /= 2u) {
        if (lane < stride) {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    return partial[lid];
}
