// exl3.wgsl — exllamav3's EXL3 layers (package exl3): y = x·W with
// W = diag(suh)·H·Ŵ·H·diag(svh), H the normalised 128-wide Hadamard,
// computed as exllamav3 computes it, never forming W:
//   rotate_in   x' = H(x ⊙ suh)          rows of in_p, x zero-padded from n_in
//   product     y' = x' @ Ŵ              Ŵ's weights decoded from the trellis
//   rotate_out  y  = H(y') ⊙ svh (+ b)   cut to n_out; set, or added to y (add)
//   decode      Ŵᵀ (on_p, in_p), for the tests against the CPU's decoder
// in float32 throughout, in the CPU engine's order of operations
// (internal/engine/internal/cpu/exl3.go): the rotations give its bits.
//
// Bindings (group 0):
//   0 w:    array<u32>  blobs (exl3.Format.Bytes): the trellis, (in_p/16,
//                       on_p/16) tiles of 8K words (16·K int16, two a word,
//                       the first in the low half), then suh (in_p) and svh
//                       (on_p) as f16, two a word; one blob, or a bank of
//                       experts' blobs every blob_words words
//   1 src:  array<f32>  rotate_in: x; product: x'; rotate_out: y'
//   2 dst:  array<f32>  rotate_in: x'; product: y'; rotate_out: y; decode: Ŵᵀ
//   3 bias: array<f32>  rotate_out, when has_bias: (n_out,)
//   4 ids:  array<u32>  with slots > 0: each row's expert, (rows,)
//   5 p: Params
// A row of activations is a token's, or with slots > 0 a (token, slot)'s:
// row i then runs expert ids[i]'s blob when it is in this bank (first …
// first+count−1) and is skipped otherwise, and rotate_in reads token
// i/slots's x when per_token. Row r of src is at src_off + r·ld_src, of
// dst at dst_off + r·ld_dst (floats).
// Dispatches: rotate_in, rotate_out: (blocks of 128, rows, 1) workgroups
// of 64; product: (ceil(on_p/64), rows, 1); decode: (on_p/64, in_p, 1).
//
// A weight's state is the 16 bits of its tile's bitstream (the words most
// significant bit first) that end at bit (p+1)·K, p its position in the
// tile (tensor-core order), read circularly; the codebook's arithmetic
// is exact in f32 (two fp16 halves of like magnitude, or a 22-bit product
// and a sum), then rounded to fp16 once, to nearest even.

struct Params {
    k: u32,          // bits per weight, 1…8
    codebook: u32,   // 0 3INST, 1 MCG, 2 MUL1 (exl3.Codebook)
    n_in: u32,
    n_out: u32,
    in_p: u32,       // n_in and n_out padded to multiples of 128
    on_p: u32,
    rows: u32,
    slots: u32,      // 0: one layer; else the expert slots a token has
    first: u32,      // this bank's experts: ids first … first+count−1
    count: u32,
    blob_words: u32,
    per_token: u32,  // rotate_in: row i reads token i/slots's x
    src_off: u32,
    ld_src: u32,
    dst_off: u32,
    ld_dst: u32,
    has_bias: u32,
    add: u32,
}

@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> src: array<f32>;
@group(0) @binding(2) var<storage, read_write> dst: array<f32>;
@group(0) @binding(3) var<storage, read> bias: array<f32>;
@group(0) @binding(4) var<storage, read> ids: array<u32>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> v: array<f32, 128>;

// blob is row i's blob's first word; false when the row is another
// bank's.
fn blob(i: u32) -> vec2<u32> {
    if (p.slots == 0u) {
        return vec2<u32>(0u, 1u);
    }
    let e = ids[i];
    if (e < p.first || e >= p.first + p.count) {
        return vec2<u32>(0u, 0u);
    }
    return vec2<u32>((e - p.first) * p.blob_words, 1u);
}

// half is element j of the f16 vector at word base.
fn half(base: u32, j: u32) -> f32 {
    return unpack2x16float(w[base + j / 2u])[j % 2u];
}

// round16 rounds a normal float32 to the nearest fp16, ties to even.
fn round16(x: f32) -> f32 {
    let b = bitcast<u32>(x);
    return bitcast<f32>((b + 0xfffu + ((b >> 13u) & 1u)) & 0xffffe000u);
}

