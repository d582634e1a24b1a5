// moe.wgsl — a sparse layer's routing and the weighted sum of its experts
// (Qwen2-MoE, Qwen3-MoE: transformers' Qwen2MoeTopKRouter and
// Qwen2MoeSparseMoeBlock; GLM-4.5: Glm4MoeTopkRouter and Glm4MoeMoE),
// between which matmul.wgsl's expert entry point runs the chosen experts.
//
// Bindings (group 0):
//   0 r:      array<f32>  route: the router's logits (T, E), rewritten with their softmax
//                         (route_grouped: with their sigmoid)
//   1 ids:    array<u32>  route writes (T, K): each token's chosen experts, in increasing id order
//   2 wts:    array<f32>  route writes, combine reads (T, K): their weights, in the same order
//   3 out:    array<f32>  route: the step's logit rows, (rows, ldl); combine: O (T, d)
//   4 ys:     array<f32>  combine: the experts' outputs (T, K, d), slot k as in ids
//   5 shared_y: array<f32> combine: the shared expert's output (T, d), read when has_shared
//   6 sgate:  array<f32>  combine: the shared expert gate's logit (T,), read when has_shared is 1
//   7 p: Params
//   8 bias:   array<f32>  route_grouped: e_score_correction_bias (E,)
// route: (T, 1, 1) workgroups of WG (64), one per token: softmax in f32
// over the E logits, then the K most probable experts (the lower id first
// among equal probabilities, as the CPU engine and torch.topk on CPU
// pick), renormalized to sum 1 when norm.
// route_grouped: (T, 1, 1) workgroups of WG, one per token, G = groups ≤
// WG: GLM-4.5's router, as the CPU engine's routeGrouped. Scores are the
// logits' sigmoid; an expert's choice score is its score + bias[e]; each
// of the G groups of E/G consecutive experts is scored by the sum of its
// two largest choice scores; the topk_group best groups (the lower group
// first among equals) are kept and the other experts' choice scores read
// as 0.0 (transformers' mask); the K largest masked choice scores are
// picked (the lower id first among equals); their weights are their
// scores, divided by their sum + 1e-20 when norm, times scale.
// Both: a token t ≥ first has a logit row, t − first: its ids go there as
// float32, in pick order (most probable, or largest choice score, first),
// at columns col..col+K (the row's route tail; the head matmul fills the
// logits before it).
// combine: (ceil(d/WG), T, 1) workgroups of WG: O[t, c] = Σ_k wts[t, k] ·
// ys[t, k, c], summed in increasing expert id (slot) order from 0 as
// index_add_ does, plus shared_y[t, c] times sigmoid(sgate[t]) when
// has_shared is 1 (Qwen2-MoE's gate) or as it is when 2 (GLM's shared
// experts, ungated).

struct Params {
    experts: u32,    // E
    topk: u32,       // K
    norm: u32,       // 1: renormalize the K weights (norm_topk_prob)
    first: u32,      // the first token with a logit row
    ldl: u32,        // row stride of the logit rows (Vocab + Routes)
    col: u32,        // column of this layer's route tail
    d: u32,          // hidden size
    has_shared: u32, // 0: none; 1: behind a sigmoid gate; 2: ungated
    groups: u32,     // route_grouped: G (n_group)
    topk_group: u32, // route_grouped: groups kept
    scale: f32,      // route_grouped: routed_scaling_factor
}

@group(0) @binding(0) var<storage, read_write> r: array<f32>;
@group(0) @binding(1) var<storage, read_write> ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> wts: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<storage, read> ys: array<f32>;
@group(0) @binding(5) var<storage, read> shared_y: array<f32>; // "shared" is reserved in WGSL (Tint refuses it; naga does not)
@group(0) @binding(6) var<storage, read> sgate: array<f32>;
@group(0) @binding(7) var<uniform> p: Params;
@group(0) @binding(8) var<storage, read> bias: array<f32>;

var<workgroup> red: array<f32, WG>;
var<workgroup> red_id: array<u32, WG>;
var<workgroup> gsc: array<f32, WG>;  // route_grouped: each group's score
var<workgroup> keep: array<u32, WG>; // route_grouped: 1 for the kept groups

const NEG_MAX = -3.4028234663852886e38; // -FLT_MAX exactly: Tint refuses -3.4028235e38, which rounds past it

