// matmul.wgsl — Y = X @ Wᵀ + b for one row-piece of a weight matrix, with
// the weights decoded in the loop (weights.wgsl) and f32 accumulation; and
// the same for a mixture of experts' routed experts, where the router's
// choice, read from a buffer, picks each token's matrices.
//
// Bindings (group 0):
//   0 w: array<u32>     W piece (n_rows, cols) in FORMAT's layout; for expert,
//                       a bank: experts [first, first+count), each such a
//                       piece, stride words apart
//   1 x: array<f32>     X, row r at x_off + r*cols: (T, cols); for expert's
//                       down projection (x_slot 1), (T, K, cols)
//   2 y: array<f32>     Y, element (r, col0 + n) at y_off + r*ldy + col0 + n,
//                       r = t (main) or t*K + k (expert: (T, K, ldy));
//                       main with interleave = hd: piece row n goes to
//                       column col0 + o(n) instead (below). main, main8,
//                       rows4 and rows4x8 store through put, which this
//                       file leaves to the one that follows it:
//                       matmul_out.wgsl (this Y) or matmul_stacked.wgsl
//                       (a stacked piece's rows to three Ys, bindings 6, 7)
//   3 b: array<f32>     bias for the whole matrix, in Y's column order
//                       (indexed col0 + n, or col0 + o(n)); read only when has_bias (main)
//   4 p: Params
//   5 route: array<u32> expert: (T, K) the experts each token is routed to (route in moe.wgsl)
// A row's LANES partial sums (main, expert) are added by lanes_sum, in
// workgroup memory (matmul_lanes.wgsl) or in a subgroup
// (matmul_subgroup.wgsl): the same additions in the same order.
// Dispatch, main: (min(B, GRID_X), ceil(B/GRID_X), T) workgroups of WG
// (64, or the size shaders.MatmulVariant.Workgroup gives the module),
// where B = ceil(n_rows/ROWS): workgroup (x, y, t) computes ROWS output rows
// starting at (y*GRID_X + x)*ROWS for token t, LANES invocations per row.
// main8 (prefill): (min(B8, GRID_X), ceil(B8/GRID_X), ceil(T/8)) where
// B8 = ceil(n_rows/WG): workgroup (x, y, z) computes WG rows from
// (y*GRID_X + x)*WG, one per invocation, for tokens 8z..8z+7: each group
// of W decoded once and dotted with the eight tokens' X, the sums in a
// mat2x4. Each token's element is the same float operations in the same
// order as main's for that token alone (KV-cache decode, T = 1, must equal
// teacher forcing bit for bit): an invocation sums main's LANES lanes one
// after another (lane l: groups l, l+LANES, … from zero), then adds the
// LANES sums in main's tree.
// rows4 and rows4x8 are main and main8 with four rows per invocation, for
// cols a multiple of 32 only (every group whole: code for the other groups
// in the same shader, even never run, made rows4 take 5.2 ms instead of
// 3.2 on a q4 4864x896 matrix on lavapipe):
// (min(B4, GRID_X), ceil(B4/GRID_X), T or ceil(T/8)) where B4 =
// ceil(n_rows/(4*WG)), invocation i of workgroup (x, y, z) computing rows
// 4((y*GRID_X + x)*WG + i) .. +3, each of them in main8's order, so again
// the same bits. They are for software adapters (lavapipe, SwiftShader),
// which run a workgroup's invocations as SIMD lanes and make every load
// from a buffer a loop over the lanes, even where all lanes read the same
// element: there the loads of X cost most (main8 makes one per product),
// and rows4 shares each one among four rows. On lavapipe, at 4864x896,
// rows4 takes 0.3–0.5 of main's time and rows4x8 0.3–0.4 of main8's
// (internal/engine/internal/gpuengine's BenchmarkPrefillKernel).
// The shader compiler may fuse a product into a sum (lavapipe does,
// depending on the expression's shape): every kernel writes each
// product-sum in the same shape, 16-bit weights' with an explicit fma.
// Tokens past p.tokens read token p.tokens-1's X and are not written; rows
// past n_rows (rows4, rows4x8) read row n_rows-1 and are not written.
// expert: (B, K, T): workgroup (x, k, t) computes rows from x*ROWS of
// token t's k-th expert when the bank holds it, and returns at once when
// it does not (every bank of a matrix is dispatched; each slot's expert is
// in exactly one of them). expert4: see below.
// Each invocation sums whole groups of 32 (quantized formats scale once per
// group; ggml's block types decode a group to its 32 floats, ggml.wgsl),
// then each row's LANES partial sums are added in a tree. Few
// invocations per row keep the workgroup count (and barriers) low, which
// software Vulkan (lavapipe) needs; real GPUs would prefer more lanes.
// Interleave (all but expert): llama.cpp's converter permutes the rows of
// Llama's q_proj and k_proj within each head of hd rows, so that GGUF row
// j of a head holds Hugging Face's row (j%2)*(hd/2) + j/2. With interleave
// = hd (0: none; the piece starting on a head boundary), piece row n = h*hd
// + j is written to o(n) = h*hd + (j%2)*(hd/2) + j/2: Y comes out in
// Hugging Face's order, and RoPE's rotate_half pairs hold, without
// permuting the weights.

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
    // expert only:
    first: u32,      // the bank's first expert
    count: u32,      // experts in the bank
    stride: u32,     // words from one expert's piece to the next
    topk: u32,       // K, route slots per token
    x_slot: u32,     // 1: X has a row per (token, slot); 0: one per token
    // all but expert:
    interleave: u32, // head dim of the q/k row interleave; 0 for none
    tokens: u32,     // main8 and rows4x8 only: T
    // main, main8, rows4 and rows4x8 of a stacked piece (matmul_stacked.wgsl):
    plain_from: u32, // rows from here on are not interleaved (v below q and k); 0: all are
    split1: u32,     // first row of the second matrix
    split2: u32,     // first row of the third; 0: none
    y1_off: u32,     // the second matrix's Y: element (t, c) at y1_off + t*ld1 + c
    ld1: u32,
    y2_off: u32,     // the third's
    ld2: u32,
    // main, main8, rows4 and rows4x8 of one Y (matmul_out.wgsl):
    add: u32,        // 1: Y += the product (the residual stream), else Y =
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;
@group(0) @binding(5) var<storage, read> route: array<u32>;

