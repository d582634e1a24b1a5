package ggufmodel

import (
	"encoding/binary"
	"fmt"
	"io"
	"path/filepath"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/ggml"
	"logitscope/internal/format/gguf"
	"logitscope/internal/format/safetensors"
	"logitscope/internal/model"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/internal/text/chat"
	"logitscope/internal/text/tokenizer"
)

// Exported says what Export wrote.
type Exported struct {
	Types map[ggml.Type]int // tensors per type
	// Notes say where llama.cpp will not compute what logitscope does on
	// the same weights (a sliding window it does not apply...).
	Notes []string
}

// schemeTypes are the ggml types that hold a logitscope scheme's bits
// exactly: a value is float32(q)·f16 scale in both, per group of 32. Q6's
// codes (|q| ≤ 31) fit Q8_0's int8s, so q6 exports exactly, in 8 bits.
var schemeTypes = map[string]ggml.Type{"q8": ggml.Q8_0, "q6": ggml.Q8_0, "q4": ggml.Q4_0, variant.SchemeF32: ggml.F32}

// Export writes ck's model to out as a GGUF file llama.cpp loads, so that
// the weights inspected here can be run there: the checkpoint's own
// weights (v nil) in F32, or variant v's with each scheme in the ggml type
// that holds its bits exactly (q8 and q6 in Q8_0, q4 in Q4_0, matrices
// the policy kept in F32); norms and biases in F32. Metadata and tensor
// layout follow llama.cpp's converter: Llama's q/k rows interleaved for
// its RoPE, Gemma's norms plus one, experts stacked. The tokenizer must be
// a byte-level BPE whose split llama.cpp names (Qwen2's, Llama 3's).
func Export(out io.Writer, ck *checkpoint.Checkpoint, v *variant.Variant) (*Exported, error) {
	if ck.GGUF != "" {
		return nil, fmt.Errorf("%s is a GGUF file already", ck.GGUF)
	}
	g, err := model.GeometryOf(ck.Config)
	if err != nil {
		return nil, fmt.Errorf("%s/%w", ck.Dir, err)
	}
	if g.Arch == "Gemma3ForCausalLM" {
		return nil, fmt.Errorf("%s: exporting Gemma 3 is not supported: llama.cpp reads its tokenizer as SentencePiece scores, which tokenizer.json does not hold", ck.Dir)
	}
	ms, err := mappings(g)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ck.Dir, err)
	}
	var w model.Weights = model.CheckpointWeights(ck)
	if v != nil {
		w = v
	}
	if err := model.Check(ck.Dir, g, w); err != nil {
		return nil, err
	}
	kv, notes, err := metadata(ck, g, v)
	if err != nil {
		return nil, err
	}
	e := &Exported{Types: map[ggml.Type]int{}, Notes: notes}
	var tensors []gguf.Tensor
	banks := map[string][]mapping{} // a stacked tensor's experts, in order
	for _, m := range ms {
		if m.expert >= 0 {
			banks[m.gguf] = append(banks[m.gguf], m)
		}
	}
	for _, m := range ms {
		var t gguf.Tensor
		switch {
		case m.expert > 0: // written with expert 0
			continue
		case m.expert == 0:
			t, err = stack(w, v, banks[m.gguf])
		default:
			t, err = tensor(w, v, m)
		}
		if err != nil {
			return nil, err
		}
		tensors = append(tensors, t)
		e.Types[t.Type]++
	}
	if g.Rope.Type == "llama3" {
		tensors = append(tensors, ropeFreqs(g))
		e.Types[ggml.F32]++
	}
	kv = append(kv, gguf.KV{Key: "general.file_type", Value: gguf.Uint32Value(fileType(e.Types))})
	if err := gguf.Write(out, kv, tensors, 0); err != nil {
		return nil, err
	}
	return e, nil
}

