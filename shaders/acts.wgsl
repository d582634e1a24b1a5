// acts.wgsl — rounding a product's activations as package acts does
// (vLLM's dynamic per-token quantizations), before the product with a
// lookup matrix reads them: each token's row quantized and multiplied
// back by its scales, the same float32 operations as acts.Row, so the
// same bits.
//   mode 1 int8: s = absmax/127, q = round(x*(127/absmax)) (ties to even),
//                clamped to [-128, 127]; x' = q*s (0 when absmax is 0)
//   mode 2 fp8:  s = max(absmax/448, 1/(448*512)); x' = E4M3(clamp(x*(1/s),
//                ±448))*s
//   mode 3 fp4:  G = 2688/absmax; per block of 16, d = E4M3(min(G*(bmax/6),
//                448))/G, x' = E2M1(x/d)*d (0 when d is 0)
//
// Bindings (group 0):
//   0 x: array<f32>  X, token t's row at x_off + t*cols
//   1 y: array<f32>  X rounded, token t's row at t*cols
//   4 p: Params
// Dispatch: (T, 1, 1) workgroups of WG: one a token; the row's absmax is
// a maximum, the same in any order.

struct Params {
    mode: u32,
    cols: u32,
    x_off: u32,
    _pad: u32,
}

@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> p: Params;

var<workgroup> part: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let src = p.x_off + wid.x * p.cols;
    let dst = wid.x * p.cols;
    var m = 0.0;
    for (var i = lid; i < p.cols; i += WG) {
        m = max(m, abs(x[src + i]));
    }
    part[lid] = m;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s /= 2u) {
        if (lid < s) {
            part[lid] = max(part[lid], part[lid + s]);
        }
        workgroupBarrier();
    }
    let amax = part[0];
    if (p.mode == 3u) {
        let g = 2688.0 / amax;
        for (var b = lid * 16u; b < p.cols; b += WG * 16u) {
            let end = min(p.cols, b + 16u);
            var bmax = 0.0;
            for (var i = b; i < end; i++) {
                bmax = max(bmax, abs(x[src + i]));
            }
            let d = e4m3(min(g * (bmax / 6.0), 448.0)) / g;
            for (var i = b; i < end; i++) {
                var v = 0.0;
                if (amax != 0.0 && d != 0.0) {
                    v = e2m1(x[src + i] / d) * d;
                }
                y[dst + i] = v;
            }
        }
        return;
    }
    for (var i = lid; i < p.cols; i += WG) {
        let v = x[src + i];
        if (p.mode == 1u) {
            if (amax == 0.0) {
                y[dst + i] = v;
            } else {
                let inv = 127.0 / amax;
                let s = amax / 127.0;
                y[dst + i] = clamp(round(v * inv), -128.0, 127.0) * s;
            }
        } else {
            let s = max(amax / 448.0, 1.0 / 229376.0);
            let inv = 1.0 / s;
            y[dst + i] = e4m3(clamp(v * inv, -448.0, 448.0)) * s;
        }
    }
}

// with_sign is |r| with v's sign bit.
fn with_sign(r: f32, v: f32) -> f32 {
    return bitcast<f32>(bitcast<u32>(r) | (bitcast<u32>(v) & 0x80000000u));
}

// pow2 is 2^e for -126 <= e <= 127, built from its bits (exact).
fn pow2(e: i32) -> f32 {
    return bitcast<f32>(u32(e + 127) << 23u);
}

// e4m3 rounds v (|v| <= 448) to E4M3, ties to even: multiples of 2^-9
// below 2^-6, of 2^(e-3) in [2^e, 2^(e+1)).
fn e4m3(v: f32) -> f32 {
    let a = abs(v);
    let e = i32(bitcast<u32>(a) >> 23u) - 127;
    let q = pow2(max(e, -6) - 3);
    return with_sign(round(a / q) * q, v);
}

// e2m1 rounds v to E2M1 (0, 0.5, 1, 1.5, 2, 3, 4, 6), ties to even,
// saturating at 6.
fn e2m1(v: f32) -> f32 {
    let a = min(abs(v), 6.0);
    var q = 0.5;
    if (a >= 4.0) {
        q = 2.0;
    } else if (a >= 2.0) {
        q = 1.0;
    }
    return with_sign(min(round(a / q) * q, 6.0), v);
}