const ROWS: u32 = WG / LANES;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    w0 = 0u;
    let n = (wid.y * GRID_X + wid.x) * ROWS + lid / LANES;
    let t = wid.z;
    let v = row_dot(n, lid, p.x_off + t * p.cols);
    if (lid % LANES == 0u && n < p.n_rows) {
        put_row(n, t, v);
    }
}

@compute @workgroup_size(WG)
fn main8(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    w0 = 0u;
    let n = (wid.y * GRID_X + wid.x) * WG + lid;
    let t0 = wid.z * 8u;
    let last = vec4<u32>(p.tokens - 1u);
    let xa = vec4<u32>(p.x_off) + min(vec4<u32>(t0) + vec4<u32>(0u, 1u, 2u, 3u), last) * p.cols;
    let xc = vec4<u32>(p.x_off) + min(vec4<u32>(t0) + vec4<u32>(4u, 5u, 6u, 7u), last) * p.cols;
    if (n < p.n_rows) {
        // main's order: lane l's sum of groups l, l+LANES, … from zero,
        // then main's tree over the LANES sums, here in one invocation.
        var part = array<mat2x4<f32>, LANES>();
        for (var l = 0u; l < LANES; l++) {
            var acc = mat2x4<f32>();
            for (var g = l; g < p.groups; g += LANES) {
                acc += group_sum8(n, g, xa, xc);
            }
            part[l] = acc;
        }
        for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
            for (var i = 0u; i < stride; i++) {
                part[i] += part[i + stride];
            }
        }
        let col = out_col(n);
        var o = part[0];
        if (p.has_bias != 0u) {
            let bias = vec4<f32>(b[p.col0 + col]);
            o += mat2x4<f32>(bias, bias);
        }
        for (var i = 0u; i < 8u && t0 + i < p.tokens; i++) {
            put(col, t0 + i, o[i / 4u][i % 4u]);
        }
    }
}