// before says whether expert (pa, ia) comes before (pb, ib) in the order of
// the picks: the larger value, then the lower id.
fn before(pa: f32, ia: u32, pb: f32, ib: u32) -> bool {
    return pa > pb || (pa == pb && ia < ib);
}

// candidate is expert e's value for the picks of token t (its r row at
// base): the probability for route; for route_grouped its choice score,
// 0.0 outside the kept groups.
fn candidate(base: u32, e: u32, grouped: bool) -> f32 {
    if (!grouped) {
        return r[base + e];
    }
    if (keep[e / (p.experts / p.groups)] == 0u) {
        return 0.0;
    }
    return r[base + e] + bias[e];
}

// pick writes token t's K picks, in pick order, to ids and their values to
// wts. Pick j is the first, in the picks' order, of the experts after pick
// j − 1: no expert is marked, so E and K are unbounded. Each invocation
// reads only its own experts lid, lid+WG, ... of r.
fn pick(t: u32, lid: u32, grouped: bool) {
    let E = p.experts;
    let K = p.topk;
    let base = t * E;
    var prev = 0.0;
    var prev_id = 0u;
    for (var j = 0u; j < K; j++) {
        var bp = NEG_MAX;
        var bi = 0xffffffffu;
        for (var e = lid; e < E; e += WG) {
            let v = candidate(base, e, grouped);
            if ((j == 0u || before(prev, prev_id, v, e)) && before(v, e, bp, bi)) {
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
}

// settle (one invocation) divides token t's K weights by their sum + eps
// when norm, multiplies them by scale, writes the ids into the token's
// route tail if it has a logit row, then sorts ids and weights into
// increasing id order (insertion sort: K is small), the order combine
// sums in.
fn settle(t: u32, eps: f32, scale: f32) {
    let K = p.topk;
    let o = t * K;
    var total = 0.0;
    for (var j = 0u; j < K; j++) {
        total += wts[o + j];
    }
    for (var j = 0u; j < K; j++) {
        var w = wts[o + j];
        if (p.norm != 0u) {
            w = w / (total + eps);
        }
        wts[o + j] = w * scale;
    }
    if (t >= p.first) {
        for (var j = 0u; j < K; j++) {
            out[(t - p.first) * p.ldl + p.col + j] = f32(ids[o + j]);
        }
    }
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
fn route(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wid.x;
    let E = p.experts;
    let base = t * E;
    // Each invocation holds experts lid, lid+WG, ...: it alone writes and
    // rereads them, so no barrier guards r.
    var m = NEG_MAX;
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
    pick(t, lid, false);
    if (lid == 0u) {
        settle(t, 0.0, 1.0); // x / (total + 0) and x · 1 are exact: the softmax router's weights as they were
    }
}

@compute @workgroup_size(WG)
fn route_grouped(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wid.x;
    let E = p.experts;
    let G = p.groups;
    let n = E / G;
    let base = t * E;
    for (var e = lid; e < E; e += WG) {
        r[base + e] = 1.0 / (1.0 + exp(-r[base + e]));
    }
    storageBarrier(); // the groups below read other invocations' scores
    if (lid < G) {
        // The group's two largest choice scores (n ≥ 2).
        var m1 = NEG_MAX;
        var m2 = NEG_MAX;
        for (var e = lid * n; e < (lid + 1u) * n; e++) {
            let c = r[base + e] + bias[e];
            if (c > m1) {
                m2 = m1;
                m1 = c;
            } else if (c > m2) {
                m2 = c;
            }
        }
        gsc[lid] = m1 + m2;
    }
    workgroupBarrier();
    if (lid < G) {
        var rank = 0u;
        for (var h = 0u; h < G; h++) {
            if (before(gsc[h], h, gsc[lid], lid)) {
                rank++;
            }
        }
        keep[lid] = select(0u, 1u, rank < p.topk_group);
    }
    workgroupBarrier();
    pick(t, lid, true);
    if (lid != 0u) {
        return;
    }
    // The weights are the picks' unbiased scores, not their choice scores.
    let K = p.topk;
    for (var j = 0u; j < K; j++) {
        wts[t * K + j] = r[base + ids[t * K + j]];
    }
    settle(t, 1e-20, p.scale);
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
    if (p.has_shared == 1u) {
        acc += 1.0 / (1.0 + exp(-sgate[t])) * shared_y[t * p.d + c];
    } else if (p.has_shared == 2u) {
        acc += shared_y[t * p.d + c];
    }
    out[t * p.d + c] = acc;
}
