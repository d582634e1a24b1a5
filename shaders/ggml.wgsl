// ggml.wgsl — decoding llama.cpp's block types as GGUF stores them, shared
// by the kernels that read a weight matrix (prepended after weights.wgsl to
// matmul.wgsl and embed.wgsl). FORMAT (shaders.go) picks one type per
// pipeline, so the branches below fold away.
//
// A piece of W (rows, cols) holds whole rows as GGUF stores them: row r at
// byte r*RB, RB = cols/BS*BB (BS weights in a block of BB bytes), rows
// contiguous, the buffer zero-padded to whole words. Blocks are
// byte-addressed and not word aligned (Q4_0's are 18 bytes, Q6_K's 210), so
// a field may straddle two words: the runs of quants are read 16 bytes at
// a time as 4 words (ggml_vec4, each word of w loaded once), the scales
// and halves byte by byte. Byte b of the matrix is byte b of w from word w0
// on (weights.wgsl's w0: a bank of experts holds several matrices).
//
// One entry point: ggml_group(r, g, cols) decodes weights 32g..32g+31 of
// row r into gq, each exactly the float32 that ggml's dequantize_row_*
// (and package ggml's Dequantize) computes: the same products in the same
// order. Every product is exact (an f16 times integers of at most 13 bits
// together), so only a final add or subtraction rounds, and a fused
// multiply-add, which SPIR-V compilers may form, rounds it the same. f16
// fields are widened with integer operations, not unpack2x16float, so that
// subnormals are exact whatever the driver does with them and a NaN is made
// quiet as ggml's conversion makes it.
//
// Layouts (byte offsets in a block; f16 and u32 little-endian):
//   6 Q4_0 (32 in 18): d f16 [0:2]; qs [2:18]: byte j holds weight j in
//       its low nibble, weight j+16 in its high one. y = (q-8)*d
//   7 Q4_1 (32 in 20): d [0:2], m [2:4], qs [4:20] as Q4_0. y = q*d + m
//   8 Q5_0 (32 in 22): d [0:2]; qh u32 [2:6]: bit i is weight i's fifth
//       bit; qs [6:22] as Q4_0. y = (q-16)*d
//   9 Q5_1 (32 in 24): d [0:2], m [2:4], qh [4:8], qs [8:24]. y = q*d + m
//  10 Q8_0 (32 in 34): d [0:2]; qs [2:34] int8, weight j in byte j. y = q*d
// K-quants: super-blocks of 256 weights; a group of 32 is weights
// 32s..32s+31 of one (s = 0..7), in two halves of 128 (n = s/4, j = s%4).
//  11 Q2_K (84): scales [0:16], byte 2s+h for weights 16h.. of group s:
//       low nibble scale, high nibble min; qs [16:80]: weight 16h+l of
//       group s in bits 2j.. of byte 32n+16h+l; d [80:82], dmin [82:84].
//       y = (d*sc)*q - dmin*m
//  12 Q3_K (110): hmask [0:32]: weight k of group s has its high bit in bit
//       s of byte k; qs [32:96] low 2 bits as Q2_K's; scales [96:108]:
//       6-bit scale of sub-group i (0..15): low 4 bits the low (i < 8) or
//       high nibble of byte i%8, high 2 bits bits 2(i/4).. of byte 8+i%4;
//       d [108:110]. q = low2 - (high bit ? 0 : 4). y = (d*(sc-32))*q
//  13 Q4_K (144): d [0:2], dmin [2:4]; scales [4:16]: eight 6-bit scales and
//       mins (scale_min_k4); qs [16:144]: group s in the low (s even) or
//       high nibbles of bytes 32(s/2)... y = (d*sc)*q - dmin*m
//  14 Q5_K (176): d, dmin, scales as Q4_K; qh [16:48]: weight l of group s
//       has its fifth bit in bit s of byte l; qs [48:176] as Q4_K's.
//  15 Q6_K (210): ql [0:128]: in half n (64 bytes), sub-group t = s%4 takes
//       the low (t < 2) or high nibble of byte 64n + 32(t%2) + l; qh
//       [128:192]: bits 2t.. of byte 128+32n+l; scales [192:208] int8, one
//       per 16: byte 192+8n+2t+l/16; d [208:210]. q = (low|high<<4) - 32,
//       y = (d*sc)*q
// 17..28, the i-quants, ternary types and MXFP4: iquants.wgsl.

