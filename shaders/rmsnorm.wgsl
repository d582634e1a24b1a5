// rmsnorm.wgsl — out[t] = w ⊙ (x[t] · rsqrt(mean(x[t]²) + eps)), in f32.
//
// Bindings (group 0):
//   0 x:   array<f32>  X (T, d)
//   1 wt:  array<f32>  weight (d,)
//   2 out: array<f32>  (T, d); row t at out_off + t*d
//   3 p:   Params
// Dispatch: (T, 1, 1) workgroups of WG (64); workgroup t normalizes row x_off/d + t.

struct Params {
    d: u32,
    eps: f32,
    x_off: u32,   // element offset of X's first row
    out_off: u32, // element offset of out's first row
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> wt: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = p.x_off + wid.x * p.d;
    var ss = 0.0;
    for (var i = lid; i < p.d; i += WG) {
        let v = x[row + i];
        ss += v * v;
    }
    partial[lid] = ss;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid < stride) {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    let r = 1.0 / sqrt(partial[0] / f32(p.d) + p.eps);
    let dst = p.out_off + wid.x * p.d;
    for (var i = lid; i < p.d; i += WG) {
        out[dst + i] = wt[i] * (x[row + i] * r);
    }
}
