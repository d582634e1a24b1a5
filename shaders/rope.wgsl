// rope.wgsl — rotary position embedding, NeoX style (rotate_half): in each
// head, element i pairs with element i + hd/2. Rotates in place.
//
// Bindings (group 0):
//   0 v:  array<f32>  rows of heads*hd values; row t at off + t*ld
//   1 cs: array<f32>  (positions, hd/2, 2) cos and sin, computed on the CPU
//                     exactly as the CPU engine does (WGSL's cos/sin are
//                     not accurate enough for large angles)
//   2 p:  Params
// Dispatch: (ceil(heads*hd/2 / WG), T, 1) workgroups of WG (64); token t is at
// position pos0 + t.

struct Params {
    heads: u32,
    hd: u32,
    pos0: u32,
    off: u32,
    ld: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read_write> v: array<f32>;
@group(0) @binding(1) var<storage, read> cs: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let half = p.hd / 2u;
    if (gid.x >= p.heads * half) {
        return;
    }
    let h = gid.x / half;
    let i = gid.x % half;
    let t = gid.y;
    let c = cs[((p.pos0 + t) * half + i) * 2u];
    let s = cs[((p.pos0 + t) * half + i) * 2u + 1u];
    let a = p.off + t * p.ld + h * p.hd + i;
    let x1 = v[a];
    let x2 = v[a + half];
    v[a] = x1 * c - x2 * s;
    v[a + half] = x2 * c + x1 * s;
}