// weight is Ŵ[r, c] of the blob at word b0.
fn weight(b0: u32, r: u32, c: u32) -> f32 {
    let k = p.k;
    let tile = b0 + ((r / 16u) * (p.on_p / 16u) + c / 16u) * 8u * k;
    // Position p of (row, col) in the tile: exl3.Position inverted.
    let row = r % 16u;
    let col = c % 16u;
    let e = (row & 1u) | (((row >> 3u) & 1u) << 1u) | ((col >> 3u) << 2u);
    let pos = ((col & 7u) * 4u + ((row >> 1u) & 3u)) * 8u + e;
    let n = 256u * k;
    let s = ((pos + 1u) * k + n - 16u) % n; // the state's first bit
    let i0 = s / 32u;
    let i1 = (i0 + 1u) % (8u * k);
    let sh = s % 32u;
    var bits = w[tile + i0] << sh;
    if (sh != 0u) {
        bits = bits | (w[tile + i1] >> (32u - sh));
    }
    let st = bits >> 16u;
    if (p.codebook == 2u) { // MUL1: the product's bytes summed, scaled in one fp16 FMA
        let x = st * 0x83DCD12Du;
        let sum = (x & 0xffu) + ((x >> 8u) & 0xffu) + ((x >> 16u) & 0xffu) + (x >> 24u);
        return round16(f32(1024u + sum) * 0.00676727294921875 - 10.3828125);
    }
    var x = st * 0xCBAC1FEDu;
    if (p.codebook == 0u) {
        x = st * 89226354u + 64248484u;
    }
    x = (x & 0x8fff8fffu) ^ 0x3b603b60u;
    let h = unpack2x16float(x);
    return round16(h.x + h.y);
}

// butterflies applies the unnormalised Hadamard to v, thread t of 64
// taking pair t of each stage, in the CPU's pairs: the same bits.
fn butterflies(t: u32) {
    for (var h = 1u; h < 128u; h = h * 2u) {
        workgroupBarrier();
        let a = (t / h) * 2u * h + t % h;
        let x = v[a];
        let y = v[a + h];
        v[a] = x + y;
        v[a + h] = x - y;
    }
    workgroupBarrier();
}

// 1/√128 as float32, as the CPU rounds it.
fn scale() -> f32 {
    return bitcast<f32>(0x3db504f3u);
}

@compute @workgroup_size(64)
fn rotate_in(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let blk = wid.x;
    let i = wid.y;
    let b = blob(i);
    if (b.y == 0u) {
        return;
    }
    var r = i;
    if (p.per_token != 0u) {
        r = i / p.slots;
    }
    let suh = b.x + (p.in_p / 16u) * (p.on_p / 16u) * 8u * p.k;
    for (var j = t; j < 128u; j = j + 64u) {
        let c = blk * 128u + j;
        var x = 0.0;
        if (c < p.n_in) {
            x = src[p.src_off + r * p.ld_src + c] * half(suh, c);
        }
        v[j] = x;
    }
    butterflies(t);
    for (var j = t; j < 128u; j = j + 64u) {
        dst[p.dst_off + i * p.ld_dst + blk * 128u + j] = v[j] * scale();
    }
}

@compute @workgroup_size(64)
fn rotate_out(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) t: u32) {
    let blk = wid.x;
    let i = wid.y;
    let b = blob(i);
    if (b.y == 0u) {
        return;
    }
    let svh = b.x + (p.in_p / 16u) * (p.on_p / 16u) * 8u * p.k + p.in_p / 2u;
    for (var j = t; j < 128u; j = j + 64u) {
        v[j] = src[p.src_off + i * p.ld_src + blk * 128u + j];
    }
    butterflies(t);
    for (var j = t; j < 128u; j = j + 64u) {
        let c = blk * 128u + j;
        if (c < p.n_out) {
            var y = v[j] * scale() * half(svh, c);
            if (p.has_bias != 0u) {
                y = y + bias[c];
            }
            let at = p.dst_off + i * p.ld_dst + c;
            if (p.add != 0u) {
                y = dst[at] + y;
            }
            dst[at] = y;
        }
    }
}

@compute @workgroup_size(64)
fn product(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    let i = gid.y;
    if (c >= p.on_p || i >= p.rows) {
        return;
    }
    let b = blob(i);
    if (b.y == 0u) {
        return;
    }
    var acc = 0.0;
    let x0 = p.src_off + i * p.ld_src;
    for (var r = 0u; r < p.in_p; r = r + 1u) {
        acc = acc + src[x0 + r] * weight(b.x, r, c);
    }
    dst[p.dst_off + i * p.ld_dst + c] = acc;
}

@compute @workgroup_size(64)
fn decode(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    let r = gid.y;
    dst[c * p.in_p + r] = weight(0u, r, c);
}
