// Package onnxmodel exports a checkpoint, or a q4 variant of it, as an ONNX
// graph that onnxruntime (onnxruntime-web in a page) runs to the logits of
// every input position: the one in-browser peer that gives full rows for
// the page's own token ids (wllama takes text and returns the sampled
// token's logits only).
//
// Each q4 matrix becomes a com.microsoft MatMulNBits node with bits 4 and
// block_size 32 holding logitscope's codes as they are: MatMulNBits
// dequantizes a 4-bit code u of a block with scale s and zero point z as
// (u − z)·s, and a block here is a q4 group (32 weights along a row, one
// f16 scale), stored as u = q + 8 under the default zero point z = 8, with
// s the group's f16 scale widened to float32. So every weight is
// float32(q)·s, exactly the value quant.Dequantize gives, and a difference
// in the logits is the runtime's arithmetic, not the weights.
package onnxmodel

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"path/filepath"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/onnx"
	"logitscope/internal/format/safetensors"
	"logitscope/internal/model"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
)

// Export writes ck's model to out as one ONNX graph: input_ids (int64,
// (1, S)) -> logits (float32, (1, S, vocab)), every position's row, for
// S up to maxLen (the RoPE and causal-mask tables are that long). The
// weights are the checkpoint's own in float32 (v nil) or variant v's: q4
// matrices as MatMulNBits, the ones its policy kept as float32 MatMuls,
// the embedding gathered from its dequantized rows. Dense Qwen2 and Llama
// models (any RoPE scaling logitscope reads) export; other architectures,
// sliding windows, partial rotary and schemes other than q4 are refused.
// The model's metadata_props say which checkpoint and variant it computes
// and maxLen (Meta, ReadMeta).
func Export(out io.Writer, ck *checkpoint.Checkpoint, v *variant.Variant, maxLen int) error {
	g, err := model.GeometryOf(ck.Config)
	if err != nil {
		return fmt.Errorf("%s/%w", ck.Dir, err)
	}
	if err := exportable(g); err != nil {
		return fmt.Errorf("%s: %w", ck.Dir, err)
	}
	if maxLen < 1 || maxLen > g.MaxPos {
		return fmt.Errorf("%s: maxLen %d: want 1..%d (max_position_embeddings)", ck.Dir, maxLen, g.MaxPos)
	}
	var w model.Weights = model.CheckpointWeights(ck)
	if v != nil {
		w = v
	}
	if err := model.Check(ck.Dir, g, w); err != nil {
		return err
	}
	meta, err := metaOf(ck, g, v, maxLen)
	if err != nil {
		return err
	}
	b := &builder{g: g, w: w, v: v}
	if err := b.build(maxLen); err != nil {
		return err
	}
	return onnx.Write(out, onnx.Model{
		Producer: "logitscope",
		Opsets:   []onnx.Opset{{Domain: "", Version: 17}, {Domain: "com.microsoft", Version: 1}},
		Graph:    b.graph,
		Metadata: meta.props(),
	})
}

// exportable refuses what the graph does not compute.
func exportable(g model.Geometry) error {
	switch {
	case g.Arch != "Qwen2ForCausalLM" && g.Arch != "LlamaForCausalLM":
		return fmt.Errorf("config.json: architectures %s: only Qwen2ForCausalLM and LlamaForCausalLM export to ONNX", g.Arch)
	case g.Experts > 0:
		return fmt.Errorf("config.json: %d experts: mixtures of experts do not export to ONNX", g.Experts)
	case g.RopeDim() != g.HeadDim:
		return fmt.Errorf("config.json: rotary dim %d of head dim %d: partial RoPE does not export to ONNX", g.RopeDim(), g.HeadDim)
	case g.QKNorm || g.NormUnitOffset || g.EmbedScale != 0 || g.GeluTanh || g.SandwichNorm || g.LocalRopeTheta != 0:
		return fmt.Errorf("config.json: %s's Gemma 3 / Qwen3 features do not export to ONNX", g.Arch)
	}
	for l, win := range g.Window {
		if win > 0 {
			return fmt.Errorf("config.json: layer %d has a sliding window of %d: windows do not export to ONNX", l, win)
		}
	}
	return nil
}

// builder accumulates the graph.
type builder struct {
	g     model.Geometry
	w     model.Weights
	v     *variant.Variant
	graph onnx.Graph
	n     int // values named so far
}