const Q4_0: u32 = 6u;
const Q4_1: u32 = 7u;
const Q5_0: u32 = 8u;
const Q5_1: u32 = 9u;
const Q8_0: u32 = 10u;
const Q2_K: u32 = 11u;
const Q3_K: u32 = 12u;
const Q4_K: u32 = 13u;
const Q5_K: u32 = 14u;
const Q6_K: u32 = 15u;

// The decoded group. No initializer: naga drops it (see weights.wgsl's w0);
// ggml_group writes all 32 before anything reads them.
var<private> gq: array<f32, 32>;

fn is_ggml() -> bool { return FORMAT >= Q4_0; }

// Weights per block.
fn ggml_block_size() -> u32 {
    if (FORMAT <= Q8_0 || FORMAT == 24u || FORMAT == 28u) { // Q4_0 … Q8_0, IQ4_NL, MXFP4
        return 32u;
    }
    return 256u;
}

// Bytes per block.
fn ggml_block_bytes() -> u32 {
    switch FORMAT {
        case 6u: { return 18u; }
        case 7u: { return 20u; }
        case 8u: { return 22u; }
        case 9u: { return 24u; }
        case 10u: { return 34u; }
        case 11u: { return 84u; }
        case 12u: { return 110u; }
        case 13u: { return 144u; }
        case 14u: { return 176u; }
        case 15u: { return 210u; }
        case 17u: { return 66u; }
        case 18u: { return 74u; }
        case 19u: { return 82u; }
        case 20u: { return 98u; }
        case 21u: { return 110u; }
        case 22u: { return 50u; }
        case 23u: { return 56u; }
        case 24u: { return 18u; }
        case 25u: { return 136u; }
        case 26u: { return 54u; }
        case 27u: { return 66u; }
        case 28u: { return 17u; }
        default: { return 0u; }
    }
}

// Byte b of the matrix.
fn ggml_u8(b: u32) -> u32 {
    let a = 4u * w0 + b;
    return (w[a / 4u] >> (8u * (a % 4u))) & 0xffu;
}

// The int8 at byte b.
fn ggml_i8(b: u32) -> i32 {
    return i32(ggml_u8(b) << 24u) >> 24u;
}

// The little-endian u16 at byte b (any alignment).
fn ggml_u16(b: u32) -> u32 {
    let a = 4u * w0 + b;
    let s = 8u * (a % 4u);
    var v = w[a / 4u] >> s;
    if (s == 24u) {
        v |= w[a / 4u + 1u] << 8u;
    }
    return v & 0xffffu;
}

// The little-endian u32 at byte b (any alignment).
fn ggml_u32(b: u32) -> u32 {
    let a = 4u * w0 + b;
    let s = 8u * (a % 4u);
    if (s == 0u) {
        return w[a / 4u];
    }
    return (w[a / 4u] >> s) | (w[a / 4u + 1u] << (32u - s));
}

// The 16 bytes at byte b (any alignment) as 4 words, byte 4k+i of the run
// in bits 8i.. of word k: every word of w read once (5 loads, 4 when b is
// word aligned), where reading byte by byte took 16.
fn ggml_vec4(b: u32) -> vec4<u32> {
    let a = 4u * w0 + b;
    let i = a / 4u;
    let s = 8u * (a % 4u);
    let x = vec4<u32>(w[i], w[i + 1u], w[i + 2u], w[i + 3u]);
    if (s == 0u) {
        return x;
    }
    // Only an unaligned run reaches into a fifth word, which then holds
    // some of its bytes: never past the matrix.
    let y = vec4<u32>(x.y, x.z, x.w, w[i + 4u]);
    return (x >> vec4<u32>(s)) | (y << vec4<u32>(32u - s));
}

// Byte j (0..15) of a ggml_vec4 run.
fn byte16(v: vec4<u32>, j: u32) -> u32 {
    return (v[j / 4u] >> (8u * (j % 4u))) & 0xffu;
}

// Byte j (0..31) of a 32-byte run read as two ggml_vec4.
fn byte32(lo: vec4<u32>, hi: vec4<u32>, j: u32) -> u32 {
    if (j < 16u) {
        return byte16(lo, j);
    }
    return byte16(hi, j - 16u);
}

// The f16 at byte b widened exactly, as GGML_FP16_TO_FP32: subnormals
// normalized with integer operations, a NaN made quiet.
fn ggml_half(b: u32) -> f32 {
    return half_bits(ggml_u16(b));
}

