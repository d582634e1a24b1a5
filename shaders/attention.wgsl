// attention.wgsl — causal grouped-query attention against the KV cache,
// for decode (T = 1) and prefill chunks (T > 1) alike:
// out[t, h] = softmax(q[t, h] · K[a..pos0+t]ᵀ · scale) V[a..pos0+t],
// query head h reading KV head h / (heads / kv_heads); a is 0, or with a
// sliding window (window > 0) the first of the last window positions.
//
// Bindings (group 0):
//   0 q:      array<f32>  Q (T, heads*hd)
//   1 k:      array<f32>  K cache (capacity, kv_heads*hd)
//   2 vc:     array<f32>  V cache (capacity, kv_heads*hd)
//   3 out:    array<f32>  (T, heads*hd)
//   4 scores: array<f32>  scratch (T, heads, capacity)
//   5 p:      Params
// Dispatch: (heads, T, 1) workgroups of WG (64): scores, max, exp and sum, then
// the weighted sum of values, each spread over the WG invocations.

struct Params {
    heads: u32,
    kv_heads: u32,
    hd: u32,
    pos0: u32,
    capacity: u32,
    scale: f32,
    window: u32, // 0: every earlier position
    _pad1: u32,
}

@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> k: array<f32>;
@group(0) @binding(2) var<storage, read> vc: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read_write> scores: array<f32>;
@group(0) @binding(5) var<uniform> p: Params;

var<workgroup> red: array<f32, WG>;

// reduce combines the WG values in red with op (0 max, 1 sum) and returns
// the result to every invocation.
fn reduce(lid: u32, v: f32, op: u32) -> f32 {
    red[lid] = v;
    workgroupBarrier();
    for (var stride = WG / 2u; stride > 0u; stride /= 2u) {
        if (lid < stride) {
            if (op == 0u) {
                red[lid] = max(red[lid], red[lid + stride]);
            } else {
                red[lid] += red[lid + stride];
            }
        }
        workgroupBarrier();
    }
    let r = red[0];
    workgroupBarrier(); // red is reused by the next reduce
    return r;
}

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let h = wid.x;
    let t = wid.y;
    let n = p.pos0 + t + 1u; // causal: keys a..pos0+t
    let a = select(0u, n - p.window, p.window > 0u && n > p.window);
    let qdim = p.heads * p.hd;
    let kvdim = p.kv_heads * p.hd;
    let kvo = (h / (p.heads / p.kv_heads)) * p.hd;
    let qo = t * qdim + h * p.hd;
    let so = (t * p.heads + h) * p.capacity;

    var mx = -3.4028234663852886e38;
    for (var j = a + lid; j < n; j += WG) {
        var s = 0.0;
        for (var i = 0u; i < p.hd; i++) {
            s += q[qo + i] * k[j * kvdim + kvo + i];
        }
        s *= p.scale;
        scores[so + j] = s;
        mx = max(mx, s);
    }
    mx = reduce(lid, mx, 0u);
    var sum = 0.0;
    for (var j = a + lid; j < n; j += WG) {
        let e = exp(scores[so + j] - mx);
        scores[so + j] = e;
        sum += e;
    }
    sum = reduce(lid, sum, 1u);
    // The exponentials written by other invocations must be visible.
    storageBarrier();
    workgroupBarrier();
    for (var i = lid; i < p.hd; i += WG) {
        var acc = 0.0;
        for (var j = a; j < n; j++) {
            acc += scores[so + j] * vc[j * kvdim + kvo + i];
        }
        out[qo + i] = acc / sum;
    }
}
