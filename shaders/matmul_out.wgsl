// matmul_out.wgsl — put for matmul.wgsl's main, main8, rows4 and rows4x8
// with one Y: column col0 + col of token t's row, set or (p.add, a block's
// last product onto the residual stream) added to: one f32 addition, as
// elementwise.wgsl's add makes it, without that kernel's dispatch.
//
// Bindings: matmul.wgsl's (y at 2), nothing more.

fn put(col: u32, t: u32, v: f32) {
    let i = p.y_off + t * p.ldy + p.col0 + col;
    if (p.add != 0u) {
        y[i] = y[i] + v;
    } else {
        y[i] = v;
    }
}
