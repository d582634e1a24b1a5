// elementwise.wgsl — the residual add, the gated products of the MLP and
// a scale by a constant.
//
// Bindings (group 0):
//   0 a: array<f32>  read_write, (n,)
//   1 b: array<f32>  read, (n,) (not bound for scale)
//   2 p: Params
// Dispatch: (ceil(n/WG), 1, 1) workgroups of WG (64).
//   add:           a[i] = a[i] + b[i]                     (residual stream)
//   silu_mul:      a[i] = a[i] / (1 + exp(-a[i])) * b[i]  (a = gate, b = up)
//   gelu_tanh_mul: a[i] = gelu_tanh(a[i]) * b[i]          (Gemma's MLP)
//   scale:         a[i] = a[i] * s                        (Gemma's embeddings)

struct Params {
    n: u32,
    s: f32, // scale only
    _pad1: u32,
    _pad2: u32,
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
        let g = a[gid.x];
        a[gid.x] = g / (1.0 + exp(-g)) * b[gid.x];
    }
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
        a[gid.x] = gelu_tanh(a[gid.x]) * b[gid.x];
    }
}

@compute @workgroup_size(WG)
fn scale(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x < p.n) {
        a[gid.x] = a[gid.x] * p.s;
    }
}
