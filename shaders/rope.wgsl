// rope.wgsl — rotary position embedding, NeoX style (rotate_half) on each
// head's first rd values (rd = hd, or head_dim · partial_rotary_factor for
// GLM-4.5): element i < rd/2 pairs with element i + rd/2, and elements
// rd..hd pass unrotated. Rotates q and k in place, in one dispatch.
//
// Bindings (group 0):
//   0 q:  array<f32>  rows of heads*hd values; row t at off + t*ld
//   3 k:  array<f32>  rows of k_heads*hd values; row t at k_off + t*k_ld
//   1 cs: array<f32>  (positions, rd/2, 2) cos and sin, computed on the CPU
//                     exactly as the CPU engine does (WGSL's cos/sin are
//                     not accurate enough for large angles)
//   2 p:  Params
// Dispatch: (ceil((heads+k_heads)*rd/2 / WG), T, 1) workgroups of WG (64):
// invocation x < heads*rd/2 rotates a pair of q, the rest a pair of k;
// token t is at position pos0 + t.

struct Params {
    heads: u32,
    hd: u32,
    pos0: u32,
    off: u32,
    ld: u32,
    k_heads: u32,
    k_off: u32,
    k_ld: u32,
    rd: u32,      // rotary values per head (even, at most hd)
}

@group(0) @binding(0) var<storage, read_write> q: array<f32>;
@group(0) @binding(1) var<storage, read> cs: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
@group(0) @binding(3) var<storage, read_write> k: array<f32>;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let half = p.rd / 2u;
    let t = gid.y;
    let nq = p.heads * half;
    if (gid.x < nq) {
        let a = p.off + t * p.ld + gid.x / half * p.hd + gid.x % half;
        let r = rotate(q[a], q[a + half], t, gid.x % half);
        q[a] = r.x;
        q[a + half] = r.y;
    } else if (gid.x - nq < p.k_heads * half) {
        let j = gid.x - nq;
        let a = p.k_off + t * p.k_ld + j / half * p.hd + j % half;
        let r = rotate(k[a], k[a + half], t, j % half);
        k[a] = r.x;
        k[a + half] = r.y;
    }
}

// rotate is pair i of a head of token t, (x1, x2), rotated by its angle.
fn rotate(x1: f32, x2: f32, t: u32, i: u32) -> vec2<f32> {
    let at = ((p.pos0 + t) * (p.rd / 2u) + i) * 2u;
    let c = cs[at];
    let s = cs[at + 1u];
    return vec2<f32>(x1 * c - x2 * s, x2 * c + x1 * s);
}