@compute @workgroup_size(WG)
fn rows4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    w0 = 0u;
    let n = ((wid.y * GRID_X + wid.x) * WG + lid) * 4u;
    let t = wid.z;
    if (n < p.n_rows) {
        put4(n, t, rows4_dot(n, p.x_off + t * p.cols));
    }
}

// put_row stores row n's sum v for token t, with the bias.
fn put_row(n: u32, t: u32, v: f32) {
    let col = out_col(n);
    var o = v;
    if (p.has_bias != 0u) {
        o += b[p.col0 + col];
    }
    put(col, t, o);
}

// put4 stores rows n..n+3 (those below n_rows) of token t, row n+i's sum
// in v[i], with the bias.
fn put4(n: u32, t: u32, v: vec4<f32>) {
    for (var i = 0u; i < 4u && n + i < p.n_rows; i++) {
        put_row(n + i, t, v[i]);
    }
}

// put4x8 is put4 for tokens t0..t0+7 (those below p.tokens), row n+i's
// sums in v[i] as main8 holds them (token j at [j / 4][j % 4]).
fn put4x8(n: u32, t0: u32, v: array<mat2x4<f32>, 4>) {
    for (var q = 0u; q < 4u && n + q < p.n_rows; q++) {
        let col = out_col(n + q);
        var o = v[q];
        if (p.has_bias != 0u) {
            let bias = vec4<f32>(b[p.col0 + col]);
            o += mat2x4<f32>(bias, bias);
        }
        for (var i = 0u; i < 8u && t0 + i < p.tokens; i++) {
            put(col, t0 + i, o[i / 4u][i % 4u]);
        }
    }
}

// rows4_dot is W rows n..n+3 · X from element xrow (n < n_rows; rows past
// n_rows repeat the last one), each in main's order, as main8 sums it.
fn rows4_dot(n: u32, xrow: u32) -> vec4<f32> {
    let r = min(vec4<u32>(n) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(p.n_rows - 1u));
    var part = array<vec4<f32>, LANES>();
    for (var l = 0u; l < LANES; l++) {
        var acc = vec4<f32>();
        for (var g = l; g < p.groups; g += LANES) {
            acc += group_sum4(r, g, xrow);
        }
        part[l] = acc;
    }
    for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
        for (var i = 0u; i < stride; i++) {
            part[i] += part[i + stride];
        }
    }
    return part[0];
}

// group_sum4 is group_sum for rows r (cols a multiple of 32): the same
// products and sums per row, each element of X loaded once for the four.
fn group_sum4(r: vec4<u32>, g: u32, xrow: u32) -> vec4<f32> {
    let xb = xrow + g * 32u;
    var s = vec4<f32>();
    if (is_ggml()) {
        // As ggml_dot, row by row, X's group loaded once.
        var xg = array<vec4<f32>, 8>();
        for (var k = 0u; k < 8u; k++) {
            xg[k] = xrun(xb + 4u * k);
        }
        for (var i = 0u; i < 4u; i++) {
            ggml_group(r[i], g, p.cols);
            for (var k = 0u; k < 32u; k += 4u) {
                s[i] += dot(gqrun(k), xg[k / 4u]);
            }
        }
        return s;
    }
    if (FORMAT == F32) {
        let base = vec4<u32>(w0) + r * p.cols + vec4<u32>(g * 32u);
        for (var k = 0u; k < 32u; k += 4u) {
            let xv = xrun(xb + k);
            s += vec4<f32>(dot(wrun(base.x + k), xv), dot(wrun(base.y + k), xv), dot(wrun(base.z + k), xv), dot(wrun(base.w + k), xv));
        }
    } else if (FORMAT == BF16 || FORMAT == F16) {
        let base = vec4<u32>(w0) + (r * p.cols + vec4<u32>(g * 32u)) / 2u;
        for (var k = 0u; k < 16u; k++) {
            let v = half2x4(words4(base, k));
            s += fma(v[1], vec4<f32>(x[xb + 2u * k + 1u]), v[0] * x[xb + 2u * k]);
        }
    } else if (FORMAT == Q8) {
        let base = quant_base4(r, g);
        for (var k = 0u; k < 8u; k++) {
            let xv = xrun(xb + 4u * k);
            s += vec4<f32>(dot(vec4<f32>(unpack4xI8(w[base.x + k])), xv), dot(vec4<f32>(unpack4xI8(w[base.y + k])), xv),
                dot(vec4<f32>(unpack4xI8(w[base.z + k])), xv), dot(vec4<f32>(unpack4xI8(w[base.w + k])), xv));
        }
    } else {
        // q4 and q6: eight codes a word.
        let base = quant_base4(r, g);
        for (var k = 0u; k < 4u; k++) {
            let word = words4(base, k);
            let hi = q6high4(base, k);
            for (var j = 0u; j < 8u; j++) {
                s += codes4(word, hi, j) * x[xb + 8u * k + j];
            }
        }
    }
    if (is_quantized()) {
        s *= scales4(r, g);
    }
    return s;
}

