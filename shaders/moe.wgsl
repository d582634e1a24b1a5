// moe.wgsl — a sparse layer's routing and the weighted sum of its experts
// (Qwen2-MoE, Qwen3-MoE; transformers' Qwen2MoeTopKRouter and
// Qwen2MoeSparseMoeBlock), between which matmul.wgsl's expert entry point
// runs the chosen experts.
//
// Bindings (group 0):
//   0 r:      array<f32>  route: the router's logits (T, E), rewritten with their softmax
//   1 ids:    array<u32>  route writes (T, K): each token's chosen experts, in increasing id order
//   2 wts:    array<f32>  route writes, combine reads (T, K): their weights, in the same order
//   3 out:    array<f32>  route: the step's logit rows, (rows, ldl); combine: O (T, d)
//   4 ys:     array<f32>  combine: the experts' outputs (T, K, d), slot k as in ids
//   5 shared_y: array<f32> combine: the shared expert's output (T, d), read when has_shared
//   6 sgate:  array<f32>  combine: the shared expert gate's logit (T,), read when has_shared
//   7 p: Params
// route: (T, 1, 1) workgroups of WG (64), one per token: softmax in f32
// over the E logits, then the K most probable experts (the lower id first
// among equal probabilities, as the CPU engine and torch.topk on CPU
// pick), renormalized to sum 1 when norm. A token t ≥ first has a logit
// row, t − first: its ids go there as float32, most probable first, at
// columns col..col+K (the row's route tail; the head matmul fills the
// logits before it).
// combine: (ceil(d/WG), T, 1) workgroups of WG: O[t, c] = Σ_k wts[t, k] ·
// ys[t, k, c], summed in increasing expert id (slot) order from 0 as
// index_add_ does, plus sigmoid(sgate[t]) · shared_y[t, c] when has_shared.

struct Params {
    experts: u32,    // E
    topk: u32,       // K
    norm: u32,       // 1: renormalize the K probabilities (norm_topk_prob)
    first: u32,      // the first token with a logit row
    ldl: u32,        // row stride of the logit rows (Vocab + Routes)
    col: u32,        // column of this layer's route tail
    d: u32,          // hidden size
    has_shared: u32,
}

@group(0) @binding(0) var<storage, read_write> r: array<f32>;
@group(0) @binding(1) var<storage, read_write> ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> wts: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read> ys: array<f32>;
@group(0) @binding(5) var<storage, read> shared_y: array<f32>; // "shared" is reserved in WGSL (Tint refuses it; naga does not)
@group(0) @binding(6) var<storage, read> sgate: array<f32>;
@group(0) @binding(7) var<uniform> p: Params;

var<workgroup> red: array<f32, WG>;
var<workgroup> red_id: array<u32, WG>;

// before says whether expert (pa, ia) comes before (pb, ib) in the order of
// the picks: the larger probability, then the lower id.
fn before(pa: f32, ia: u32, pb: f32, ib: u32) -> bool {
    return pa > pb || (pa == pb && ia < ib);
}

@compute @workgroup_size(WG)
fn route(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wid.x;
    let E = p.experts;
    let K = p.topk;
    let base = t * E;
    // Each invocation holds experts lid, lid+WG, ...: it alone writes and
    // rereads them, so no barrier guards r.
    var m = -3.4028234663852886e38; // -FLT_MAX exactly: Tint refuses -3.4028235e38, which rounds past it
    for (var e = lid; e < E; e += WG) {
        m = max(m, r[base + e]);
    }
    red[lid] = m;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s /= 2u) {
        if (lid < s) {
            red[lid] = max(red[lid], red[lid + s]);
        }
        workgroupBarrier();
    }
    m = red[0];
    workgroupBarrier();
    var sum = 0.0;
    for (var e = lid; e < E; e += WG) {
        let v = exp(r[base + e] - m);
        r[base + e] = v;
        sum += v;
    }
    red[lid] = sum;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s /= 2u) {
        if (lid < s) {
            red[lid] += red[lid + s];
        }
        workgroupBarrier();
    }
    sum = red[0];
    workgroupBarrier();
    for (var e = lid; e < E; e += WG) {
        r[base + e] = r[base + e] / sum;
    }

    // Pick j is the first, in the picks' order, of the experts after pick
    // j − 1: no expert is marked, so E and K are unbounded. Probabilities
    // are at most 1, so (2, 0) comes before every expert.
    var prev = 2.0;
    var prev_id = 0u;
    for (var j = 0u; j < K; j++) {
        var bp = -1.0;
        var bi = 0xffffffffu;
        for (var e = lid; e < E; e += WG) {
            let v = r[base + e];
            if (before(prev, prev_id, v, e) && before(v, e, bp, bi)) {
                bp = v;
                bi = e;
            }
        }
        red[lid] = bp;
        red_id[lid] = bi;
        workgroupBarrier();
        for (var s = WG / 2u; s > 0u; s /= 2u) {
            if (lid < s && before(red[lid + s], red_id[lid + s], red[lid], red_id[lid])) {
                red[lid] = red[lid + s];
                red_id[lid] = red_id[lid + s];
            }
            workgroupBarrier();
        }
        prev = red[0];
        prev_id = red_id[0];
        if (lid == 0u) {
            ids[t * K + j] = prev_id;
            wts[t * K + j] = prev;
        }
        workgroupBarrier(); // before the next pick's reduction overwrites red
    }
    if (lid != 0u) {
        return;
    }
    let o = t * K;
    if (p.norm != 0u) {
        var total = 0.0;
        for (var j = 0u; j < K; j++) {
            total += wts[o + j];
        }
        for (var j = 0u; j < K; j++) {
            wts[o + j] = wts[o + j] / total;
        }
    }
    if (t >= p.first) {
        for (var j = 0u; j < K; j++) {
            out[(t - p.first) * p.ldl + p.col + j] = f32(ids[o + j]);
        }
    }
    // Into increasing id order (insertion sort: K is small), the order
    // combine sums in.
    for (var j = 1u; j < K; j++) {
        let id = ids[o + j];
        let wt = wts[o + j];
        var i = j;
        while (i > 0u && ids[o + i - 1u] > id) {
            ids[o + i] = ids[o + i - 1u];
            wts[o + i] = wts[o + i - 1u];
            i--;
        }
        ids[o + i] = id;
        wts[o + i] = wt;
    }
}

@compute @workgroup_size(WG)
fn combine(@builtin(global_invocation_id) gid: vec3<u32>) {
    let c = gid.x;
    let t = gid.y;
    if (c >= p.d) {
        return;
    }
    let K = p.topk;
    var acc = 0.0;
    for (var k = 0u; k < K; k++) {
        acc += ys[(t * K + k) * p.d + c] * wts[t * K + k];
    }
    if (p.has_shared != 0u) {
        acc += 1.0 / (1.0 + exp(-sgate[t])) * shared_y[t * p.d + c];
    }
    out[t * p.d + c] = acc;
}