// op adds a node of ONNX's own domain with one output and returns it.
func (b *builder) op(op string, attrs []onnx.Attr, in ...string) string {
	b.n++
	out := fmt.Sprintf("%s_%d", op, b.n)
	b.graph.Nodes = append(b.graph.Nodes, onnx.Node{Op: op, Name: out, Inputs: in, Outputs: []string{out}, Attrs: attrs})
	return out
}

// init adds an initializer and returns its name.
func (b *builder) init(name string, typ int32, dims []int64, raw []byte) string {
	b.graph.Initializers = append(b.graph.Initializers, onnx.Tensor{Name: name, Type: typ, Dims: dims, Raw: raw})
	return name
}

func (b *builder) floats(name string, x []float32, dims ...int64) string {
	return b.init(name, onnx.Float, dims, safetensors.EncodeF32(x))
}

// ints is a constant int64 vector (shapes, axes, slice bounds), one per
// distinct value list.
func (b *builder) ints(v ...int64) string {
	name := fmt.Sprint("const", v)
	for _, t := range b.graph.Initializers {
		if t.Name == name {
			return name
		}
	}
	raw := make([]byte, 0, 8*len(v))
	for _, x := range v {
		raw = binary.LittleEndian.AppendUint64(raw, uint64(x))
	}
	return b.init(name, onnx.Int64, []int64{int64(len(v))}, raw)
}

func (b *builder) build(maxLen int) error {
	g := b.g
	hd := int64(g.HeadDim)
	b.graph.Name = "logitscope"
	b.graph.Inputs = []onnx.Value{{Name: "input_ids", Type: onnx.Int64, Dims: []int64{1, 0}, Params: []string{"", "sequence"}}}
	b.graph.Output = []onnx.Value{{Name: "logits", Type: onnx.Float, Dims: []int64{1, 0, int64(g.Vocab)}, Params: []string{"", "sequence", ""}}}

	// S as a 1-element vector, to cut the tables to the sequence.
	s := b.op("Slice", nil, b.op("Shape", nil, "input_ids"), b.ints(1), b.ints(2), b.ints(0))
	cosT, sinT := b.rotations(maxLen)
	cos := b.op("Slice", nil, cosT, b.ints(0), s, b.ints(0)) // (S, hd)
	sin := b.op("Slice", nil, sinT, b.ints(0), s, b.ints(0))
	mask := b.op("Slice", nil, b.causalMask(maxLen), b.ints(0, 0), b.op("Concat", []onnx.Attr{onnx.Int("axis", 0)}, s, s), b.ints(0, 1)) // (S, S)

	embed, _, err := b.w.Float32(model.EmbedName)
	if err != nil {
		return err
	}
	x := b.op("Gather", []onnx.Attr{onnx.Int("axis", 0)}, b.floats(model.EmbedName, embed, int64(g.Vocab), int64(g.Dim)), "input_ids") // (1, S, d)
	for l := range g.NumLayers {
		n := g.Names(l)
		h, err := b.norm(x, n.AttnNorm)
		if err != nil {
			return err
		}
		q, err := b.linear(h, n.Wq, n.Bq, g.QKVBias)
		if err == nil {
			x, err = b.attention(x, h, q, n, cos, sin, mask, hd)
		}
		if err != nil {
			return err
		}
		if h, err = b.norm(x, n.MLPNorm); err != nil {
			return err
		}
		gate, err := b.linear(h, n.Wgate, n.Bgate, g.MLPBias)
		if err != nil {
			return err
		}
		up, err := b.linear(h, n.Wup, n.Bup, g.MLPBias)
		if err != nil {
			return err
		}
		act := b.op("Mul", nil, b.op("Mul", nil, gate, b.op("Sigmoid", nil, gate)), up) // SiLU(gate)·up
		down, err := b.linear(act, n.Wdown, n.Bdown, g.MLPBias)
		if err != nil {
			return err
		}
		x = b.op("Add", nil, x, down)
	}
	h, err := b.norm(x, model.NormName)
	if err != nil {
		return err
	}
	head := model.HeadName
	if g.TiedHead {
		head = model.EmbedName
	}
	logits, err := b.linear(h, head, "", false)
	if err != nil {
		return err
	}
	b.graph.Nodes = append(b.graph.Nodes, onnx.Node{Op: "Identity", Name: "logits", Inputs: []string{logits}, Outputs: []string{"logits"}})
	return nil
}