// quant_base4 is the first word of group g of rows r (quant's formats).
fn quant_base4(r: vec4<u32>, g: u32) -> vec4<u32> {
    return vec4<u32>(w0) + (r * p.groups + vec4<u32>(g)) * group_words();
}

// words4 is word k of W from each of base.
fn words4(base: vec4<u32>, k: u32) -> vec4<u32> {
    return vec4<u32>(w[base.x + k], w[base.y + k], w[base.z + k], w[base.w + k]);
}

// q6high4 is the q6 high bits for word k of the groups from base, as
// group_dot's hi (0 for q4).
fn q6high4(base: vec4<u32>, k: u32) -> vec4<u32> {
    if (FORMAT != Q6) {
        return vec4<u32>();
    }
    return words4(base, 4u + k / 2u) >> vec4<u32>(16u * (k % 2u));
}

// codes4 is code j of q4 or q6 words of four rows (hi: q6high4).
fn codes4(word: vec4<u32>, hi: vec4<u32>, j: u32) -> vec4<f32> {
    if (FORMAT == Q4) {
        return q4code4(word, j);
    }
    return q6code4(word, hi, j);
}

// scales4 is the scales of group g of rows r.
fn scales4(r: vec4<u32>, g: u32) -> vec4<f32> {
    return vec4<f32>(group_scale(r.x, g, p.groups, p.scale_base), group_scale(r.y, g, p.groups, p.scale_base),
        group_scale(r.z, g, p.groups, p.scale_base), group_scale(r.w, g, p.groups, p.scale_base));
}

@compute @workgroup_size(WG)
fn rows4x8(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    w0 = 0u;
    let n = ((wid.y * GRID_X + wid.x) * WG + lid) * 4u;
    let t0 = wid.z * 8u;
    let last = vec4<u32>(p.tokens - 1u);
    let xa = vec4<u32>(p.x_off) + min(vec4<u32>(t0) + vec4<u32>(0u, 1u, 2u, 3u), last) * p.cols;
    let xc = vec4<u32>(p.x_off) + min(vec4<u32>(t0) + vec4<u32>(4u, 5u, 6u, 7u), last) * p.cols;
    if (n < p.n_rows) {
        let r = min(vec4<u32>(n) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(p.n_rows - 1u));
        // main's order, row by row and token by token: as main8.
        var part = array<array<mat2x4<f32>, 4>, LANES>();
        for (var l = 0u; l < LANES; l++) {
            var acc = array<mat2x4<f32>, 4>();
            for (var g = l; g < p.groups; g += LANES) {
                let s = group_sum4x8(r, g, xa, xc);
                for (var i = 0u; i < 4u; i++) {
                    acc[i] += s[i];
                }
            }
            part[l] = acc;
        }
        for (var stride = LANES / 2u; stride > 0u; stride /= 2u) {
            for (var i = 0u; i < stride; i++) {
                for (var q = 0u; q < 4u; q++) {
                    part[i][q] += part[i + stride][q];
                }
            }
        }
        put4x8(n, t0, part[0]);
    }
}

