// iquants.wgsl — decoding llama.cpp's i-quants, ternary types and MXFP4,
// the companion of ggml.wgsl (prepended after it to matmul.wgsl and
// embed.wgsl; same bindings: the matrix w from word w0, as ggml.wgsl
// says). iquant_group(blk, s) decodes weights 32s..32s+31 of the block at
// byte blk (s = 0 for the 32-weight types) into gq, each the float32 of
// ggml's dequantize_row_* (package ggml's iquants.go has the same
// arithmetic in Go).
//
// The lookup tables are the last words of w (gpuengine writes them after
// the weights, shaders.Tables; their sizes come as IQ_GRID_WORDS,
// IQ_SIGNS_WORDS and IQ_VALUES_WORDS, 0 where the format needs none): the
// format's grid (8 one-byte magnitudes an entry in two words, or for IQ3 4
// in one; IQ1's bytes are int8 -1, 0, 1), then ggml's ksigns, 4 bytes a
// word (bit j of a sign byte: weight j of a run of 8 is negative; applied
// as a flip of the sign bit, as ggml's compiled code does), then the 16
// int8 of IQ4's or MXFP4's value table, 4 a word.
//
// Layouts (byte offsets in a block; multi-byte fields little-endian):
//  17 IQ2_XXS (256 in 66): d f16 [0:2]; per group s 8 bytes at 2+8s: four
//       grid indices, then a u32 of four 7-bit sign indices (bits 7l..)
//       and a 4-bit scale (bits 28..31). y = d*(0.5+sc)*0.25 * grid, signed
//  18 IQ2_XS (256 in 74): d; u16 per run of 8 at 2+8s+2l: 9-bit index,
//       7-bit sign index; scales [66:74] a nibble per 16 weights
//  19 IQ2_S (256 in 82): d; qs [2:34] index low 8 bits; sign bytes [34:66];
//       qh [66:74] two top index bits per run; scales [74:82] as IQ2_XS
//  20 IQ3_XXS (256 in 98): d; qs [2:66] an 8-bit index per 4 weights;
//       [66:98] a u32 per group as IQ2_XXS's second. y = d*(0.5+sc)*0.5 * grid
//  21 IQ3_S (256 in 110): d; qs [2:66] index low 8 bits; qh [66:74] ninth
//       bits; sign bytes [74:106]; scales [106:110] a nibble per group.
//       y = d*(1+2sc) * grid, signed
//  22 IQ1_S (256 in 50): d; qs [2:34] index low 8 bits per run; qh u16
//       per group at 34+2s: 3 top bits per run, scale (12..14), delta sign
//       (15). y = d*(2sc+1) * (grid ± 1/8)
//  23 IQ1_M (256 in 56): qs [0:32]; qh [32:48] a nibble per run (3 top
//       bits, delta sign); scales [48:56] four u16: 3-bit scales per 16
//       weights, their top nibbles the f16 d
//  24 IQ4_NL (32 in 18): d; qs [2:18] as Q4_0's nibbles. y = d * value
//  25 IQ4_XS (256 in 136): d; scales_h u16 [2:4]; scales_l [4:8]; qs
//       [8:136] 16 bytes per group. y = d*(sc-32) * value
//  26 TQ1_0 (256 in 54): qs [0:48] and qh [48:52], 5 (qh: 4) base-3 digits
//       a byte; d [52:54]. y = (trit-1) * d
//  27 TQ2_0 (256 in 66): qs [0:64] 2 bits a weight; d [64:66]. y = (q-1)*d
//  28 MXFP4 (32 in 17): e [0] E8M0; qs [1:17] as Q4_0's nibbles.
//       y = value * 2^(e-128)

const IQ2_XXS: u32 = 17u;
const IQ2_XS: u32 = 18u;
const IQ2_S: u32 = 19u;
const IQ3_XXS: u32 = 20u;
const IQ3_S: u32 = 21u;
const IQ1_S: u32 = 22u;
const IQ1_M: u32 = 23u;
const IQ4_NL: u32 = 24u;
const IQ4_XS: u32 = 25u;
const TQ1_0: u32 = 26u;
const TQ2_0: u32 = 27u;
const MXFP4: u32 = 28u;

fn is_iquant() -> bool { return FORMAT >= IQ2_XXS && FORMAT <= MXFP4; }

// The tables, from the end of w: word i of the grid, the signs and the
// values.
fn iq_table(i: u32) -> u32 {
    return w[arrayLength(&w) - (IQ_GRID_WORDS + IQ_SIGNS_WORDS + IQ_VALUES_WORDS) + i];
}
fn iq_grid(i: u32) -> u32 { return iq_table(i); }
fn iq_signs(i: u32) -> u32 { return iq_table(IQ_GRID_WORDS + i); }
fn iq_values(i: u32) -> u32 { return iq_table(IQ_GRID_WORDS + IQ_SIGNS_WORDS + i); }

