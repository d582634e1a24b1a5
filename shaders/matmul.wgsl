// matmul.wgsl — Y = X @ Wᵀ + b for one row-piece of a weight matrix, with
// the weights decoded in the loop (weights.wgsl) and f32 accumulation.
//
// Bindings (group 0):
//   0 w: array<u32>   W piece (n_rows, cols) in FORMAT's layout
//   1 x: array<f32>   X (T, cols), row-major, row t at x_off + t*cols
//   2 y: array<f32>   Y, element (t, col0 + n) at y_off + t*ldy + col0 + n
//   3 b: array<f32>   bias for the whole matrix (indexed col0 + n); read only when has_bias
//   4 p: Params
// Dispatch: (min(n_rows, 32768), ceil(n_rows/32768), T) workgroups of 64;
// workgroup (x, y, t) computes output row n = y*32768 + x for token t. Each
// invocation sums whole groups of 32 (quantized formats scale once per
// group), then the workgroup adds its 64 partial sums in a tree.

struct Params {
    n_rows: u32,     // rows of this piece
    cols: u32,       // K
    groups: u32,     // ceil(cols / 32)
    scale_base: u32, // first word of the scale region (quantized formats)
    ldy: u32,        // row stride of Y
    col0: u32,       // column of Y (and bias index) of this piece's row 0
    y_off: u32,      // element offset of Y's row 0
    has_bias: u32,
    x_off: u32,      // element offset of X's row 0
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

const WG: u32 = 64u;
var<workgroup> partial: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n = wid.y * 32768u + wid.x;
    let t = wid.z;
    let in_range = n < p.n_rows; // uniform across the workgroup
    var acc = 0.0;
    if (in_range) {
        let xrow = p.x_off + t * p.cols;
        for (var g = lid; g < p.groups; g += WG) {
            let c0 = g * 32u;
            let len = min(32u, p.cols - c0);
            var s = 0.0;
            for (var k = 0u; k < len; k++) {
                s += weight_at(n, g, k, p.cols, p.groups) * x[xrow + c0 + k];
            }
            if (is_quantized()) {
                s *= group_scale(n, g, p.groups, p.scale_base);
            }
            acc += s;
        }
    }
    partial[lid] = acc;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid < stride) {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    if (lid == 0u && in_range) {
        var v = partial[0];
        if (p.has_bias != 0u) {
            v += b[p.col0 + n];
        }
        y[p.y_off + t * p.ldy + p.col0 + n] = v;
    }
}
