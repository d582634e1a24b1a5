// rmsnorm.wgsl — out[t] = w ⊙ (x[t] · rsqrt(mean(x[t]²) + eps)), in f32;
// with unit set, (1 + w) instead of w (Gemma3RMSNorm: its weights are
// stored as offsets from 1, and 1 + w is an f32 sum in torch too).
//
// Entry points:
//   main      normalizes rows of X into out.
//   main_q8   main, each row also rounded to 8-bit blocks for the
//             products that follow (quantize.wgsl's xq and xd at bindings
//             4 and 5; out's rows from 0, d a multiple of 32): an
//             invocation per block, the values it writes to out rounded
//             without a dispatch of their own.
//   in_place  normalizes rows of out where they lie (Qwen3's q_norm and
//             k_norm, one row per head, on q and on the KV cache): WebGPU
//             forbids binding one buffer as both read and read_write
//             storage in one dispatch, so it reads out and leaves x unbound.
//
// Bindings (group 0):
//   0 x:   array<f32>  X (T, d); row t at x_off + t*d (main only)
//   1 wt:  array<f32>  weight (d,)
//   2 out: array<f32>  main: (T, d), row t at out_off + t*d;
//                      in_place: X itself, row t at x_off + t*d
//   3 p:   Params
//   4, 5 xq, xd: main_q8 only (quantize.wgsl)
// Dispatch: (T, 1, 1) workgroups of WG (64); workgroup t normalizes row t.

struct Params {
    d: u32,
    eps: f32,
    x_off: u32,   // element offset of X's first row
    out_off: u32, // element offset of out's first row (main only)
    unit: u32,    // 1: scale by 1 + w; 0: by w
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> wt: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

var<workgroup> partial: array<f32, WG>;

// inv_rms sums the invocations' shares ss of a row's squares across the
// workgroup and returns rsqrt(mean + eps). Every invocation must call it.
fn inv_rms(lid: u32, ss: f32) -> f32 {
    partial[lid] = ss;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid < stride) {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    return 1.0 / sqrt(partial[0] / f32(p.d) + p.eps);
}

// scale is element i's factor: w, or 1 + w with unit (a branch, not
// 0 + w, so that w's own bits reach the product when unit is 0).
fn scale(i: u32) -> f32 {
    if (p.unit != 0u) {
        return 1.0 + wt[i];
    }
    return wt[i];
}

// x_inv_rms is inv_rms of X's row from element row.
fn x_inv_rms(lid: u32, row: u32) -> f32 {
    var ss = 0.0;
    for (var i = lid; i < p.d; i += WG) {
        let v = x[row + i];
        ss += v * v;
    }
    return inv_rms(lid, ss);
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = p.x_off + wid.x * p.d;
    let r = x_inv_rms(lid, row);
    let dst = p.out_off + wid.x * p.d;
    for (var i = lid; i < p.d; i += WG) {
        out[dst + i] = scale(i) * (x[row + i] * r);
    }
}

@compute @workgroup_size(WG)
fn main_q8(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = p.x_off + wid.x * p.d;
    let r = x_inv_rms(lid, row);
    let dst = p.out_off + wid.x * p.d;
    for (var blk = lid; blk < p.d / 32u; blk += WG) {
        var v = array<vec4<f32>, 8>();
        for (var j = 0u; j < 32u; j++) {
            let i = blk * 32u + j;
            v[j / 4u][j % 4u] = scale(i) * (x[row + i] * r);
            out[dst + i] = v[j / 4u][j % 4u];
        }
        quantize_block(v, wid.x, blk, p.d);
    }
}

@compute @workgroup_size(WG)
fn in_place(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let row = p.x_off + wid.x * p.d;
    var ss = 0.0;
    for (var i = lid; i < p.d; i += WG) {
        let v = out[row + i];
        ss += v * v;
    }
    let r = inv_rms(lid, ss);
    // Each invocation rewrites only the elements it read.
    for (var i = lid; i < p.d; i += WG) {
        out[row + i] = scale(i) * (out[row + i] * r);
    }
}
