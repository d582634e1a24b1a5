// lookup.wgsl — decoding a hub quantization's lookup matrix (package
// lookup: GPTQ, AWQ, compressed-tensors, MLX, bitsandbytes transcoded
// without loss), shared by the kernels that read a weight matrix
// (prepended before ggml.wgsl to matmul.wgsl and embed.wgsl). With
// FORMAT LOOKUP, ggml.wgsl's ggml_group calls lookup_group, so every
// entry point that reads ggml's block types (main, main8, rows4, rows4x8,
// expert, embed's main) reads a lookup matrix: cols a multiple of 32.
//
// Bindings: none of its own; it reads the weights w (binding 0) of the
// kernel it is prepended to.
//
// A piece of W (rows, cols) is a blob of little-endian u32 words from
// word w0 of w (weights.wgsl's w0: a bank holds several experts' blobs,
// each its own header), laid out by gpuengine.LookupBlob:
//   [0, 10)  header: bits (4 or 8), cols, rows, groups, group_size (0:
//            the groups come from gidx), row_words (words of codes a
//            row), scale_at, offset_at (0: no offsets), table_at,
//            gidx_at (0: none), each a word index from the blob's start
//   [10, 10 + rows*row_words)  codes: row r's at 10 + r*row_words, as
//            lookup.Matrix stores them (4-bit: code c in nibble c%8 of
//            word c/8, low nibble first; 8-bit: byte c%4 of word c/4)
//   scale_at:  (rows, groups) f32, row-major
//   offset_at: (rows, groups) f32
//   table_at:  (1 << bits) f32, the value of each code
//   gidx_at:   (cols) u32, column c's group
// Weight (r, c) = table[code] * scale[r, g(c)] + offset[r, g(c)], the
// product rounded before the sum (lavapipe does not contract a*b+c;
// lookup.Matrix.Row rounds the same), g(c) = gidx[c] or c / group_size.

const LOOKUP: u32 = 29u;
const LOOKUP_HEADER: u32 = 10u;

// lookup_group decodes weights 32g..32g+31 of row r into gq (ggml.wgsl),
// reading each word of codes once.
fn lookup_group(r: u32, g: u32) {
    let bits = w[w0];
    let groups = w[w0 + 3u];
    let gsize = w[w0 + 4u];
    let codes = w0 + LOOKUP_HEADER + r * w[w0 + 5u];
    let scale_at = w0 + w[w0 + 6u] + r * groups;
    let offset_at = w[w0 + 7u];
    let table_at = w0 + w[w0 + 8u];
    let gidx_at = w0 + w[w0 + 9u];
    let per = 32u / bits; // codes a word
    let mask = (1u << bits) - 1u;
    for (var i = 0u; i < bits; i++) { // the group's words of codes
        let word = w[codes + g * bits + i];
        for (var j = 0u; j < per; j++) {
            let k = i * per + j;
            let c = g * 32u + k;
            var grp = 0u;
            if (gsize == 0u) {
                grp = w[gidx_at + c];
            } else {
                grp = c / gsize;
            }
            let q = (word >> (bits * j)) & mask;
            var v = bitcast<f32>(w[table_at + q]) * bitcast<f32>(w[scale_at + grp]);
            if (offset_at != 0u) {
                v = v + bitcast<f32>(w[w0 + offset_at + r * groups + grp]);
            }
            gq[k] = v;
        }
    }
}