// Grid entry i's 8 bytes as two words (low first).
fn grid8(i: u32) -> vec2<u32> {
    return vec2<u32>(iq_grid(2u * i), iq_grid(2u * i + 1u));
}

// Byte j (0..7) of a grid8 entry.
fn byte8(e: vec2<u32>, j: u32) -> u32 {
    return (e[j / 4u] >> (8u * (j % 4u))) & 0xffu;
}

// ksigns[i].
fn ksign(i: u32) -> u32 {
    return (iq_signs(i / 4u) >> (8u * (i % 4u))) & 0xffu;
}

// The int8 value table's 16 entries, 4 a word.
fn kvalues() -> vec4<u32> {
    return vec4<u32>(iq_values(0u), iq_values(1u), iq_values(2u), iq_values(3u));
}

// Entry i (0..15) of kvalues v.
fn kvalue(v: vec4<u32>, i: u32) -> f32 {
    return f32(i32(v[i / 4u] << (24u - 8u * (i % 4u))) >> 24u);
}

// v with the sign of bit j of sign byte sg.
fn signed(v: f32, sg: u32, j: u32) -> f32 {
    if (((sg >> j) & 1u) != 0u) {
        return -v;
    }
    return v;
}

// Eight weights of a run: db * grid8 entry i, signed by sg.
fn iq_run8(at: u32, i: u32, db: f32, sg: u32) {
    let e = grid8(i);
    for (var j = 0u; j < 8u; j++) {
        gq[at + j] = signed(db * f32(byte8(e, j)), sg, j);
    }
}

// Eight weights of an IQ1 run: dl * (int8 grid + delta).
fn iq1_run(at: u32, i: u32, dl: f32, delta: f32) {
    let e = grid8(i);
    for (var j = 0u; j < 8u; j++) {
        gq[at + j] = dl * (f32(i32(byte8(e, j) << 24u) >> 24u) + delta);
    }
}

// Digit n (most significant first) of a base-3 byte, minus 1.
fn tq1_trit(q: u32, n: u32) -> f32 {
    var p = 1u;
    for (var i = 0u; i < n; i++) {
        p *= 3u;
    }
    return f32(i32((((q * p) & 0xffu) * 3u) >> 8u) - 1);
}

