// matmul.wgsl — Y = X @ Wᵀ + b for one row-piece of a weight matrix, with
// the weights decoded in the loop (weights.wgsl) and f32 accumulation.
//
// Bindings (group 0):
//   0 w: array<u32>   W piece (n_rows, cols) in FORMAT's layout
//   1 x: array<f32>   X (T, cols), row-major, row t at x_off + t*cols
//   2 y: array<f32>   Y, element (t, col0 + n) at y_off + t*ldy + col0 + n
//   3 b: array<f32>   bias for the whole matrix (indexed col0 + n); read only when has_bias
//   4 p: Params
// Dispatch: (min(B, GRID_X), ceil(B/GRID_X), T) workgroups of WG (64), where
// B = ceil(n_rows/ROWS): workgroup (x, y, t) computes ROWS output rows
// starting at (y*GRID_X + x)*ROWS for token t, LANES invocations per row.
// Each invocation sums whole groups of 32 (quantized formats scale once per
// group), then each row's LANES partial sums are added in a tree. Few
// invocations per row keep the workgroup count (and barriers) low, which
// software Vulkan (lavapipe) needs; real GPUs would prefer more lanes.

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

const ROWS: u32 = WG / LANES;
var<workgroup> partial: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let lane = lid % LANES;
    let n = (wid.y * GRID_X + wid.x) * ROWS + lid / LANES;
    let t = wid.z;
    let in_range = n < p.n_rows;
    var acc = 0.0;
    if (in_range) {
        let xrow = p.x_off + t * p.cols;
        for (var g = lane; g < p.groups; g += LANES) {
            let c0 = g * 32u;
            var s = 0.0;
            if (c0 + 32u <= p.cols && (FORMAT == F32 || is_quantized() || (n * p.cols) % 2u == 0u)) {
                s = group_dot(n, g, p.cols, p.groups, xrow + c0);
            } else {
                // The short last group, or 16-bit rows that start mid-word.
                for (var k = 0u; k < p.cols - c0 && k < 32u; k++) {
                    s += weight_at(n, g, k, p.cols, p.groups) * x[xrow + c0 + k];
                }
            }
            if (is_quantized()) {
                s *= group_scale(n, g, p.groups, p.scale_base);
            }
            acc += s;
        }
    }
    partial[lid] = acc;
    workgroupBarrier();
    for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
        if (lane < stride) {
            partial[lid] += partial[lid + stride];
        }
        workgroupBarrier();
    }
    if (lane == 0u && in_range) {
        var v = partial[lid];
        if (p.has_bias != 0u) {
            v += b[p.col0 + n];
        }
        y[p.y_off + t * p.ldy + p.col0 + n] = v;
    }
}

// group_dot is Σ_k weight_at(r, g, k) · x[xb + k] over a full group of 32,
// reading each u32 once and decoding all the values it packs. For 16-bit
// formats the group must start on a word (r*cols even).
fn group_dot(r: u32, g: u32, cols: u32, groups: u32, xb: u32) -> f32 {
    var s = 0.0;
    if (FORMAT == F32) {
        let base = r * cols + g * 32u;
        for (var k = 0u; k < 32u; k += 4u) {
            let wv = vec4<f32>(bitcast<f32>(w[base + k]), bitcast<f32>(w[base + k + 1u]),
                               bitcast<f32>(w[base + k + 2u]), bitcast<f32>(w[base + k + 3u]));
            s += dot(wv, vec4<f32>(x[xb + k], x[xb + k + 1u], x[xb + k + 2u], x[xb + k + 3u]));
        }
    } else if (FORMAT == BF16 || FORMAT == F16) {
        let base = (r * cols + g * 32u) / 2u;
        for (var k = 0u; k < 16u; k++) {
            let word = w[base + k];
            var v = vec2<f32>(bitcast<f32>(word << 16u), bitcast<f32>(word & 0xffff0000u));
            if (FORMAT == F16) {
                v = unpack2x16float(word);
            }
            s += dot(v, vec2<f32>(x[xb + 2u * k], x[xb + 2u * k + 1u]));
        }
    } else if (FORMAT == Q8) {
        let base = (r * groups + g) * 8u;
        for (var k = 0u; k < 8u; k++) {
            let q = vec4<f32>(unpack4xI8(w[base + k]));
            s += dot(q, vec4<f32>(x[xb + 4u * k], x[xb + 4u * k + 1u], x[xb + 4u * k + 2u], x[xb + 4u * k + 3u]));
        }
    } else if (FORMAT == Q4) {
        let base = (r * groups + g) * 4u;
        for (var k = 0u; k < 4u; k++) {
            let word = w[base + k];
            for (var j = 0u; j < 8u; j++) {
                s += f32(i32((word >> (4u * j)) & 0xfu) - 8) * x[xb + 8u * k + j];
            }
        }
    } else {
        let base = (r * groups + g) * 6u;
        for (var k = 0u; k < 4u; k++) {
            let word = w[base + k];
            let hi = w[base + 4u + k / 2u] >> (16u * (k % 2u));
            for (var j = 0u; j < 8u; j++) {
                let u = ((word >> (4u * j)) & 0xfu) | (((hi >> (2u * j)) & 0x3u) << 4u);
                s += f32(i32(u) - 32) * x[xb + 8u * k + j];
            }
        }
    }
    return s;
}
