// elementwise.wgsl — the residual add and the SiLU-gated product of the MLP.
//
// Bindings (group 0), both entry points:
//   0 a: array<f32>  read_write, (n,)
//   1 b: array<f32>  read, (n,)
//   2 p: Params
// Dispatch: (ceil(n/WG), 1, 1) workgroups of WG (64).
//   add:      a[i] = a[i] + b[i]                         (residual stream)
//   silu_mul: a[i] = a[i] / (1 + exp(-a[i])) * b[i]      (a = gate, b = up)

struct Params {
    n: u32,
    _pad0: u32,
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