// tensor encodes one tensor of its own.
func tensor(w model.Weights, v *variant.Variant, m mapping) (gguf.Tensor, error) {
	shape, file, _, _ := w.Shape(m.hf)
	if len(shape) == 1 || (len(shape) == 2 && shape[0] == 1) {
		x, _, err := w.Float32(m.hf)
		if err != nil {
			return gguf.Tensor{}, err
		}
		for i := range x {
			x[i] += m.shift
		}
		if m.interleaved > 0 {
			x = interleave(x, 1, m.interleaved)
		}
		return gguf.Tensor{Name: m.gguf, Dims: []uint64{uint64(len(x))}, Type: ggml.F32, Data: safetensors.EncodeF32(x)}, nil
	}
	t, data, err := matrix(w, v, m.hf, shape, file)
	if err != nil {
		return gguf.Tensor{}, err
	}
	if m.interleaved > 0 {
		data = interleave(data, len(data)/shape[0], m.interleaved)
	}
	return gguf.Tensor{Name: m.gguf, Dims: []uint64{uint64(shape[1]), uint64(shape[0])}, Type: t, Data: data}, nil
}

// stack encodes the experts of one bank into a (experts, rows, cols)
// tensor, as llama.cpp keeps them.
func stack(w model.Weights, v *variant.Variant, bank []mapping) (gguf.Tensor, error) {
	var t ggml.Type
	var data []byte
	var shape []int
	for i, m := range bank {
		s, file, _, _ := w.Shape(m.hf)
		et, d, err := matrix(w, v, m.hf, s, file)
		if err != nil {
			return gguf.Tensor{}, err
		}
		if i > 0 && et != t {
			return gguf.Tensor{}, fmt.Errorf("%s: %s is %v, expert 0's is %v: llama.cpp stores a bank in one type", file, m.hf, et, t)
		}
		t, shape, data = et, s, append(data, d...)
	}
	return gguf.Tensor{Name: bank[0].gguf, Dims: []uint64{uint64(shape[1]), uint64(shape[0]), uint64(len(bank))}, Type: t, Data: data}, nil
}

// matrix encodes a (rows, cols) matrix: in F32 from the checkpoint, or in
// the ggml type holding its variant scheme's bits.
func matrix(w model.Weights, v *variant.Variant, name string, shape []int, file string) (ggml.Type, []byte, error) {
	rows, cols := shape[0], shape[1]
	if v == nil {
		x, _, err := w.Float32(name)
		return ggml.F32, safetensors.EncodeF32(x), err
	}
	ps := v.Pieces(name)
	t, ok := schemeTypes[ps[0].Scheme]
	if !ok {
		return 0, nil, fmt.Errorf("%s: %s is %s, which has no ggml type", file, name, ps[0].Scheme)
	}
	if t == ggml.F32 {
		x, _, err := w.Float32(name)
		return t, safetensors.EncodeF32(x), err
	}
	rb, err := t.RowBytes(cols)
	if err != nil {
		// ggml blocks cannot pad a row as a group here can: F32 holds the
		// same values (llama.cpp's quantizer falls back likewise).
		x, _, err := w.Float32(name)
		return ggml.F32, safetensors.EncodeF32(x), err
	}
	data := make([]byte, 0, int64(rows)*rb)
	for _, p := range ps {
		if p.Scheme != ps[0].Scheme {
			return 0, nil, fmt.Errorf("%s: %s mixes %s and %s rows: a GGUF tensor has one type", file, name, ps[0].Scheme, p.Scheme)
		}
		blob, err := v.Raw(p)
		if err != nil {
			return 0, nil, err
		}
		s, _ := quant.ParseScheme(p.Scheme)
		l, err := quant.NewLayout(s, p.Rows[1]-p.Rows[0], cols)
		if err != nil {
			return 0, nil, err
		}
		for r := range l.Rows {
			err := l.Codes(blob, r, func(_ int, scale uint16, q *[quant.GroupSize]int8) {
				data = binary.LittleEndian.AppendUint16(data, scale)
				if t == ggml.Q8_0 {
					for _, c := range q {
						data = append(data, byte(c))
					}
					return
				}
				// Q4_0: byte j holds weight j in its low nibble and weight
				// j+16 in its high one, each as q+8.
				for j := range 16 {
					data = append(data, byte(q[j]+8)|byte(q[j+16]+8)<<4)
				}
			})
			if err != nil {
				return 0, nil, fmt.Errorf("%s: %s: %w", filepath.Join(v.Dir, p.Shard), name, err)
			}
		}
	}
	return t, data, nil
}