// The f16 of bits h widened exactly (ggml_half).
fn half_bits(h: u32) -> f32 {
    let sign = (h & 0x8000u) << 16u;
    let e = (h >> 10u) & 0x1fu;
    let m = h & 0x3ffu;
    if (e == 31u) {
        return bitcast<f32>(sign | 0x7f800000u | (m << 13u) | select(0u, 0x400000u, m != 0u));
    }
    if (e == 0u) {
        if (m == 0u) {
            return bitcast<f32>(sign);
        }
        // m * 2^-24 with m's top bit at p: exponent p - 24, the bits below
        // p the mantissa.
        let p = firstLeadingBit(m);
        return bitcast<f32>(sign | ((p + 103u) << 23u) | ((m << (23u - p)) & 0x7fffffu));
    }
    return bitcast<f32>(sign | ((e + 112u) << 23u) | (m << 13u));
}

// The 6-bit scale (x) and min (y) of group j (0..7) of Q4_K and Q5_K,
// whose 12 scale bytes start at byte sb: groups 0..3 in the low 6 bits of
// bytes j and j+4, groups 4..7 in the nibbles of byte j+4 with their top
// 2 bits at the top of bytes j-4 and j.
fn scale_min_k4(j: u32, sb: u32) -> vec2<u32> {
    if (j < 4u) {
        return vec2<u32>(ggml_u8(sb + j) & 63u, ggml_u8(sb + j + 4u) & 63u);
    }
    let lo = ggml_u8(sb + j + 4u);
    return vec2<u32>((lo & 0xfu) | ((ggml_u8(sb + j - 4u) >> 6u) << 4u), (lo >> 4u) | ((ggml_u8(sb + j) >> 6u) << 4u));
}

