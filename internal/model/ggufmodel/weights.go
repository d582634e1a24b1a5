package ggufmodel

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"logitscope/internal/format/ggml"
	"logitscope/internal/format/gguf"
	"logitscope/internal/model"
	"logitscope/internal/text/tokenizer"
)

// Weights is a GGUF file opened as the weights of a model whose geometry
// is known (the Hugging Face checkpoint it was converted from). It serves
// model.Weights: every tensor under its Hugging Face name and shape,
// decoded to float32 exactly as ggml dequantizes it, then un-permuted and
// un-shifted.
type Weights struct {
	File   *gguf.File
	Arch   string // general.architecture
	maps   map[string]mapping
	shapes map[string][]int // Hugging Face shapes
	names  []string         // Hugging Face names, in the geometry's order
}

// Open reads path's header and maps it onto g: the architecture, the
// hyperparameters the metadata states and every tensor's shape must agree
// with g, every tensor must be one g reads (rope_freqs, which llama.cpp
// precomputes from the config, aside), and every type one ggml.Dequantize
// decodes. Errors name the file and the key or tensor.
func Open(path string, g model.Geometry) (*Weights, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	arch, err := f.String("general.architecture")
	if err != nil {
		return nil, err
	}
	ms, err := mappings(g)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if want := Archs[g.Arch]; arch != want {
		return nil, fmt.Errorf("%s: general.architecture is %q; the checkpoint is %s, which llama.cpp names %q", path, arch, g.Arch, want)
	}
	if err := checkHyper(f, arch, g); err != nil {
		return nil, err
	}
	w := &Weights{File: f, Arch: arch, maps: map[string]mapping{}, shapes: map[string][]int{}}
	used := map[string]bool{}
	specs := map[string][]int{}
	for _, s := range g.Specs() {
		specs[s.Name] = s.Shape
	}
	for _, m := range ms {
		info, ok := f.Tensor(m.gguf)
		if !ok {
			return nil, fmt.Errorf("%s: no tensor %s (the model's %s)", path, m.gguf, m.hf)
		}
		if !ggml.Supported(info.Type) {
			return nil, fmt.Errorf("%s: tensor %s: type %v is not supported", path, m.gguf, info.Type)
		}
		if got, want := stored(info, m), specs[m.hf]; !sameShape(got, want) {
			return nil, fmt.Errorf("%s: tensor %s has shape %v (dims %v); the model's %s is %v", path, m.gguf, got, info.Dims, m.hf, want)
		}
		used[m.gguf] = true
		w.maps[m.hf], w.shapes[m.hf] = m, specs[m.hf]
		w.names = append(w.names, m.hf)
	}
	var extra []string
	for _, t := range f.Tensors {
		if !used[t.Name] && t.Name != "rope_freqs.weight" {
			extra = append(extra, t.Name)
		}
	}
	if len(extra) > 0 {
		return nil, fmt.Errorf("%s: %d tensors a %s forward pass would not read, e.g. %s", path, len(extra), g.Arch, strings.Join(extra[:min(3, len(extra))], ", "))
	}
	return w, nil
}

// stored is the shape of m's part of info in Hugging Face order: one
// expert's matrix of a stacked bank (experts, rows, cols).
func stored(info gguf.TensorInfo, m mapping) []int {
	s := info.Shape()
	if m.expert >= 0 {
		if len(s) != 3 || m.expert >= s[0] {
			return s
		}
		return s[1:]
	}
	return s
}

// sameShape compares shapes as ggml does: trailing dims of 1 in ggml order
// (leading ones here) do not count, so Qwen2-MoE's shared expert gate,
// (1, d) in the checkpoint, matches llama.cpp's {d}.
func sameShape(a, b []int) bool {
	trim := func(s []int) []int {
		for len(s) > 1 && s[0] == 1 {
			s = s[1:]
		}
		return s
	}
	return slices.Equal(trim(a), trim(b))
}

// checkHyper compares the hyperparameters the metadata states with g's;
// keys a converter left out are not required (the tensors' shapes are
// checked too, and the engine runs the config's values).
func checkHyper(f *gguf.File, arch string, g model.Geometry) error {
	for _, k := range []struct {
		key  string
		want int
	}{
		{"block_count", g.NumLayers},
		{"embedding_length", g.Dim},
		{"attention.head_count", g.Heads},
		{"attention.head_count_kv", g.KVHeads},
		{"expert_count", g.Experts},
		{"expert_used_count", g.TopK},
	} {
		key := arch + "." + k.key
		if !f.Has(key) {
			continue
		}
		v, err := f.Uint(key)
		if err != nil {
			return err
		}
		if v != uint64(k.want) {
			return fmt.Errorf("%s: %s is %d; the model's config says %d", f.Path, key, v, k.want)
		}
	}
	// What no tensor's shape shows: a file stating another RMS epsilon or
	// RoPE base would run as if it said the config's. GGUF stores them as
	// float32, so they must equal the config's float32.
	for _, k := range []struct {
		key  string
		want float64
	}{
		{"attention.layer_norm_rms_epsilon", float64(g.NormEps)},
		{"rope.freq_base", g.RopeTheta},
		{"rope.freq_base_swa", g.LocalRopeTheta},
	} {
		key := arch + "." + k.key
		if !f.Has(key) || k.want == 0 {
			continue
		}
		v, err := f.Float(key)
		if err != nil {
			return err
		}
		if float32(v) != float32(k.want) {
			return fmt.Errorf("%s: %s is %g; the model's config says %g", f.Path, key, float32(v), float32(k.want))
		}
	}
	return nil
}

// Names lists the tensors under their Hugging Face names.
func (w *Weights) Names() []string { return w.names }

