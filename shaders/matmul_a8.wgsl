// matmul_a8.wgsl — matmul.wgsl's product with 8-bit activations: Y = X @
// Wᵀ + b with X rounded to 8-bit blocks of 32 (quantize.wgsl) and each
// block's products summed in integers, four at a time with dot4I8Packed,
// for the formats with integer codes: quant's q8, q6 and q4, ggml's Q8_0
// and Q4_0 (shaders.Format.A8). The order is the CPU engine's with 8-bit
// activations (internal/engine/internal/cpu's a8.go, llama.cpp's CPU arithmetic):
// for a row with codes c_j and block scales s_b, and a token rounded to
// q_j with block scales dx_b,
//   S_b = Σ_j c_j · q_j                   (integers: exact in any order)
//   lane b mod 16 += f32(S_b) · (s_b · dx_b), the lanes from +0
//   y = the 16 lanes added in kernel.go's tree (lanes i and i+8, then
//       i and i+4, …), + the bias
// Codes stored unsigned (q4: 0..15, q6: 0..63, Q4_0: 0..15) enter the dot
// as they are and their offset comes off whole: S_b = Σ u_j q_j − o·Σ_j q_j.
// Every (row, token) is these operations in this order in both entry
// points, so decode equals teacher forcing bit for bit.
//
// Bindings (group 0), besides matmul.wgsl's w (0), y (2), b (3), p (4)
// (p.x_off unused: X's rows start at token 0) and the put that follows
// (matmul_out.wgsl, or matmul_stacked.wgsl's 6 and 7):
//   8 xq: array<u32>        quantize.wgsl's words, token t's from t*cols/2
//   9 xd: array<vec2<f32>>  its (dx, Σq) per block, token t's from t*groups
// Entry points (cols a multiple of 32):
// a8rows4 (one token, z = T) and a8rows4x8 (eight tokens per invocation,
// each block of the four rows' codes read once for the eight), dispatched
// as rows4 and rows4x8: invocation i of workgroup (x, y, z) computing rows
// 4((y*GRID_X + x)*WG + i) .. +3. Both hold each row's 16 lanes one after
// another, in the tree's leaf order (0, 8, 4, 12, 2, …: lane
// reverseBits(m) for m = 0..15), adding each finished pair of subtrees at
// once, so that five partial sums stand in for the 16. They are for
// software adapters, and for prefill everywhere.
// a8main (one token, z = T) is main's shape, for decode on a real GPU,
// where four rows an invocation leave most of it idle (896 rows are 224
// invocations): each row's 16 lanes are 16 invocations, lane l summing
// blocks l, l+16, …, and lanes_sum adds them in the same tree. Dispatch
// (min(B, GRID_X), ceil(B/GRID_X), T) workgroups, B = ceil(n_rows/(WG/16)).

@group(0) @binding(8) var<storage, read> xq: array<u32>;
@group(0) @binding(9) var<storage, read> xd: array<vec2<f32>>;

const A8_LANES: u32 = 16u;

@compute @workgroup_size(WG)
fn a8rows4(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    w0 = 0u;
    let n = ((wid.y * GRID_X + wid.x) * WG + lid) * 4u;
    let t = wid.z;
    if (n >= p.n_rows) {
        return;
    }
    let r = min(vec4<u32>(n) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(p.n_rows - 1u));
    var tree = array<vec4<f32>, 5>();
    for (var m = 0u; m < A8_LANES; m++) {
        var lane = vec4<f32>();
        for (var g = reverseBits(m) >> 28u; g < p.groups; g += A8_LANES) {
            let xv = a8_x(t, g);
            let d = xd[t * p.groups + g];
            for (var i = 0u; i < 4u; i++) {
                lane[i] += a8_term(a8_dot(a8_codes(r[i], g), xv), a8_scale(r[i], g), d);
            }
        }
        // Leaf m closes as many subtrees as m has trailing ones.
        var depth = countOneBits(m);
        for (var k = m; (k & 1u) == 1u; k >>= 1u) {
            depth--;
            lane = tree[depth] + lane;
        }
        tree[depth] = lane;
    }
    put4(n, t, tree[0]);
}

const A8_ROWS: u32 = WG / A8_LANES;

@compute @workgroup_size(WG)
fn a8main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    w0 = 0u;
    let n = (wid.y * GRID_X + wid.x) * A8_ROWS + lid / A8_LANES;
    let t = wid.z;
    // Rows past n_rows repeat the last one: every invocation reaches
    // lanes_sum's barriers.
    let r = min(n, p.n_rows - 1u);
    var lane = 0.0;
    for (var g = lid % A8_LANES; g < p.groups; g += A8_LANES) {
        lane += a8_term(a8_dot(a8_codes(r, g), a8_x(t, g)), a8_scale(r, g), xd[t * p.groups + g]);
    }
    let v = lanes_sum(lane, lid, A8_LANES);
    if (lid % A8_LANES == 0u && n < p.n_rows) {
        put_row(n, t, v);
    }
}