// group_sum4x8 is group_sum8 for rows r (cols a multiple of 32): the same
// products and sums per row and token, each element of X loaded once for
// the four rows.
fn group_sum4x8(r: vec4<u32>, g: u32, xa: vec4<u32>, xc: vec4<u32>) -> array<mat2x4<f32>, 4> {
    let c0 = vec4<u32>(g * 32u);
    let ya = xa + c0;
    let yc = xc + c0;
    var s = array<mat2x4<f32>, 4>();
    if (is_ggml()) {
        // As ggml_dot8, row by row, X's groups loaded once.
        var xg = array<array<vec4<f32>, 8>, 8>();
        for (var k = 0u; k < 8u; k++) {
            xg[k] = xruns8(ya, yc, 4u * k);
        }
        for (var i = 0u; i < 4u; i++) {
            ggml_group(r[i], g, p.cols);
            for (var k = 0u; k < 32u; k += 4u) {
                s[i] += dots8(gqrun(k), xg[k / 4u]);
            }
        }
        return s;
    }
    if (FORMAT == F32) {
        let base = vec4<u32>(w0) + r * p.cols + c0;
        for (var k = 0u; k < 32u; k += 4u) {
            let xr = xruns8(ya, yc, k);
            for (var i = 0u; i < 4u; i++) {
                s[i] += dots8(wrun(base[i] + k), xr);
            }
        }
    } else if (FORMAT == BF16 || FORMAT == F16) {
        let base = vec4<u32>(w0) + (r * p.cols + c0) / 2u;
        for (var k = 0u; k < 16u; k++) {
            let lo = x8(ya, yc, 2u * k);
            let hi = x8(ya, yc, 2u * k + 1u);
            for (var i = 0u; i < 4u; i++) {
                s[i] += fma2x8(half2(w[base[i] + k]), lo, hi);
            }
        }
    } else if (FORMAT == Q8) {
        let base = quant_base4(r, g);
        for (var k = 0u; k < 8u; k++) {
            let xr = xruns8(ya, yc, 4u * k);
            for (var i = 0u; i < 4u; i++) {
                s[i] += dots8(vec4<f32>(unpack4xI8(w[base[i] + k])), xr);
            }
        }
    } else {
        let base = quant_base4(r, g);
        for (var k = 0u; k < 4u; k++) {
            let word = words4(base, k);
            let hi = q6high4(base, k);
            for (var j = 0u; j < 8u; j++) {
                let xv = x8(ya, yc, 8u * k + j);
                let q = codes4(word, hi, j);
                for (var i = 0u; i < 4u; i++) {
                    s[i] += q[i] * xv;
                }
            }
        }
    }
    if (is_quantized()) {
        let sc = scales4(r, g);
        for (var i = 0u; i < 4u; i++) {
            s[i] *= sc[i];
        }
    }
    return s;
}

// out_col is the column (less col0) of Y that piece row n goes to: n, or
// o(n) with interleave.
fn out_col(n: u32) -> u32 {
    if (p.interleave == 0u || (p.plain_from != 0u && n >= p.plain_from)) {
        return n;
    }
    let j = n % p.interleave;
    return n - j + (j % 2u) * (p.interleave / 2u) + j / 2u;
}

@compute @workgroup_size(WG)
fn expert(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    w0 = 0u;
    let k = wid.y;
    let t = wid.z;
    let slot = t * p.topk + k;
    // The same for the whole workgroup, so returning keeps the barriers
    // in uniform control flow.
    let id = route[slot];
    if (id < p.first || id - p.first >= p.count) {
        return;
    }
    w0 = (id - p.first) * p.stride;
    let n = wid.x * ROWS + lid / LANES;
    let v = row_dot(n, lid, p.x_off + select(t, slot, p.x_slot != 0u) * p.cols);
    if (lid % LANES == 0u && n < p.n_rows) {
        y[p.y_off + slot * p.ldy + p.col0 + n] = v;
    }
}

// expert4 is expert with rows4's four rows per invocation (cols a
// multiple of 32), for software adapters: (ceil(n_rows/(4*WG)), K, T).
@compute @workgroup_size(WG)
fn expert4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    w0 = 0u;
    let slot = wid.z * p.topk + wid.y;
    let id = route[slot];
    let n = (wid.x * WG + lid) * 4u;
    if (id < p.first || id - p.first >= p.count || n >= p.n_rows) {
        return;
    }
    w0 = (id - p.first) * p.stride;
    let v = rows4_dot(n, p.x_off + select(wid.z, slot, p.x_slot != 0u) * p.cols);
    for (var i = 0u; i < 4u && n + i < p.n_rows; i++) {
        y[p.y_off + slot * p.ldy + p.col0 + n + i] = v[i];
    }
}

