// Package model holds a decoder-only transformer's geometry and float32
// weights, loaded from a checkpoint and checked against its config. It knows
// the tensor names and semantics of Qwen2ForCausalLM and LlamaForCausalLM.
package model

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"logitscope/checkpoint"
)

// Geometry is what the forward pass needs to know of the config.
type Geometry struct {
	Arch       string
	Dim        int     // hidden size d
	Hidden     int     // MLP intermediate size
	NumLayers  int     //
	Heads      int     // query heads
	KVHeads    int     // key/value heads (GQA: Heads is a multiple)
	HeadDim    int     //
	Vocab      int     // rows of the embedding and of the LM head
	MaxPos     int     // context length
	NormEps    float32 // RMSNorm epsilon
	RopeTheta  float64 //
	QKVBias    bool    // q/k/v projections have biases
	OBias      bool    // o_proj has a bias (Llama attention_bias)
	TiedHead   bool    // LM head is the embedding
	EOSFromCfg []int   // generation_config's eos ids, if any
}

// Matrix is a row-major (Rows, Cols) float32 matrix: a Linear weight
// W (out, in) in Hugging Face's layout.
type Matrix struct {
	Rows, Cols int
	Data       []float32
}

// Row returns row r (Cols,) without copying.
func (m *Matrix) Row(r int) []float32 { return m.Data[r*m.Cols : (r+1)*m.Cols] }

// Layer is one transformer block.
type Layer struct {
	AttnNorm       []float32 // (d,)
	Wq, Wk, Wv, Wo *Matrix   // (Heads*hd, d), (KVHeads*hd, d) ×2, (d, Heads*hd)
	Bq, Bk, Bv, Bo []float32 // nil when the architecture has none
	MLPNorm        []float32 // (d,)
	Wgate, Wup     *Matrix   // (Hidden, d)
	Wdown          *Matrix   // (d, Hidden)
}

// Model is a loaded checkpoint.
type Model struct {
	Geometry
	Embed  *Matrix // (Vocab, d)
	Layers []Layer
	Norm   []float32 // (d,)
	Head   *Matrix   // (Vocab, d); the same *Matrix as Embed when tied
}

// GeometryOf maps a config to the forward pass's geometry, refusing
// architectures whose semantics this package does not implement.
func GeometryOf(c checkpoint.Config) (Geometry, error) {
	g := Geometry{
		Arch: c.Arch(), Dim: c.HiddenSize, Hidden: c.IntermediateSize, NumLayers: c.NumHiddenLayers,
		Heads: c.NumAttentionHeads, KVHeads: c.NumKeyValueHeads, HeadDim: c.HeadDim,
		Vocab: c.VocabSize, MaxPos: c.MaxPositionEmbeddings, NormEps: float32(c.RMSNormEps),
		RopeTheta: c.RopeTheta, TiedHead: c.TieWordEmbeddings,
	}
	if c.HiddenAct != "" && c.HiddenAct != "silu" {
		return g, fmt.Errorf("config.json: hidden_act %q is not supported (only silu)", c.HiddenAct)
	}
	if c.RopeScaling != nil {
		// Llama 3's "llama3" scaling and YaRN change every frequency.
		return g, fmt.Errorf("config.json: rope_scaling %s is not supported yet", c.RopeScaling)
	}
	switch g.Arch {
	case "Qwen2ForCausalLM":
		// Qwen2 always has q/k/v biases and never an o_proj bias.
		g.QKVBias = true
	case "LlamaForCausalLM":
		if c.AttentionBias != nil && *c.AttentionBias {
			g.QKVBias, g.OBias = true, true
		}
	default:
		return g, fmt.Errorf("config.json: architecture %q is not supported (supported: Qwen2ForCausalLM, LlamaForCausalLM)", g.Arch)
	}
	return g, nil
}

// Weights is where a model's tensors come from: a checkpoint's own bytes or
// a quantized variant. Float32 returns the values the forward pass uses.
type Weights interface {
	Names() []string
	// Shape locates a tensor: its shape, the file holding it (for errors)
	// and its stored size in bytes (for progress).
	Shape(name string) (shape []int, file string, size int64, ok bool)
	Float32(name string) ([]float32, []int, error)
}

// checkpointWeights serves a checkpoint's own tensors, decoded to float32.
type checkpointWeights struct{ *checkpoint.Checkpoint }

func (c checkpointWeights) Shape(name string) ([]int, string, int64, bool) {
	info, file, ok := c.Info(name)
	return info.Shape, file, info.Length, ok
}

// Load decodes every weight of ck to float32; see LoadWeights.
func Load(ck *checkpoint.Checkpoint, progress func(done, total int64)) (*Model, error) {
	return LoadWeights(ck, checkpointWeights{ck}, progress)
}