@compute @workgroup_size(WG)
fn a8rows4x8(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    w0 = 0u;
    let n = ((wid.y * GRID_X + wid.x) * WG + lid) * 4u;
    let t0 = wid.z * 8u;
    if (n >= p.n_rows) {
        return;
    }
    let r = min(vec4<u32>(n) + vec4<u32>(0u, 1u, 2u, 3u), vec4<u32>(p.n_rows - 1u));
    // Row i, token j: [i][j / 4][j % 4], as rows4x8 holds them.
    var tree = array<array<mat2x4<f32>, 4>, 5>();
    for (var m = 0u; m < A8_LANES; m++) {
        var lane = array<mat2x4<f32>, 4>();
        for (var g = reverseBits(m) >> 28u; g < p.groups; g += A8_LANES) {
            var codes = array<array<u32, 8>, 4>();
            var scale = vec4<f32>();
            for (var i = 0u; i < 4u; i++) {
                codes[i] = a8_codes(r[i], g);
                scale[i] = a8_scale(r[i], g);
            }
            for (var j = 0u; j < 8u; j++) {
                let t = min(t0 + j, p.tokens - 1u);
                let xv = a8_x(t, g);
                let d = xd[t * p.groups + g];
                for (var i = 0u; i < 4u; i++) {
                    lane[i][j / 4u][j % 4u] += a8_term(a8_dot(codes[i], xv), scale[i], d);
                }
            }
        }
        var depth = countOneBits(m);
        for (var k = m; (k & 1u) == 1u; k >>= 1u) {
            depth--;
            for (var i = 0u; i < 4u; i++) {
                lane[i] = tree[depth][i] + lane[i];
            }
        }
        tree[depth] = lane;
    }
    put4x8(n, t0, tree[0]);
}

// a8_term is a block's addition to its lane: S_b less the codes' offset
// times Σq (d.y), times s_b · dx_b (d.x).
fn a8_term(s: i32, scale: f32, d: vec2<f32>) -> f32 {
    return f32(s - a8_offset() * i32(d.y)) * (scale * d.x);
}

// a8_offset is what the format's stored codes are above the codes.
fn a8_offset() -> i32 {
    if (FORMAT == Q6) {
        return 32;
    }
    return select(0, 8, FORMAT == Q4 || FORMAT == Q4_0);
}

// a8_x is token t's block g of rounded X in the order that a8_codes lays
// the format's codes: 4-bit codes' order for q4 and q6, columns' else.
fn a8_x(t: u32, g: u32) -> array<u32, 8> {
    var at = t * p.cols / 2u + g * 8u;
    if (FORMAT == Q4 || FORMAT == Q6) {
        at += p.cols / 4u;
    }
    var v = array<u32, 8>();
    for (var k = 0u; k < 8u; k++) {
        v[k] = xq[at + k];
    }
    return v;
}

// a8_dot is Σ_k dot4I8Packed(codes[k], xv[k]): the block's products,
// summed exactly.
fn a8_dot(codes: array<u32, 8>, xv: array<u32, 8>) -> i32 {
    var s = 0;
    for (var k = 0u; k < 8u; k++) {
        s += dot4I8Packed(codes[k], xv[k]);
    }
    return s;
}

// a8_codes is block g of row r's 32 codes (plus the offset), four int8 a
// word: q8 and Q8_0 as stored, in column order; Q4_0's low nibbles
// (columns 0..15) then its high ones (16..31), column order again; q4's
// and q6's per word of eight nibbles, the even columns' codes, then the
// odd ones' (quantize.wgsl's 4-bit codes' order), q6's two high bits
// (two a column, in the group's words 4 and 5) put above their nibbles.
fn a8_codes(r: u32, g: u32) -> array<u32, 8> {
    var c = array<u32, 8>();
    if (FORMAT == Q8) {
        let base = w0 + (r * p.groups + g) * 8u;
        for (var k = 0u; k < 8u; k++) {
            c[k] = w[base + k];
        }
    } else if (FORMAT == Q8_0) {
        let blk = a8_block(r, g) + 2u;
        for (var k = 0u; k < 8u; k++) {
            c[k] = ggml_u32(blk + 4u * k);
        }
    } else if (FORMAT == Q4_0) {
        let blk = a8_block(r, g) + 2u;
        for (var k = 0u; k < 4u; k++) {
            let word = ggml_u32(blk + 4u * k);
            c[k] = word & 0x0f0f0f0fu;
            c[k + 4u] = (word >> 4u) & 0x0f0f0f0fu;
        }
    } else {
        let base = w0 + (r * p.groups + g) * group_words();
        for (var k = 0u; k < 4u; k++) {
            let word = w[base + k];
            c[2u * k] = word & 0x0f0f0f0fu;
            c[2u * k + 1u] = (word >> 4u) & 0x0f0f0f0fu;
            if (FORMAT == Q6) {
                // Column 2i's two bits at 4i, 2i+1's at 4i+2: a nibble
                // each of the pair's, spread to a byte each.
                let h = (w[base + 4u + k / 2u] >> (16u * (k % 2u))) & 0xffffu;
                let e = (h & 0xfu) | ((h & 0xf0u) << 4u) | ((h & 0xf00u) << 8u) | ((h & 0xf000u) << 12u);
                c[2u * k] |= (e & 0x03030303u) << 4u;
                c[2u * k + 1u] |= (e & 0x0c0c0c0cu) << 2u;
            }
        }
    }
    return c;
}

// a8_scale is block g of row r's scale.
fn a8_scale(r: u32, g: u32) -> f32 {
    if (is_ggml()) {
        return ggml_half(a8_block(r, g));
    }
    return group_scale(r, g, p.groups, p.scale_base);
}

// a8_block is the first byte of row r's block g (Q8_0, Q4_0: a block of
// 32 is a group, its f16 scale first).
fn a8_block(r: u32, g: u32) -> u32 {
    return (r * p.groups + g) * ggml_block_bytes();
}
