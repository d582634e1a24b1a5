// quantize.wgsl — X rounded to 8-bit blocks of 32 for matmul_a8.wgsl, as
// the CPU engine rounds it with 8-bit activations (internal/engine/internal/cpu's
// a8.go, step 1; llama.cpp's quantize_row_q8_0): per block, amax =
// max |x_j|, q_j = x_j · f32(127 / amax) rounded to the nearest integer,
// ties to even, and dx = f32(amax / 127) rounded to f16 (ties to even),
// kept as the float it is. A block of zeros gives zeros with dx 0; a
// block with an infinite or NaN element zeros with dx NaN (the product
// comes out NaN); a block whose 127/amax overflows f32 (amax below
// AMAX_MIN) zeros with dx 0.
//
// Bindings (group 0) of the kernels that hold this file (rmsnorm.wgsl's
// main_q8, elementwise.wgsl's quantize and *_mul_q8):
//   4 xq: array<u32>        out: token t's rounded X from word t*cols/2, four
//                           int8 a word (pack4xI8, column 4k+i in byte i of
//                           word k): cols/4 words in column order, then the
//                           same values in 4-bit codes' order: per 8 columns
//                           c..c+7, the even ones (c, c+2, c+4, c+6) in one
//                           word, then the odd ones, as quant's q4 and q6
//                           hold their nibbles
//   5 xd: array<vec2<f32>>  out: (T, cols/32): each block's dx, and Σ_j q_j
//                           (exact in f32: at most 32·127 in magnitude)
// cols is a multiple of 32. quantize_block rounds one block; the kernel
// that calls it computed the block's 32 values, so X need not round-trip
// through memory first.
//
// WGSL's division may be 2.5 ulp off, so the two quotients are corrected
// to the nearest float with fma's exact remainder (div_rn). Where a device
// flushes f32 subnormals, an element below 1.2e-38 in a block whose amax
// is below about 3e-36 rounds to 0 where the CPU may round it to ±1.

@group(0) @binding(4) var<storage, read_write> xq: array<u32>;
@group(0) @binding(5) var<storage, read_write> xd: array<vec2<f32>>;

// Chromium's Tint refuses a constant expression whose value is infinite or
// NaN, so these become floats only with a runtime operand (special).
const INF_BITS: u32 = 0x7f800000u;
const NAN_BITS: u32 = 0x7fc00000u;
// The bits of the least amax whose f32(127 / amax) is finite
// (3.7321948e-37; shaders_test.go checks it against Go's division).
const AMAX_MIN: u32 = 0x02fe0001u;

// quantize_block rounds v (columns 4k..4k+3 in v[k]), block b (columns
// 32b..32b+31) of token t's row of cols values, into xq and xd.
fn quantize_block(v: array<vec4<f32>, 8>, t: u32, b: u32, cols: u32) {
    // |x| as bits orders as the floats do, NaN above infinity.
    var m = vec4<u32>();
    for (var k = 0u; k < 8u; k++) {
        m = max(m, bitcast<vec4<u32>>(v[k]) & vec4<u32>(0x7fffffffu));
    }
    let amax = max(max(m.x, m.y), max(m.z, m.w));
    var q = array<vec4<i32>, 8>();
    var dx = 0.0;
    if (amax >= INF_BITS) {
        dx = special(NAN_BITS, amax);
    } else if (amax >= AMAX_MIN) {
        let a = bitcast<f32>(amax);
        let id = div_rn(127.0, a);
        dx = f16_round(div_rn(a, 127.0));
        for (var k = 0u; k < 8u; k++) {
            q[k] = vec4<i32>(round(v[k] * id));
        }
    }
    let inOrder = t * cols / 2u + b * 8u;
    let nibbles = inOrder + cols / 4u;
    var sum = 0;
    for (var k = 0u; k < 8u; k++) {
        xq[inOrder + k] = pack4xI8(q[k]);
        sum += dot(q[k], vec4<i32>(1));
    }
    for (var k = 0u; k < 8u; k += 2u) {
        let lo = q[k];
        let hi = q[k + 1u];
        xq[nibbles + k] = pack4xI8(vec4<i32>(lo.x, lo.z, hi.x, hi.z));
        xq[nibbles + k + 1u] = pack4xI8(vec4<i32>(lo.y, lo.w, hi.y, hi.w));
    }
    xd[t * cols / 32u + b] = vec2<f32>(dx, f32(sum));
}

// div_rn is a / b rounded to the nearest float (a, b positive and
// normal): of WGSL's quotient and its neighbours up to 3 ulp away, the
// one with the least remainder |a - c·b|, which fma gives exactly near
// the quotient (a quotient is never halfway between two floats).
fn div_rn(a: f32, b: f32) -> f32 {
    let q0 = bitcast<u32>(a / b);
    var best = bitcast<f32>(q0);
    var least = abs(fma(-best, b, a));
    for (var i = 1u; i <= 3u; i++) {
        for (var s = 0u; s < 2u; s++) {
            let c = bitcast<f32>(select(q0 - i, q0 + i, s == 1u));
            let r = abs(fma(-c, b, a));
            if (r < least) {
                best = c;
                least = r;
            }
        }
    }
    return best;
}

// f16_round is v (positive, finite) rounded to the nearest f16, ties to
// even, as an f32: infinity from 65520 on, multiples of 2^-24 below 2^-14
// (f16's subnormals), else the mantissa cut to 10 bits.
fn f16_round(v: f32) -> f32 {
    if (v >= 65520.0) {
        return special(INF_BITS, bitcast<u32>(v));
    }
    if (v < 6.103515625e-05) {
        return round(v * 16777216.0) * 5.9604644775390625e-08;
    }
    let bits = bitcast<u32>(v);
    return bitcast<f32>((bits + 0xfffu + ((bits >> 13u) & 1u)) & 0xffffe000u);
}

// special is the float of bits, an infinity or a NaN, made at run time
// (any runtime value rt makes it so: Tint refuses such a constant).
fn special(bits: u32, rt: u32) -> f32 {
    return bitcast<f32>(bits | (rt & 0u));
}