// LoadWeights builds the model that ck's config describes from w, checking
// each tensor's shape against the config and refusing tensors the forward
// pass would ignore. progress, if not nil, is told the stored bytes read so
// far after each tensor.
func LoadWeights(ck *checkpoint.Checkpoint, w Weights, progress func(done, total int64)) (*Model, error) {
	g, err := GeometryOf(ck.Config)
	if err != nil {
		return nil, fmt.Errorf("%s/%w", ck.Dir, err)
	}
	g.EOSFromCfg = ck.Generation.EOSTokenIDs
	l := loader{w: w, dir: ck.Dir, used: map[string]bool{}, progress: progress}
	for _, n := range w.Names() {
		_, _, size, _ := w.Shape(n)
		l.total += size
	}
	d, q, kv := g.Dim, g.Heads*g.HeadDim, g.KVHeads*g.HeadDim
	m := &Model{Geometry: g}
	m.Embed = l.matrix("model.embed_tokens.weight", g.Vocab, d)
	m.Layers = make([]Layer, g.NumLayers)
	for i := range m.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		L := &m.Layers[i]
		L.AttnNorm = l.vector(p+"input_layernorm.weight", d)
		L.Wq = l.matrix(p+"self_attn.q_proj.weight", q, d)
		L.Wk = l.matrix(p+"self_attn.k_proj.weight", kv, d)
		L.Wv = l.matrix(p+"self_attn.v_proj.weight", kv, d)
		L.Wo = l.matrix(p+"self_attn.o_proj.weight", d, q)
		if g.QKVBias {
			L.Bq = l.vector(p+"self_attn.q_proj.bias", q)
			L.Bk = l.vector(p+"self_attn.k_proj.bias", kv)
			L.Bv = l.vector(p+"self_attn.v_proj.bias", kv)
		}
		if g.OBias {
			L.Bo = l.vector(p+"self_attn.o_proj.bias", d)
		}
		L.MLPNorm = l.vector(p+"post_attention_layernorm.weight", d)
		L.Wgate = l.matrix(p+"mlp.gate_proj.weight", g.Hidden, d)
		L.Wup = l.matrix(p+"mlp.up_proj.weight", g.Hidden, d)
		L.Wdown = l.matrix(p+"mlp.down_proj.weight", d, g.Hidden)
		if l.err != nil {
			break
		}
	}
	m.Norm = l.vector("model.norm.weight", d)
	if g.TiedHead {
		m.Head = m.Embed
		l.used["lm_head.weight"] = true // some tied checkpoints still store a copy
	} else {
		m.Head = l.matrix("lm_head.weight", g.Vocab, d)
	}
	if l.err != nil {
		return nil, l.err
	}
	if extra := l.unused(); len(extra) > 0 {
		return nil, fmt.Errorf("%s: %d tensors the %s forward pass would ignore, e.g. %s (a config field may be missing)",
			ck.Dir, len(extra), g.Arch, strings.Join(extra[:min(3, len(extra))], ", "))
	}
	return m, nil
}

// loader keeps the first error so that Load reads as a list of tensors.
type loader struct {
	w           Weights
	dir         string
	used        map[string]bool
	err         error
	progress    func(done, total int64)
	done, total int64
}

func (l *loader) tensor(name string, shape ...int) []float32 {
	if l.err != nil {
		return nil
	}
	l.used[name] = true
	stored, file, size, ok := l.w.Shape(name)
	if !ok {
		l.err = fmt.Errorf("%s: missing tensor %s", l.dir, name)
		return nil
	}
	if !slices.Equal(stored, shape) {
		l.err = fmt.Errorf("%s: tensor %s has shape %v, config.json implies %v", file, name, stored, shape)
		return nil
	}
	data, _, err := l.w.Float32(name)
	if err != nil {
		l.err = err
	}
	if l.done += size; l.progress != nil {
		l.progress(l.done, l.total)
	}
	return data
}

func (l *loader) vector(name string, n int) []float32 { return l.tensor(name, n) }

func (l *loader) matrix(name string, rows, cols int) *Matrix {
	data := l.tensor(name, rows, cols)
	if data == nil {
		return nil
	}
	return &Matrix{Rows: rows, Cols: cols, Data: data}
}

// unused lists stored tensors that no field consumed. Rotary inverse
// frequencies stored by old exporters are recomputed, not read.
func (l *loader) unused() []string {
	var out []string
	for _, n := range l.w.Names() {
		if !l.used[n] && !strings.HasSuffix(n, "rotary_emb.inv_freq") {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}
