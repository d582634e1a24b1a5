// embed.wgsl — gather rows of the embedding matrix for a batch of token
// ids, decoding the weights (weights.wgsl, ggml.wgsl: a row of a ggml
// block type comes out as ggml's dequantization, bit for bit).
//
// Bindings (group 0):
//   0 w:   array<u32>  a row-piece of E (n_rows, cols): rows [row0, row0+n_rows)
//   1 ids: array<u32>  token ids (T,)
//   2 out: array<f32>  X (T, cols); rows whose id is outside this piece are left alone
//   4 p:   Params
// Dispatch: (ceil(groups/WG), T, 1) workgroups of WG (64); one invocation
// writes one group of 32 columns of one token.

struct Params {
    n_rows: u32,
    cols: u32,
    groups: u32,
    scale_base: u32,
    row0: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    w0 = 0u;
    let g = gid.x;
    let t = gid.y;
    let id = ids[t];
    if (g >= p.groups || id < p.row0 || id >= p.row0 + p.n_rows) {
        return;
    }
    let r = id - p.row0;
    let c0 = g * 32u;
    if (is_ggml()) {
        ggml_group(r, g, p.cols);
        for (var k = 0u; k < 32u; k++) {
            out[t * p.cols + c0 + k] = gq[k];
        }
        return;
    }
    var s = 1.0;
    if (is_quantized()) {
        s = group_scale(r, g, p.groups, p.scale_base);
    }
    for (var k = 0u; k < min(32u, p.cols - c0); k++) {
        out[t * p.cols + c0 + k] = weight_at(r, g, k, p.cols, p.groups) * s;
    }
}
