// weights.wgsl — decoding one group of 32 weights, shared by every kernel
// that reads a weight matrix (prepended to matmul.wgsl and embed.wgsl).
//
// The Go side prepends `const FORMAT: u32 = N;` (see shaders.go), so each
// pipeline decodes one format and the branches below fold away.
//
// A weight matrix W (rows, cols) arrives as `array<u32>` in one of:
//   FORMAT 0 F32:  word r*cols + c is the float's bits
//   FORMAT 1 BF16: element e = r*cols + c is half e%2 of word e/2 (low half first)
//   FORMAT 2 F16:  same packing as BF16, IEEE half precision
//   FORMAT 3 Q8, 4 Q6, 5 Q4: package quant's layout: a quant region of
//     rows × G groups × WQ words, then a scale region of rows × ceil(G/2)
//     words holding one f16 per group (group g: low half of word g/2 when
//     g is even). G = ceil(cols/32). Value = f32(q) * f32(scale).
// Float formats are read in groups of 32 too (the last one masked by
// cols), so one loop shape serves every format. FORMAT 6 and above are
// llama.cpp's block types (ggml.wgsl): a group of 32 decodes to its 32
// floats, scales included, and weight_at does not serve them.
//
// The matrix starts at word w0 of w: 0, except where one buffer holds
// several experts' matrices (matmul.wgsl's expert entry point). Every
// entry point sets w0 first: naga (gogpu) drops a private variable's
// initializer, and lavapipe then reads garbage, not zero.

const F32: u32 = 0u;
const BF16: u32 = 1u;
const F16: u32 = 2u;
const Q8: u32 = 3u;
const Q6: u32 = 4u;
const Q4: u32 = 5u;

var<private> w0: u32;

// Words per group in the quant region.
fn group_words() -> u32 {
    switch FORMAT {
        case 3u: { return 8u; }
        case 4u: { return 6u; }
        case 5u: { return 4u; }
        default: { return 0u; }
    }
}

// The f16 scale of group g of row r; scale_base is the first word of the
// scale region.
fn group_scale(r: u32, g: u32, groups: u32, scale_base: u32) -> f32 {
    let word = w[w0 + scale_base + r * ((groups + 1u) / 2u) + g / 2u];
    // unpack2x16float on a runtime value (naga folds constants wrongly).
    return unpack2x16float(word)[g % 2u];
}

// Element k (0..31) of group g of row r, as a float. For quantized formats
// this is the integer q; the caller multiplies by the scale once per group.
fn weight_at(r: u32, g: u32, k: u32, cols: u32, groups: u32) -> f32 {
    let c = g * 32u + k;
    if (FORMAT == F32) {
        return bitcast<f32>(w[w0 + r * cols + c]);
    }
    if (FORMAT == BF16 || FORMAT == F16) {
        let e = r * cols + c;
        let word = w[w0 + e / 2u];
        if (FORMAT == F16) {
            return unpack2x16float(word)[e % 2u];
        }
        return bitcast<f32>(select(word << 16u, word & 0xffff0000u, e % 2u == 1u));
    }
    let base = w0 + (r * groups + g) * group_words();
    if (FORMAT == Q8) {
        let word = w[base + k / 4u];
        return f32((i32(word << (24u - 8u * (k % 4u)))) >> 24u);
    }
    if (FORMAT == Q4) {
        let u = (w[base + k / 8u] >> (4u * (k % 8u))) & 0xfu;
        return f32(i32(u) - 8);
    }
    // Q6: low nibble as in Q4, high two bits in words 4 and 5.
    let lo = (w[base + k / 8u] >> (4u * (k % 8u))) & 0xfu;
    let hi = (w[base + 4u + k / 16u] >> (2u * (k % 16u))) & 0x3u;
    return f32(i32(lo | (hi << 4u)) - 32);
}

// The formats above with a scale per group (not ggml.wgsl's block types).
fn is_quantized() -> bool { return FORMAT >= Q8 && FORMAT <= Q4; }