// attention is x plus layer n's attention over h, its queries q (1, S, H·hd).
func (b *builder) attention(x, h, q string, n model.LayerNames, cos, sin, mask string, hd int64) (string, error) {
	g := b.g
	k, err := b.linear(h, n.Wk, n.Bk, g.QKVBias)
	if err != nil {
		return "", err
	}
	v, err := b.linear(h, n.Wv, n.Bv, g.QKVBias)
	if err != nil {
		return "", err
	}
	heads := func(t string, nh int) string { // (1, S, nh·hd) -> (1, nh, S, hd)
		return b.op("Transpose", []onnx.Attr{onnx.Ints("perm", 0, 2, 1, 3)}, b.op("Reshape", nil, t, b.ints(0, 0, int64(nh), hd)))
	}
	rope := func(t string) string { // t·cos + rotate_half(t)·sin, NeoX halves
		x1 := b.op("Slice", nil, t, b.ints(0), b.ints(hd/2), b.ints(-1))
		x2 := b.op("Slice", nil, t, b.ints(hd/2), b.ints(hd), b.ints(-1))
		rot := b.op("Concat", []onnx.Attr{onnx.Int("axis", -1)}, b.op("Neg", nil, x2), x1)
		return b.op("Add", nil, b.op("Mul", nil, t, cos), b.op("Mul", nil, rot, sin))
	}
	repeat := func(t string) string { // GQA: (1, KV, S, hd) -> (1, H, S, hd)
		rep := int64(g.Heads / g.KVHeads)
		if rep == 1 {
			return t
		}
		t = b.op("Expand", nil, b.op("Unsqueeze", nil, t, b.ints(2)), b.ints(1, 1, rep, 1, 1))
		return b.op("Reshape", nil, t, b.ints(1, int64(g.Heads), -1, hd))
	}
	qh := rope(heads(q, g.Heads))
	kh := repeat(rope(heads(k, g.KVHeads)))
	vh := repeat(heads(v, g.KVHeads))
	scale := b.floats(fmt.Sprintf("attn_scale_%d", b.n), []float32{g.AttnScale()})
	scores := b.op("Mul", nil, b.op("MatMul", nil, qh, b.op("Transpose", []onnx.Attr{onnx.Ints("perm", 0, 1, 3, 2)}, kh)), scale)
	p := b.op("Softmax", []onnx.Attr{onnx.Int("axis", -1)}, b.op("Add", nil, scores, mask)) // (1, H, S, S)
	ctx := b.op("Transpose", []onnx.Attr{onnx.Ints("perm", 0, 2, 1, 3)}, b.op("MatMul", nil, p, vh))
	o, err := b.linear(b.op("Reshape", nil, ctx, b.ints(0, 0, int64(g.Heads)*hd)), n.Wo, n.Bo, g.OBias)
	if err != nil {
		return "", err
	}
	return b.op("Add", nil, x, o), nil
}

// norm is RMSNorm: x / sqrt(mean(x²) + eps) · w over the last axis.
func (b *builder) norm(x, name string) (string, error) {
	w, _, err := b.w.Float32(name)
	if err != nil {
		return "", err
	}
	eps := b.floats(fmt.Sprintf("eps_%d", b.n), []float32{b.g.NormEps})
	ms := b.op("ReduceMean", []onnx.Attr{onnx.Ints("axes", -1), onnx.Int("keepdims", 1)}, b.op("Mul", nil, x, x))
	y := b.op("Div", nil, x, b.op("Sqrt", nil, b.op("Add", nil, ms, eps)))
	return b.op("Mul", nil, y, b.floats(name, w, int64(len(w)))), nil
}

