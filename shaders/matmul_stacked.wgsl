// matmul_stacked.wgsl — put for a stacked piece: two or three matrices of
// one format and width laid one above the other as a single matrix's
// piece would hold them (q, k and v; gate and up), multiplied in one
// dispatch, each matrix's rows stored in its own Y. One dispatch instead
// of three (or two) costs a GPU one launch and one pass over X instead of
// several.
//
// Bindings (group 0), besides matmul.wgsl's:
//   2 y:  array<f32>  the first matrix's Y: rows [0, split1) of the piece,
//                     element (t, c) at y_off + t*ldy + c (col0 is 0)
//   6 y1: array<f32>  the second's: rows [split1, split2 or n_rows),
//                     element (t, c - split1) at y1_off + t*ld1 + c - split1
//   7 y2: array<f32>  the third's, rows [split2, n_rows), when split2 is
//                     not 0 (else bound to anything, never written)
//   3 b:  the matrices' biases stacked the same way
// Interleave (q and k of a GGUF Llama) applies to rows below plain_from
// (v's first row; 0: all): each matrix starts on a head boundary, so the
// permutation keeps every row within its own matrix.

@group(0) @binding(6) var<storage, read_write> y1: array<f32>;
@group(0) @binding(7) var<storage, read_write> y2: array<f32>;

fn put(col: u32, t: u32, v: f32) {
    if (p.split2 != 0u && col >= p.split2) {
        y2[p.y2_off + t * p.ld2 + col - p.split2] = v;
    } else if (col >= p.split1) {
        y1[p.y1_off + t * p.ld1 + col - p.split1] = v;
    } else {
        y[p.y_off + t * p.ldy + col] = v;
    }
}
