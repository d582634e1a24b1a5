// elementwise.wgsl — the residual add, the gated products of the MLP and
// a scale by a constant; and rounding to 8-bit blocks (quantize.wgsl).
//
// Bindings (group 0):
//   0 a: array<f32>  read_write, (n,)
//   1 b: array<f32>  read, (n,) (not bound for scale and quantize)
//   2 p: Params
//   4, 5 xq, xd: quantize.wgsl's, for quantize and the *_q8 entry points
// Dispatch: (ceil(n/WG), 1, 1) workgroups of WG (64).
//   add:           a[i] = a[i] + b[i]                     (residual stream)
//   silu_mul:      a[i] = a[i] / (1 + exp(-a[i])) * b[i]  (a = gate, b = up)
//   gelu_tanh_mul: a[i] = gelu_tanh(a[i]) * b[i]          (Gemma's MLP)
//   scale:         a[i] = a[i] * s                        (Gemma's embeddings)
// And (ceil(n/32/WG), 1, 1), an invocation per block of 32 of a's (T,
// cols) rows (n = T*cols) from element off (cols a multiple of 32):
//   quantize:           a rounded to 8-bit blocks, for the products that follow
//   silu_mul_q8,
//   gelu_tanh_mul_q8:   silu_mul and gelu_tanh_mul, the values they write
//                       rounded as quantize rounds a

struct Params {
    n: u32,
    s: f32,    // scale only
    cols: u32, // quantize and *_q8 only: the width of a's rows
    off: u32,  // quantize and *_q8 only: the element of a and b where row 0 starts
}

@group(0) @binding(0) var<storage, read_write> a: array<f32>;
@group(0) @binding(1) var<storage, read> b: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn add(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < p.n) {
        a[gid.x] = a[gid.x] + b[gid.x];
    }
}

@compute @workgroup_size(WG)
fn silu_mul(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < p.n) {
        a[gid.x] = silu_mul_at(gid.x);
    }
}

fn silu_mul_at(i: u32) -> f32 {
    let g = a[i];
    return g / (1.0 + exp(-g)) * b[i];
}

// gelu_tanh is gelu_pytorch_tanh, ½x(1 + tanh(u)) with
// u = √(2/π)(x + 0.044715x³), written as x / (1 + exp(−2u)), the same
// function: WGSL's tanh is not required to be accurate for large |u|, and
// the exp form saturates cleanly (x for large x, −0 for very negative x).
fn gelu_tanh(x: f32) -> f32 {
    let u = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    return x / (1.0 + exp(-2.0 * u));
}

@compute @workgroup_size(WG)
fn gelu_tanh_mul(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < p.n) {
        a[gid.x] = gelu_tanh_mul_at(gid.x);
    }
}

fn gelu_tanh_mul_at(i: u32) -> f32 {
    return gelu_tanh(a[i]) * b[i];
}

@compute @workgroup_size(WG)
fn quantize(@builtin(global_invocation_id) gid: vec3<u32>) {
    round_block(gid.x);
}

// silu_mul_q8 and gelu_tanh_mul_q8 write their block's values with the
// same expressions as silu_mul and gelu_tanh_mul (so the same bits), then
// round them.
@compute @workgroup_size(WG)
fn silu_mul_q8(@builtin(global_invocation_id) gid: vec3<u32>) {
    gated_block(gid.x, false);
}

@compute @workgroup_size(WG)
fn gelu_tanh_mul_q8(@builtin(global_invocation_id) gid: vec3<u32>) {
    gated_block(gid.x, true);
}

// gated_block sets block i of a to silu_mul's values (gelu:
// gelu_tanh_mul's) and rounds it.
fn gated_block(i: u32, gelu: bool) {
    if (i < p.n / 32u) {
        for (var e = p.off + i * 32u; e < p.off + i * 32u + 32u; e++) {
            if (gelu) {
                a[e] = gelu_tanh_mul_at(e);
            } else {
                a[e] = silu_mul_at(e);
            }
        }
    }
    round_block(i);
}

// round_block rounds block i of a's blocks (row i / (cols/32)) to 8 bits.
fn round_block(i: u32) {
    let per = p.cols / 32u;
    if (i >= p.n / 32u) {
        return;
    }
    let at = p.off + i * 32u;
    var v = array<vec4<f32>, 8>();
    for (var k = 0u; k < 8u; k++) {
        v[k] = vec4<f32>(a[at + 4u * k], a[at + 4u * k + 1u], a[at + 4u * k + 2u], a[at + 4u * k + 3u]);
    }
    quantize_block(v, i / per, i % per, p.cols);
}

@compute @workgroup_size(WG)
fn scale(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < p.n) {
        a[gid.x] = a[gid.x] * p.s;
    }
}