// linear is x (…, in) @ Wᵀ (+ bias) -> (…, out) for the (out, in) matrix
// name: MatMulNBits on its q4 codes, or MatMul on its float32 transpose.
func (b *builder) linear(x, name, bias string, hasBias bool) (string, error) {
	shape, file, _, ok := b.w.Shape(name)
	if !ok || len(shape) != 2 {
		return "", fmt.Errorf("%s: %s has shape %v, want an (out, in) matrix", file, name, shape)
	}
	rows, cols := shape[0], shape[1]
	var y string
	if b.v != nil && len(b.v.Pieces(name)) > 0 && b.v.Pieces(name)[0].Scheme != variant.SchemeF32 {
		bq, scales, err := b.q4(name, rows, cols)
		if err != nil {
			return "", err
		}
		groups := int64((cols + quant.GroupSize - 1) / quant.GroupSize)
		b.n++
		y = fmt.Sprintf("MatMulNBits_%d", b.n)
		b.graph.Nodes = append(b.graph.Nodes, onnx.Node{Op: "MatMulNBits", Domain: "com.microsoft", Name: y,
			Inputs: []string{x, b.init(name+".q4", onnx.Uint8, []int64{int64(rows), groups, quant.GroupSize / 2}, bq),
				b.floats(name+".scales", scales, int64(rows)*groups)},
			Outputs: []string{y},
			Attrs: []onnx.Attr{onnx.Int("K", int64(cols)), onnx.Int("N", int64(rows)), onnx.Int("bits", 4),
				onnx.Int("block_size", quant.GroupSize), onnx.Int("accuracy_level", 0)}})
	} else {
		w, _, err := b.w.Float32(name)
		if err != nil {
			return "", err
		}
		t := make([]float32, len(w)) // (out, in) -> (in, out)
		for r := range rows {
			for c := range cols {
				t[c*rows+r] = w[r*cols+c]
			}
		}
		y = b.op("MatMul", nil, x, b.floats(name+".T", t, int64(cols), int64(rows)))
	}
	if !hasBias {
		return y, nil
	}
	bv, _, err := b.w.Float32(bias)
	if err != nil {
		return "", err
	}
	return b.op("Add", nil, y, b.floats(bias, bv, int64(len(bv)))), nil
}

// q4 packs variant matrix name (rows, cols) for MatMulNBits: B (rows,
// groups, 16) bytes, byte i of a block holding weight 2i's code in its
// low nibble and weight 2i+1's in its high one, each as q + 8; scales
// (rows·groups) float32, the f16 scales widened.
func (b *builder) q4(name string, rows, cols int) ([]byte, []float32, error) {
	groups := (cols + quant.GroupSize - 1) / quant.GroupSize
	bq := make([]byte, 0, rows*groups*quant.GroupSize/2)
	scales := make([]float32, 0, rows*groups)
	for _, p := range b.v.Pieces(name) {
		if p.Scheme != "q4" {
			return nil, nil, fmt.Errorf("%s: %s rows %v are %s: only q4 (and float32) matrices export to ONNX", filepath.Join(b.v.Dir, p.Shard), name, p.Rows, p.Scheme)
		}
		blob, err := b.v.Raw(p)
		if err != nil {
			return nil, nil, err
		}
		l, err := quant.NewLayout(quant.Q4, p.Rows[1]-p.Rows[0], cols)
		if err != nil {
			return nil, nil, err
		}
		for r := range l.Rows {
			err := l.Codes(blob, r, func(_ int, scale uint16, q *[quant.GroupSize]int8) {
				scales = append(scales, safetensors.FromF16(scale))
				for i := range quant.GroupSize / 2 {
					bq = append(bq, byte(q[2*i]+8)|byte(q[2*i+1]+8)<<4)
				}
			})
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %s: %w", filepath.Join(b.v.Dir, p.Shard), name, err)
			}
		}
	}
	return bq, scales, nil
}

// rotations are RoPE's cosine and sine tables (maxLen, hd), each row the
// angles' values for both halves, as model.Rotation gives every engine.
func (b *builder) rotations(maxLen int) (string, string) {
	inv := b.g.InvFreq()
	hd := b.g.HeadDim
	cos, sin := make([]float32, maxLen*hd), make([]float32, maxLen*hd)
	for p := range maxLen {
		for i, f := range inv {
			c, s := model.Rotation(p, f)
			cos[p*hd+i], cos[p*hd+i+hd/2] = c, c
			sin[p*hd+i], sin[p*hd+i+hd/2] = s, s
		}
	}
	return b.floats("rope_cos", cos, int64(maxLen), int64(hd)), b.floats("rope_sin", sin, int64(maxLen), int64(hd))
}

// causalMask is (maxLen, maxLen): 0 where key j ≤ query i, −inf after.
func (b *builder) causalMask(maxLen int) string {
	m := make([]float32, maxLen*maxLen)
	for i := range maxLen {
		for j := i + 1; j < maxLen; j++ {
			m[i*maxLen+j] = float32(math.Inf(-1))
		}
	}
	return b.floats("causal_mask", m, int64(maxLen), int64(maxLen))
}