// row_dot is W row n · X from element xrow, in lane 0 of the row's
// LANES invocations (rows past n_rows give 0). Every invocation of the
// workgroup must call it: it holds barriers.
fn row_dot(n: u32, lid: u32, xrow: u32) -> f32 {
    var acc = 0.0;
    if (n < p.n_rows) {
        for (var g = lid % LANES; g < p.groups; g += LANES) {
            acc += group_sum(n, g, xrow);
        }
    }
    return lanes_sum(acc, lid, LANES);
}

// group_sum is W row n's group g · X's from element xrow + g*32, scaled.
fn group_sum(n: u32, g: u32, xrow: u32) -> f32 {
    let c0 = g * 32u;
    var s = 0.0;
    if (is_ggml()) {
        s = ggml_dot(n, g, p.cols, xrow + c0);
    } else if (whole_group(n, g)) {
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
    return s;
}

// group_sum8 is group_sum for main8's eight tokens, their X rows from
// elements xa and xc.
fn group_sum8(n: u32, g: u32, xa: vec4<u32>, xc: vec4<u32>) -> mat2x4<f32> {
    let c0 = vec4<u32>(g * 32u);
    var s = mat2x4<f32>();
    if (is_ggml()) {
        s = ggml_dot8(n, g, p.cols, xa + c0, xc + c0);
    } else if (whole_group(n, g)) {
        s = group_dot8(n, g, p.cols, p.groups, xa + c0, xc + c0);
    } else {
        for (var k = 0u; k < p.cols - g * 32u && k < 32u; k++) {
            s += weight_at(n, g, k, p.cols, p.groups) * x8(xa + c0, xc + c0, k);
        }
    }
    if (is_quantized()) {
        s *= group_scale(n, g, p.groups, p.scale_base);
    }
    return s;
}

// whole_group is whether group g of row n takes group_dot: 32 weights,
// and for 16-bit formats starting on a word.
fn whole_group(n: u32, g: u32) -> bool {
    return g * 32u + 32u <= p.cols && (FORMAT == F32 || is_quantized() || (n * p.cols) % 2u == 0u);
}


// The helpers below serve main8, whose eight tokens' X rows start at
// elements xa (tokens 0..3) and xc (4..7): their sums are a mat2x4, token
// i in column i/4, row i%4.

// x4 is X at four elements, one per token.
fn x4(i: vec4<u32>) -> vec4<f32> {
    return vec4<f32>(x[i.x], x[i.y], x[i.z], x[i.w]);
}

// x8 is element k of each token's X row.
fn x8(xa: vec4<u32>, xc: vec4<u32>, k: u32) -> mat2x4<f32> {
    return mat2x4<f32>(x4(xa + vec4<u32>(k)), x4(xc + vec4<u32>(k)));
}

// xrun is X's four elements from i on (one token's).
fn xrun(i: u32) -> vec4<f32> {
    return vec4<f32>(x[i], x[i + 1u], x[i + 2u], x[i + 3u]);
}

// dot8 is v · X's four elements from k on, for each of the eight tokens:
// dots8 of xruns8.
fn dot8(v: vec4<f32>, xa: vec4<u32>, xc: vec4<u32>, k: u32) -> mat2x4<f32> {
    return dots8(v, xruns8(xa, xc, k));
}

// xruns8 is each token's four elements of X from k on.
fn xruns8(xa: vec4<u32>, xc: vec4<u32>, k: u32) -> array<vec4<f32>, 8> {
    return array<vec4<f32>, 8>(xrun(xa.x + k), xrun(xa.y + k), xrun(xa.z + k), xrun(xa.w + k),
        xrun(xc.x + k), xrun(xc.y + k), xrun(xc.z + k), xrun(xc.w + k));
}

// dots8 is v · each token's run xr[i], as group_dot computes it.
fn dots8(v: vec4<f32>, xr: array<vec4<f32>, 8>) -> mat2x4<f32> {
    return mat2x4<f32>(vec4<f32>(dot(v, xr[0]), dot(v, xr[1]), dot(v, xr[2]), dot(v, xr[3])),
        vec4<f32>(dot(v, xr[4]), dot(v, xr[5]), dot(v, xr[6]), dot(v, xr[7])));
}

// dot2x8 is v · X's two elements from k on, for each token, as group_dot
// computes it: fma2x8 of the tokens' elements k and k+1.
fn dot2x8(v: vec2<f32>, xa: vec4<u32>, xc: vec4<u32>, k: u32) -> mat2x4<f32> {
    return fma2x8(v, x8(xa, xc, k), x8(xa, xc, k + 1u));
}

fn fma2x8(v: vec2<f32>, lo: mat2x4<f32>, hi: mat2x4<f32>) -> mat2x4<f32> {
    return mat2x4<f32>(fma(vec4<f32>(v.y), hi[0], v.x * lo[0]), fma(vec4<f32>(v.y), hi[1], v.x * lo[1]));
}

// wrun is W's four float32 words from element base.
fn wrun(base: u32) -> vec4<f32> {
    return vec4<f32>(bitcast<f32>(w[base]), bitcast<f32>(w[base + 1u]), bitcast<f32>(w[base + 2u]), bitcast<f32>(w[base + 3u]));
}

// half2 is the two bf16 or f16 weights a word packs, the low half first.
fn half2(word: u32) -> vec2<f32> {
    if (FORMAT == F16) {
        return unpack2x16float(word);
    }
    return vec2<f32>(bitcast<f32>(word << 16u), bitcast<f32>(word & 0xffff0000u));
}

// half2x4 is half2 of four words: the low halves, then the high ones.
fn half2x4(word: vec4<u32>) -> mat2x4<f32> {
    if (FORMAT == F16) {
        let a = unpack2x16float(word.x);
        let b = unpack2x16float(word.y);
        let c = unpack2x16float(word.z);
        let d = unpack2x16float(word.w);
        return mat2x4<f32>(vec4<f32>(a.x, b.x, c.x, d.x), vec4<f32>(a.y, b.y, c.y, d.y));
    }
    return mat2x4<f32>(bitcast<vec4<f32>>(word << vec4<u32>(16u)), bitcast<vec4<f32>>(word & vec4<u32>(0xffff0000u)));
}

// q4code is code j of a q4 word (nibble j, less 8); q6code is code j of a
// q6 word, its two high bits from hi (less 32).
fn q4code(word: u32, j: u32) -> f32 {
    return f32(i32((word >> (4u * j)) & 0xfu) - 8);
}

fn q6code(word: u32, hi: u32, j: u32) -> f32 {
    return f32(i32(((word >> (4u * j)) & 0xfu) | (((hi >> (2u * j)) & 0x3u) << 4u)) - 32);
}

// q4code4 and q6code4 are q4code and q6code of four rows' words.
fn q4code4(word: vec4<u32>, j: u32) -> vec4<f32> {
    return vec4<f32>(vec4<i32>((word >> vec4<u32>(4u * j)) & vec4<u32>(0xfu)) - vec4<i32>(8));
}

fn q6code4(word: vec4<u32>, hi: vec4<u32>, j: u32) -> vec4<f32> {
    let lo = (word >> vec4<u32>(4u * j)) & vec4<u32>(0xfu);
    return vec4<f32>(vec4<i32>(lo | (((hi >> vec4<u32>(2u * j)) & vec4<u32>(0x3u)) << vec4<u32>(4u))) - vec4<i32>(32));
}

// gqrun is the decoded ggml group's four floats from k on.
fn gqrun(k: u32) -> vec4<f32> {
    return vec4<f32>(gq[k], gq[k + 1u], gq[k + 2u], gq[k + 3u]);
}

// group_dot is Σ_k weight_at(r, g, k) · x[xb + k] over a full group of 32,
// reading each u32 once and decoding all the values it packs. For 16-bit
// formats the group must start on a word (r*cols even).
fn group_dot(r: u32, g: u32, cols: u32, groups: u32, xb: u32) -> f32 {
    var s = 0.0;
    if (FORMAT == F32) {
        let base = w0 + r * cols + g * 32u;
        for (var k = 0u; k < 32u; k += 4u) {
            s += dot(wrun(base + k), xrun(xb + k));
        }
    } else if (FORMAT == BF16 || FORMAT == F16) {
        let base = w0 + (r * cols + g * 32u) / 2u;
        for (var k = 0u; k < 16u; k++) {
            let v = half2(w[base + k]);
            // Not dot(v, …): lavapipe fused dot's two products in one
            // order here and in the other in main8 (dot2x8), an ulp apart.
            s += fma(v.y, x[xb + 2u * k + 1u], v.x * x[xb + 2u * k]);
        }
    } else if (FORMAT == Q8) {
        let base = w0 + (r * groups + g) * 8u;
        for (var k = 0u; k < 8u; k++) {
            let q = vec4<f32>(unpack4xI8(w[base + k]));
            s += dot(q, xrun(xb + 4u * k));
        }
    } else if (FORMAT == Q4) {
        let base = w0 + (r * groups + g) * 4u;
        for (var k = 0u; k < 4u; k++) {
            let word = w[base + k];
            for (var j = 0u; j < 8u; j++) {
                s += q4code(word, j) * x[xb + 8u * k + j];
            }
        }
    } else {
        let base = w0 + (r * groups + g) * 6u;
        for (var k = 0u; k < 4u; k++) {
            let word = w[base + k];
            let hi = w[base + 4u + k / 2u] >> (16u * (k % 2u));
            for (var j = 0u; j < 8u; j++) {
                s += q6code(word, hi, j) * x[xb + 8u * k + j];
            }
        }
    }
    return s;
}

// group_dot8 is group_dot for main8's eight tokens, their groups of X from
// elements xa and xc: the same products and sums per token.
fn group_dot8(r: u32, g: u32, cols: u32, groups: u32, xa: vec4<u32>, xc: vec4<u32>) -> mat2x4<f32> {
    var s = mat2x4<f32>();
    if (FORMAT == F32) {
        let base = w0 + r * cols + g * 32u;
        for (var k = 0u; k < 32u; k += 4u) {
            s += dot8(wrun(base + k), xa, xc, k);
        }
    } else if (FORMAT == BF16 || FORMAT == F16) {
        let base = w0 + (r * cols + g * 32u) / 2u;
        for (var k = 0u; k < 16u; k++) {
            s += dot2x8(half2(w[base + k]), xa, xc, 2u * k);
        }
    } else if (FORMAT == Q8) {
        let base = w0 + (r * groups + g) * 8u;
        for (var k = 0u; k < 8u; k++) {
            s += dot8(vec4<f32>(unpack4xI8(w[base + k])), xa, xc, 4u * k);
        }
    } else if (FORMAT == Q4) {
        let base = w0 + (r * groups + g) * 4u;
        for (var k = 0u; k < 4u; k++) {
            let word = w[base + k];
            for (var j = 0u; j < 8u; j++) {
                s += q4code(word, j) * x8(xa, xc, 8u * k + j);
            }
        }
    } else {
        let base = w0 + (r * groups + g) * 6u;
        for (var k = 0u; k < 4u; k++) {
            let word = w[base + k];
            let hi = w[base + 4u + k / 2u] >> (16u * (k % 2u));
            for (var j = 0u; j < 8u; j++) {
                s += q6code(word, hi, j) * x8(xa, xc, 8u * k + j);
            }
        }
    }
    return s;
}

// ggml_dot is the same for ggml's block types (cols a multiple of 32, so
// every group is whole): the group's 32 decoded floats · X.
fn ggml_dot(r: u32, g: u32, cols: u32, xb: u32) -> f32 {
    ggml_group(r, g, cols);
    var s = 0.0;
    for (var k = 0u; k < 32u; k += 4u) {
        s += dot(gqrun(k), xrun(xb + k));
    }
    return s;
}

// ggml_dot8 is ggml_dot for main8's eight tokens, their groups of X from
// elements xa and xc.
fn ggml_dot8(r: u32, g: u32, cols: u32, xa: vec4<u32>, xc: vec4<u32>) -> mat2x4<f32> {
    ggml_group(r, g, cols);
    var s = mat2x4<f32>();
    for (var k = 0u; k < 32u; k += 4u) {
        s += dot8(gqrun(k), xa, xc, k);
    }
    return s;
}