// ggml_group decodes weights 32g..32g+31 of row r (cols a multiple of the
// block size) into gq.
fn ggml_group(r: u32, g: u32, cols: u32) {
    if (FORMAT == LOOKUP) { // lookup.wgsl: a group of a lookup matrix
        lookup_group(r, g);
        return;
    }
    let bs = ggml_block_size();
    let bb = ggml_block_bytes();
    let c = g * 32u;
    let blk = r * (cols / bs) * bb + (c / bs) * bb; // the block's first byte
    let s = (c % bs) / 32u;                         // K-quants: the group in its super-block
    if (is_iquant()) {
        iquant_group(blk, s);
    } else if (FORMAT == Q4_0 || FORMAT == Q4_1) {
        let d = ggml_half(blk);
        if (FORMAT == Q4_0) {
            let qs = ggml_vec4(blk + 2u);
            for (var j = 0u; j < 16u; j++) {
                let q = byte16(qs, j);
                gq[j] = f32(i32(q & 0xfu) - 8) * d;
                gq[j + 16u] = f32(i32(q >> 4u) - 8) * d;
            }
        } else {
            let m = ggml_half(blk + 2u);
            let qs = ggml_vec4(blk + 4u);
            for (var j = 0u; j < 16u; j++) {
                let q = byte16(qs, j);
                gq[j] = f32(q & 0xfu) * d + m;
                gq[j + 16u] = f32(q >> 4u) * d + m;
            }
        }
    } else if (FORMAT == Q5_0 || FORMAT == Q5_1) {
        let d = ggml_half(blk);
        if (FORMAT == Q5_0) {
            let qh = ggml_u32(blk + 2u);
            let qs = ggml_vec4(blk + 6u);
            for (var j = 0u; j < 16u; j++) {
                let q = byte16(qs, j);
                gq[j] = f32(i32((q & 0xfu) | (((qh >> j) & 1u) << 4u)) - 16) * d;
                gq[j + 16u] = f32(i32((q >> 4u) | (((qh >> (j + 16u)) & 1u) << 4u)) - 16) * d;
            }
        } else {
            let m = ggml_half(blk + 2u);
            let qh = ggml_u32(blk + 4u);
            let qs = ggml_vec4(blk + 8u);
            for (var j = 0u; j < 16u; j++) {
                let q = byte16(qs, j);
                gq[j] = f32((q & 0xfu) | (((qh >> j) & 1u) << 4u)) * d + m;
                gq[j + 16u] = f32((q >> 4u) | (((qh >> (j + 16u)) & 1u) << 4u)) * d + m;
            }
        }
    } else if (FORMAT == Q8_0) {
        let d = ggml_half(blk);
        let lo = ggml_vec4(blk + 2u);
        let hi = ggml_vec4(blk + 18u);
        for (var j = 0u; j < 32u; j++) {
            gq[j] = f32(i32(byte32(lo, hi, j) << 24u) >> 24u) * d;
        }
    } else if (FORMAT == Q2_K) {
        let d = ggml_half(blk + 80u);
        let dmin = ggml_half(blk + 82u);
        let q0 = blk + 16u + 32u * (s / 4u);
        let shift = 2u * (s % 4u);
        for (var h = 0u; h < 2u; h++) {
            let sc = ggml_u8(blk + 2u * s + h);
            let dl = d * f32(sc & 0xfu);
            let ml = dmin * f32(sc >> 4u);
            let qs = ggml_vec4(q0 + 16u * h);
            for (var l = 0u; l < 16u; l++) {
                let q = (byte16(qs, l) >> shift) & 3u;
                gq[16u * h + l] = dl * f32(q) - ml;
            }
        }
    } else if (FORMAT == Q3_K) {
        let d = ggml_half(blk + 108u);
        let q0 = blk + 32u + 32u * (s / 4u);
        let shift = 2u * (s % 4u);
        for (var h = 0u; h < 2u; h++) {
            let i = 2u * s + h; // the sub-group of 16 (0..15)
            let nib = (ggml_u8(blk + 96u + i % 8u) >> (4u * (i / 8u))) & 0xfu;
            let top = (ggml_u8(blk + 104u + i % 4u) >> (2u * (i / 4u))) & 3u;
            let dl = d * f32(i32(nib | (top << 4u)) - 32);
            let qs = ggml_vec4(q0 + 16u * h);
            let hm = ggml_vec4(blk + 16u * h);
            for (var l = 0u; l < 16u; l++) {
                let k = 16u * h + l;
                var q = i32((byte16(qs, l) >> shift) & 3u);
                if (((byte16(hm, l) >> s) & 1u) == 0u) {
                    q -= 4;
                }
                gq[k] = dl * f32(q);
            }
        }
    } else if (FORMAT == Q4_K || FORMAT == Q5_K) {
        let d = ggml_half(blk);
        let dmin = ggml_half(blk + 2u);
        let sm = scale_min_k4(s, blk + 4u);
        let dg = d * f32(sm.x);
        let mg = dmin * f32(sm.y);
        let shift = 4u * (s % 2u);
        var q0 = blk + 16u + 32u * (s / 2u);
        if (FORMAT == Q5_K) {
            q0 += 32u;
        }
        let lo = ggml_vec4(q0);
        let hi = ggml_vec4(q0 + 16u);
        var hlo = vec4<u32>(0u);
        var hhi = vec4<u32>(0u);
        if (FORMAT == Q5_K) {
            hlo = ggml_vec4(blk + 16u);
            hhi = ggml_vec4(blk + 32u);
        }
        for (var l = 0u; l < 32u; l++) {
            var q = (byte32(lo, hi, l) >> shift) & 0xfu;
            if (FORMAT == Q5_K) {
                q |= ((byte32(hlo, hhi, l) >> s) & 1u) << 4u;
            }
            gq[l] = dg * f32(q) - mg;
        }
    } else if (FORMAT == Q6_K) {
        let d = ggml_half(blk + 208u);
        let n = s / 4u;
        let t = s % 4u;
        let ql0 = ggml_vec4(blk + 64u * n + 32u * (t % 2u));
        let ql1 = ggml_vec4(blk + 64u * n + 32u * (t % 2u) + 16u);
        let qh0 = ggml_vec4(blk + 128u + 32u * n);
        let qh1 = ggml_vec4(blk + 128u + 32u * n + 16u);
        let sc0 = f32(ggml_i8(blk + 192u + 8u * n + 2u * t));
        let sc1 = f32(ggml_i8(blk + 193u + 8u * n + 2u * t));
        for (var l = 0u; l < 32u; l++) {
            let lo = (byte32(ql0, ql1, l) >> (4u * (t / 2u))) & 0xfu;
            let hi = (byte32(qh0, qh1, l) >> (2u * t)) & 3u;
            gq[l] = d * select(sc1, sc0, l < 16u) * f32(i32(lo | (hi << 4u)) - 32);
        }
    }
}