fn iquant_group(blk: u32, s: u32) {
    if (FORMAT == IQ2_XXS) {
        let d = ggml_half(blk);
        let idx = ggml_u32(blk + 2u + 8u * s);
        let aux = ggml_u32(blk + 6u + 8u * s);
        let db = d * (0.5 + f32(aux >> 28u)) * 0.25;
        for (var l = 0u; l < 4u; l++) {
            iq_run8(8u * l, (idx >> (8u * l)) & 0xffu, db, ksign((aux >> (7u * l)) & 127u));
        }
    } else if (FORMAT == IQ2_XS || FORMAT == IQ2_S) {
        let d = ggml_half(blk);
        var sc = 0u;
        if (FORMAT == IQ2_XS) {
            sc = ggml_u8(blk + 66u + s);
        } else {
            sc = ggml_u8(blk + 74u + s);
        }
        let db0 = d * (0.5 + f32(sc & 0xfu)) * 0.25;
        let db1 = d * (0.5 + f32(sc >> 4u)) * 0.25;
        for (var l = 0u; l < 4u; l++) {
            let db = select(db1, db0, l < 2u);
            if (FORMAT == IQ2_XS) {
                let v = ggml_u16(blk + 2u + 8u * s + 2u * l);
                iq_run8(8u * l, v & 511u, db, ksign(v >> 9u));
            } else {
                let i = ggml_u8(blk + 2u + 4u * s + l) | ((ggml_u8(blk + 66u + s) << (8u - 2u * l)) & 0x300u);
                iq_run8(8u * l, i, db, ggml_u8(blk + 34u + 4u * s + l));
            }
        }
    } else if (FORMAT == IQ3_XXS || FORMAT == IQ3_S) {
        let d = ggml_half(blk);
        var db = 0.0;
        var aux = 0u;
        var qh = 0u;
        if (FORMAT == IQ3_XXS) {
            aux = ggml_u32(blk + 66u + 4u * s);
            db = d * (0.5 + f32(aux >> 28u)) * 0.5;
        } else {
            db = d * f32(1u + 2u * ((ggml_u8(blk + 106u + s / 2u) >> (4u * (s % 2u))) & 0xfu));
            qh = ggml_u8(blk + 66u + s);
        }
        for (var l = 0u; l < 4u; l++) {
            var i0 = ggml_u8(blk + 2u + 8u * s + 2u * l);
            var i1 = ggml_u8(blk + 3u + 8u * s + 2u * l);
            var sg = 0u;
            if (FORMAT == IQ3_XXS) {
                sg = ksign((aux >> (7u * l)) & 127u);
            } else {
                i0 |= (qh << (8u - 2u * l)) & 256u;
                i1 |= (qh << (7u - 2u * l)) & 256u;
                sg = ggml_u8(blk + 74u + 4u * s + l);
            }
            let e = vec2<u32>(iq_grid(i0), iq_grid(i1)); // two 4-byte entries make a run
            for (var j = 0u; j < 8u; j++) {
                gq[8u * l + j] = signed(db * f32(byte8(e, j)), sg, j);
            }
        }
    } else if (FORMAT == IQ1_S) {
        let d = ggml_half(blk);
        let qh = ggml_u16(blk + 34u + 2u * s);
        let dl = d * f32(2u * ((qh >> 12u) & 7u) + 1u);
        let delta = select(0.125, -0.125, (qh & 0x8000u) != 0u);
        for (var l = 0u; l < 4u; l++) {
            iq1_run(8u * l, ggml_u8(blk + 2u + 4u * s + l) | (((qh >> (3u * l)) & 7u) << 8u), dl, delta);
        }
    } else if (FORMAT == IQ1_M) {
        let sc0 = ggml_u16(blk + 48u);
        let sc1 = ggml_u16(blk + 50u);
        let sc2 = ggml_u16(blk + 52u);
        let sc3 = ggml_u16(blk + 54u);
        let d = half_bits((sc0 >> 12u) | ((sc1 >> 8u) & 0xf0u) | ((sc2 >> 4u) & 0xf00u) | (sc3 & 0xf000u));
        let sv = ggml_u16(blk + 48u + 2u * (s / 2u)) >> (6u * (s % 2u));
        let dl0 = d * f32(2u * (sv & 7u) + 1u);
        let dl1 = d * f32(2u * ((sv >> 3u) & 7u) + 1u);
        for (var l = 0u; l < 4u; l++) {
            let h = ggml_u8(blk + 32u + 2u * s + l / 2u) >> (4u * (l % 2u));
            let delta = select(0.125, -0.125, (h & 8u) != 0u);
            iq1_run(8u * l, ggml_u8(blk + 4u * s + l) | ((h & 7u) << 8u), select(dl1, dl0, l < 2u), delta);
        }
    } else if (FORMAT == IQ4_NL || FORMAT == IQ4_XS) {
        var dl = ggml_half(blk);
        var q0 = blk + 2u;
        if (FORMAT == IQ4_XS) {
            let ls = ((ggml_u8(blk + 4u + s / 2u) >> (4u * (s % 2u))) & 0xfu) | (((ggml_u16(blk + 2u) >> (2u * s)) & 3u) << 4u);
            dl = dl * f32(i32(ls) - 32);
            q0 = blk + 8u + 16u * s;
        }
        let kv = kvalues();
        let qs = ggml_vec4(q0);
        for (var j = 0u; j < 16u; j++) {
            let q = byte16(qs, j);
            gq[j] = dl * kvalue(kv, q & 0xfu);
            gq[j + 16u] = dl * kvalue(kv, q >> 4u);
        }
    } else if (FORMAT == TQ1_0) {
        let d = ggml_half(blk + 52u);
        for (var m = 0u; m < 32u; m++) {
            let k = 32u * s + m;
            var t = 0.0;
            if (k < 160u) {
                t = tq1_trit(ggml_u8(blk + k % 32u), k / 32u);
            } else if (k < 240u) {
                t = tq1_trit(ggml_u8(blk + 32u + (k - 160u) % 16u), (k - 160u) / 16u);
            } else {
                t = tq1_trit(ggml_u8(blk + 48u + (k - 240u) % 4u), (k - 240u) / 4u);
            }
            gq[m] = t * d;
        }
    } else if (FORMAT == TQ2_0) {
        let d = ggml_half(blk + 64u);
        let lo = ggml_vec4(blk + 32u * (s / 4u));
        let hi = ggml_vec4(blk + 32u * (s / 4u) + 16u);
        for (var m = 0u; m < 32u; m++) {
            gq[m] = f32(i32((byte32(lo, hi, m) >> (2u * (s % 4u))) & 3u) - 1) * d;
        }
    } else if (FORMAT == MXFP4) {
        let e = ggml_u8(blk);
        var d = bitcast<f32>((e - 1u) << 23u);
        if (e < 2u) {
            d = bitcast<f32>(0x00200000u << e);
        }
        let kv = kvalues();
        let qs = ggml_vec4(blk + 1u);
        for (var j = 0u; j < 16u; j++) {
            let q = byte16(qs, j);
            gq[j] = kvalue(kv, q & 0xfu) * d;
            gq[j + 16u] = kvalue(kv, q >> 4u) * d;
        }
    }
}