// interleave is uninterleave's inverse on rows of width values: HF row
// h·(hd/2) + i of each head goes to row 2i + h, as llama.cpp's converter
// permutes Llama's q and k.
func interleave[T any](x []T, width, hd int) []T {
	return permuteRows(x, width, func(r int) int {
		head, j := r/hd, r%hd
		return head*hd + 2*(j%(hd/2)) + j/(hd/2)
	})
}

// permuteRows moves row r of x (rows of width values) to row to(r).
func permuteRows[T any](x []T, width int, to func(int) int) []T {
	out := make([]T, len(x))
	for r := range len(x) / width {
		dst := to(r)
		copy(out[dst*width:(dst+1)*width], x[r*width:(r+1)*width])
	}
	return out
}

// ropeFreqs is llama.cpp's rope_freqs tensor for Llama 3's scaling: the
// factor each inverse frequency is divided by (1 for high frequencies,
// the scaling factor for low ones, a blend between).
func ropeFreqs(g model.Geometry) gguf.Tensor {
	base := (model.Geometry{RopeTheta: g.RopeTheta, HeadDim: g.HeadDim}).InvFreq()
	scaled := g.InvFreq()
	f := make([]float32, len(base))
	for i := range f {
		f[i] = float32(float64(base[i]) / float64(scaled[i]))
	}
	return gguf.Tensor{Name: "rope_freqs.weight", Dims: []uint64{uint64(len(f))}, Type: ggml.F32, Data: safetensors.EncodeF32(f)}
}

// fileType is general.file_type (llama.h's llama_ftype) for the type most
// matrices have: ALL_F32 0, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7.
func fileType(types map[ggml.Type]int) uint32 {
	switch {
	case types[ggml.Q4_0] > 0:
		return 2
	case types[ggml.Q8_0] > 0:
		return 7
	}
	return 0
}

// metadata is the GGUF header llama.cpp's loader needs for g: the
// hyperparameters under the architecture's prefix and the tokenizer.
func metadata(ck *checkpoint.Checkpoint, g model.Geometry, v *variant.Variant) ([]gguf.KV, []string, error) {
	arch := Archs[g.Arch]
	var kv []gguf.KV
	var notes []string
	add := func(k string, v gguf.Value) { kv = append(kv, gguf.KV{Key: k, Value: v}) }
	u32 := func(k string, n int) { add(arch+"."+k, gguf.Uint32Value(uint32(n))) }
	f32 := func(k string, f float64) { add(arch+"."+k, gguf.Float32Value(float32(f))) }
	add("general.architecture", gguf.StringValue(arch))
	add("general.name", gguf.StringValue(filepath.Base(ck.Dir)))
	if v != nil {
		add("general.quantization_version", gguf.Uint32Value(2))
	}
	u32("context_length", g.MaxPos)
	u32("embedding_length", g.Dim)
	u32("block_count", g.NumLayers)
	u32("feed_forward_length", g.Intermediate)
	u32("attention.head_count", g.Heads)
	u32("attention.head_count_kv", g.KVHeads)
	u32("attention.key_length", g.HeadDim)
	u32("attention.value_length", g.HeadDim)
	u32("rope.dimension_count", g.HeadDim)
	u32("vocab_size", g.Vocab)
	f32("attention.layer_norm_rms_epsilon", float64(g.NormEps))
	f32("rope.freq_base", g.RopeTheta)
	if g.Rope.Type == "linear" {
		add(arch+".rope.scaling.type", gguf.StringValue("linear"))
		f32("rope.scaling.factor", g.Rope.Factor)
	}
	if g.Experts > 0 {
		u32("expert_count", g.Experts)
		u32("expert_used_count", g.TopK)
		u32("expert_feed_forward_length", g.ExpertIntermediate)
		if g.SharedIntermediate > 0 {
			u32("expert_shared_feed_forward_length", g.SharedIntermediate)
		}
	}
	for _, w := range g.Window {
		if w > 0 {
			notes = append(notes, fmt.Sprintf("llama.cpp's %s attends to the whole context: the checkpoint's sliding window of %d tokens is not applied there", arch, w))
			break
		}
	}
	tok, err := tokenizer.Load(ck.TokenizerPath())
	if err != nil {
		return nil, nil, err
	}
	tmpl, err := chat.ConfigBeside(ck.TokenizerPath())
	if err != nil {
		return nil, nil, err
	}
	tkv, err := tokenizerKV(tok, tmpl, ck.Generation, g.Vocab)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", ck.TokenizerPath(), err)
	}
	return append(kv, tkv...), notes, nil
}

