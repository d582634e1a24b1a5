// matmul_out.wgsl — put for matmul.wgsl's main, main8, rows4 and rows4x8
// with one Y: column col0 + col of token t's row.
//
// Bindings: matmul.wgsl's (y at 2), nothing more.

fn put(col: u32, t: u32, v: f32) {
    y[p.y_off + t * p.ldy + p.col0 + col] = v;
}