// Shape is name's Hugging Face shape, the file and its stored bytes.
func (w *Weights) Shape(name string) ([]int, string, int64, bool) {
	m, ok := w.maps[name]
	if !ok {
		return nil, "", 0, false
	}
	info, _ := w.File.Tensor(m.gguf)
	size := info.Size
	if m.expert >= 0 {
		size /= int64(info.Shape()[0])
	}
	return w.shapes[name], w.File.Path, size, true
}

// Matrix locates a matrix for a device that decodes it itself (the GPU):
// its type, rows, cols and the file offset of row 0, and the head dim of
// an interleaved row order (0 for none).
func (w *Weights) Matrix(name string) (t ggml.Type, offset int64, rows, cols, interleaved int, ok bool) {
	m, ok := w.maps[name]
	if !ok {
		return 0, 0, 0, 0, 0, false
	}
	info, _ := w.File.Tensor(m.gguf)
	shape := stored(info, m)
	rows, cols = 1, shape[len(shape)-1]
	for _, d := range shape[:len(shape)-1] {
		rows *= d
	}
	offset = info.Offset
	if m.expert >= 0 {
		rb, _ := info.Type.RowBytes(cols)
		offset += int64(m.expert) * int64(rows) * rb
	}
	return info.Type, offset, rows, cols, m.interleaved, true
}

// Float32 decodes name as ggml does and undoes the converter: Gemma's
// norm shift subtracted (exact: the stored weight is the checkpoint's
// bfloat16 plus one, in float32) and Llama's q/k rows put back in
// Hugging Face's order.
func (w *Weights) Float32(name string) ([]float32, []int, error) {
	t, offset, rows, cols, interleaved, ok := w.Matrix(name)
	if !ok {
		return nil, nil, fmt.Errorf("%s: no tensor %s", w.File.Path, name)
	}
	m := w.maps[name]
	rb, err := t.RowBytes(cols)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: tensor %s: %w", w.File.Path, m.gguf, err)
	}
	buf := make([]byte, int64(rows)*rb)
	if err := readAt(w.File.Path, buf, offset); err != nil {
		return nil, nil, fmt.Errorf("%s: tensor %s: %w", w.File.Path, m.gguf, err)
	}
	out := make([]float32, rows*cols)
	if err := ggml.Dequantize(t, buf, out); err != nil {
		return nil, nil, fmt.Errorf("%s: tensor %s: %w", w.File.Path, m.gguf, err)
	}
	if m.shift != 0 {
		for i := range out {
			out[i] -= m.shift
		}
	}
	shape, _, _, _ := w.Shape(name)
	if interleaved > 0 {
		if len(shape) == 1 { // a bias: one value per row
			cols = 1
		}
		out = uninterleave(out, cols, interleaved)
	}
	return out, shape, nil
}

// uninterleave puts the rows of x (rows of width values) back in Hugging
// Face's order: within each head of hd rows, llama.cpp's converter stored
// HF row h·(hd/2) + i (h in {0, 1}) at row 2i + h, so that ggml's RoPE
// rotates adjacent pairs.
func uninterleave[T any](x []T, width, hd int) []T {
	return permuteRows(x, width, func(r int) int {
		head, j := r/hd, r%hd
		return head*hd + (j%2)*(hd/2) + j/2
	})
}

// Types counts the file's tensors by type, as llama.cpp's loader prints
// them ("type q4_K: 169 tensors"): the mix a K-quant recipe chose.
func (w *Weights) Types() map[ggml.Type]int {
	n := map[ggml.Type]int{}
	for _, t := range w.File.Tensors {
		n[t.Type]++
	}
	return n
}

// TypeMix is Types as one line, most tensors first: "Q4_K 169, Q6_K 29,
// F32 113".
func (w *Weights) TypeMix() string { return Mix(TypeNames(w.Types())) }

// TypeNames keys tensor counts by type name ("Q4_K"), as receipts, the
// server's model list and Mix hold them.
func TypeNames(counts map[ggml.Type]int) map[string]int {
	n := make(map[string]int, len(counts))
	for t, c := range counts {
		n[t.String()] = c
	}
	return n
}

// Mix writes tensor counts by type name as TypeMix does.
func Mix(types map[string]int) string {
	names := make([]string, 0, len(types))
	for t := range types {
		names = append(names, t)
	}
	sort.Slice(names, func(i, j int) bool {
		if types[names[i]] != types[names[j]] {
			return types[names[i]] > types[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, t := range names {
		parts[i] = fmt.Sprintf("%s %d", t, types[t])
	}
	return strings.Join(parts, ", ")
}

// Name is how receipts and logs call the file: its base name.
func (w *Weights) Name() string { return filepath.Base(w.File.Path) }

func readAt(path string, buf []byte, off int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.ReadAt(buf, off)
	return err
}

// CheckTokenizer compares the file's vocabulary (tokenizer.ggml.tokens)
// with tok's, id by id: every token tok has must be the file's at that id.
// Ids beyond tok's (the converter's [PADn] fill) are not compared.
func (w *Weights) CheckTokenizer(tok *tokenizer.Tokenizer) error {
	tokens, err := w.File.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return err
	}
	for id := range tok.VocabSize() {
		want, ok := tok.Token(id)
		if !ok {
			continue
		}
		if id >= len(tokens) {
			return fmt.Errorf("%s: tokenizer.ggml.tokens has %d tokens; the checkpoint's tokenizer has id %d (%q)", w.File.Path, len(tokens), id, want)
		}
		if tokens[id] != want {
			return fmt.Errorf("%s: tokenizer.ggml.tokens[%d] is %q; the checkpoint's tokenizer has %q", w.File.Path, id, tokens[id], want)
		}
	}
	return nil
}