// tokenizerKV is the tokenizer.* metadata of tok (with the template
// config beside it and the generation config's BOS and EOS), its tokens
// padded to vocab ids as llama.cpp's converter pads them.
func tokenizerKV(tok *tokenizer.Tokenizer, tmpl chat.TemplateConfig, gen checkpoint.GenerationConfig, vocab int) ([]gguf.KV, error) {
	var kv []gguf.KV
	add := func(k string, v gguf.Value) { kv = append(kv, gguf.KV{Key: k, Value: v}) }
	pre := map[string]string{"qwen2": "qwen2", "llama3": "llama-bpe"}[tok.Split()]
	if !tok.ByteLevel() || pre == "" {
		return nil, fmt.Errorf("exporting this tokenizer is not supported: llama.cpp's GGUF needs a byte-level BPE with a split it names (Qwen2's or Llama 3's regex)")
	}
	tokens := make([]string, vocab)
	types := make([]int32, vocab)
	for id := range tokens {
		s, ok := tok.Token(id)
		switch {
		case !ok:
			// As llama.cpp's converter pads a vocabulary to vocab_size.
			s, types[id] = fmt.Sprintf("[PAD%d]", id), tokenUnused
		case tok.IsSpecial(id):
			types[id] = tokenControl
		case tok.IsAdded(id):
			types[id] = tokenUserDefined
		default:
			types[id] = tokenNormal
		}
		tokens[id] = s
	}
	add("tokenizer.ggml.model", gguf.StringValue("gpt2"))
	add("tokenizer.ggml.pre", gguf.StringValue(pre))
	add("tokenizer.ggml.tokens", gguf.StringsValue(tokens))
	add("tokenizer.ggml.token_type", gguf.Int32sValue(types))
	add("tokenizer.ggml.merges", gguf.StringsValue(tok.Merges()))
	prefix := chat.RawPrefix(tok, tmpl)
	add("tokenizer.ggml.add_bos_token", gguf.BoolValue(len(prefix) > 0))
	bos := gen.BOSTokenID
	if len(prefix) > 0 {
		bos = &prefix[0]
	}
	if bos != nil {
		add("tokenizer.ggml.bos_token_id", gguf.Uint32Value(uint32(*bos)))
	}
	if id, ok := tok.TokenID(tmpl.Tokens["eos_token"]); ok {
		add("tokenizer.ggml.eos_token_id", gguf.Uint32Value(uint32(id)))
	} else if len(gen.EOSTokenIDs) > 0 {
		add("tokenizer.ggml.eos_token_id", gguf.Uint32Value(uint32(gen.EOSTokenIDs[0])))
	}
	if tmpl.Template != "" {
		add("tokenizer.chat_template", gguf.StringValue(tmpl.Template))
	}
	return kv, nil
}
