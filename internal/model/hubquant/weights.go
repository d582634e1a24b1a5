package hubquant

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/lookup"
	"logitscope/internal/model"
	"logitscope/internal/text/tokenizer"
)

// Weights is a hub-quantized checkpoint served as model.Quantized: its
// quantized modules' stored tensors (X.qweight, X.scales, …) are named
// X.weight, the float model's name, and decode exactly.
type Weights struct {
	Checkpoint *checkpoint.Checkpoint
	format     lookup.Format
	names      []string
	// quantized maps each quantized ".weight" name to its stored
	// tensors' total bytes.
	quantized map[string]int64

	mu     sync.Mutex
	shapes map[string][2]int // a quantized matrix's (rows, cols), once transcoded
}

var _ model.Quantized = (*Weights)(nil)

// Is says whether dir holds a hub-quantized checkpoint: a config.json
// with a quantization_config (or MLX's quantization) and no
// logitscope variant's manifest.json.
func Is(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "manifest.json")); err == nil {
		return false
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return false
	}
	f, err := FormatOf(b, "config.json")
	return f != nil || err != nil
}

// Open opens dir's config and weights as a hub-quantized checkpoint.
func Open(dir string) (*Weights, error) {
	ck, err := checkpoint.Open(dir)
	if err != nil {
		return nil, err
	}
	w, err := FromCheckpoint(ck)
	if err != nil {
		ck.Close()
		return nil, err
	}
	return w, nil
}

// FromCheckpoint serves an opened checkpoint whose config.json names a
// quantization. Closing the Weights closes ck.
func FromCheckpoint(ck *checkpoint.Checkpoint) (*Weights, error) {
	file := filepath.Join(ck.Dir, "config.json")
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	f, err := FormatOf(b, file)
	if err != nil {
		return nil, err
	}
	if f == nil {
		return nil, fmt.Errorf("%s: no quantization_config: a float checkpoint, not a quantized one", file)
	}
	w := &Weights{Checkpoint: ck, format: f, quantized: map[string]int64{}, shapes: map[string][2]int{}}
	// A module is quantized when it has stored tensors but no float
	// ".weight": GPTQ stores X.qweight, MLX and bitsandbytes a packed
	// integer X.weight, compressed-tensors X.weight_packed. The format's
	// own tensors are then named by the module; bnb's sit under
	// "X.weight.".
	modules := map[string][]string{}
	for _, n := range ck.Names() {
		modules[moduleOf(n)] = append(modules[moduleOf(n)], n)
	}
	for m, stored := range modules {
		info, _, hasWeight := ck.Info(m + ".weight")
		aux := slices.DeleteFunc(slices.Clone(stored), func(n string) bool { return n == m+".bias" })
		if hasWeight && info.DType.IsFloat() || len(aux) == 0 {
			w.names = append(w.names, stored...)
			continue
		}
		var size int64
		for _, n := range aux {
			info, _, _ := ck.Info(n)
			size += info.Length
		}
		w.quantized[m+".weight"] = size
		w.names = append(w.names, m+".weight")
		if len(aux) < len(stored) {
			w.names = append(w.names, m+".bias")
		}
	}
	slices.Sort(w.names)
	return w, nil
}

// moduleOf is the module a stored tensor belongs to: the name without
// its last part, or before ".weight." (bitsandbytes' quant state).
func moduleOf(name string) string {
	if m, _, ok := strings.Cut(name, ".weight."); ok {
		return m
	}
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[:i]
	}
	return name
}

// Names lists the float model's tensor names.
func (w *Weights) Names() []string { return w.names }

// Shape is a tensor's shape as the float model has it; a quantized
// matrix's is its transcoded (rows, cols), its size the bytes stored.
func (w *Weights) Shape(name string) ([]int, string, int64, bool) {
	size, ok := w.quantized[name]
	if !ok {
		info, file, ok := w.Checkpoint.Info(name)
		return info.Shape, file, info.Length, ok
	}
	w.mu.Lock()
	s, known := w.shapes[name]
	w.mu.Unlock()
	if !known {
		m, err := w.Lookup(name)
		if err != nil {
			// The shape check reports a missing tensor; Float32 and Lookup
			// then give the reason.
			return nil, w.Checkpoint.Dir, size, false
		}
		s = [2]int{m.Rows, m.Cols}
	}
	return []int{s[0], s[1]}, w.Checkpoint.Dir, size, true
}

// Float32 decodes a tensor; a quantized matrix's values are its format's
// exact dequantization.
func (w *Weights) Float32(name string) ([]float32, []int, error) {
	if _, ok := w.quantized[name]; !ok {
		return w.Checkpoint.Float32(name)
	}
	m, err := w.Lookup(name)
	if err != nil {
		return nil, nil, err
	}
	return m.Dequantize(), []int{m.Rows, m.Cols}, nil
}

// Lookup transcodes a quantized matrix afresh (nothing big is kept); nil
// for a tensor stored as float.
func (w *Weights) Lookup(name string) (*lookup.Matrix, error) {
	if _, ok := w.quantized[name]; !ok {
		if !slices.Contains(w.names, name) {
			return nil, fmt.Errorf("%s: no tensor %q", w.Checkpoint.Dir, name)
		}
		return nil, nil
	}
	m, err := w.format.Matrix(w.Checkpoint, strings.TrimSuffix(name, ".weight"))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", w.Checkpoint.Dir, err)
	}
	w.mu.Lock()
	w.shapes[name] = [2]int{m.Rows, m.Cols}
	w.mu.Unlock()
	return m, nil
}

// Acts is the activation quantization the format declares for a
// quantized matrix, "" for any other.
func (w *Weights) Acts(name string) string {
	if _, ok := w.quantized[name]; !ok {
		return ""
	}
	return w.format.Acts(strings.TrimSuffix(name, ".weight"))
}

// Format names the format and its settings: "gptq 4-bit g128 sym".
func (w *Weights) Format() string { return w.format.Name() }

// Close closes the checkpoint.
func (w *Weights) Close() error { return w.Checkpoint.Close() }

// OpenFor opens dir as the quantized weights of ref's model, after
// checking that it is that model: the same geometry from config.json
// (quantization_config aside), every tensor's shape, and the same
// tokenizer, token by token (a checkpoint of another model of the same
// shape would compare token ids that mean different things).
func OpenFor(ref *checkpoint.Checkpoint, dir string) (*Weights, error) {
	g, err := model.GeometryOf(ref.Config)
	if err != nil {
		return nil, fmt.Errorf("%s/%w", ref.Dir, err)
	}
	w, err := Open(dir)
	if err != nil {
		return nil, err
	}
	if err := w.checkModel(ref, g); err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

func (w *Weights) checkModel(ref *checkpoint.Checkpoint, g model.Geometry) error {
	if err := sameModel(ref, g, w.Checkpoint); err != nil {
		return err
	}
	// Transcoding each matrix once surfaces a refusal by its own words
	// (Shape could only call it missing) and leaves the shapes that Check
	// asks for known.
	for _, name := range slices.Sorted(maps.Keys(w.quantized)) {
		if _, err := w.Lookup(name); err != nil {
			return err
		}
	}
	return model.Check(w.Checkpoint.Dir, g, w)
}

// Describe checks, reading no weight, that dir holds a hub quantization
// of ref's model, its config's geometry and its tokenizer as OpenFor
// checks them, and names its format ("gptq 4-bit g128 sym"). It is what
// a server can afford for every checkpoint it lists; OpenFor, when one
// is run, checks every tensor.
func Describe(ref *checkpoint.Checkpoint, dir string) (string, error) {
	g, err := model.GeometryOf(ref.Config)
	if err != nil {
		return "", fmt.Errorf("%s/%w", ref.Dir, err)
	}
	ck, err := checkpoint.OpenWithoutWeights(dir)
	if err != nil {
		return "", err
	}
	defer ck.Close()
	file := filepath.Join(dir, "config.json")
	b, err := os.ReadFile(file)
	if err != nil {
		return "", err
	}
	f, err := FormatOf(b, file)
	switch {
	case err != nil:
		return "", err
	case f == nil:
		return "", fmt.Errorf("%s: no quantization_config: a float checkpoint, not a quantized one", file)
	}
	return f.Name(), sameModel(ref, g, ck)
}

// sameModel checks that ck (a hub checkpoint) describes ref's model, whose
// geometry is g: the same geometry from config.json (quantization_config
// aside) and the same tokenizer, token by token (a checkpoint of another
// model of the same shape would compare token ids that mean different
// things).
func sameModel(ref *checkpoint.Checkpoint, g model.Geometry, ck *checkpoint.Checkpoint) error {
	c := ck.Config
	c.QuantizationConfig = nil
	h, err := model.GeometryOf(c)
	if err != nil {
		return fmt.Errorf("%s/%w", ck.Dir, err)
	}
	if !reflect.DeepEqual(g, h) {
		return fmt.Errorf("%s: config.json describes another model than %s (%s %d layers, hidden %d, vocab %d; the reference %s %d layers, hidden %d, vocab %d)",
			ck.Dir, ref.Dir, h.Arch, h.NumLayers, h.Dim, h.Vocab, g.Arch, g.NumLayers, g.Dim, g.Vocab)
	}
	want, err := tokenizer.Load(ref.TokenizerPath())
	if err != nil {
		return err
	}
	got, err := tokenizer.Load(ck.TokenizerPath())
	if err != nil {
		return err
	}
	if got.VocabSize() != want.VocabSize() {
		return fmt.Errorf("%s: %d tokens; %s's tokenizer has %d: it was not quantized from %s", ck.TokenizerPath(), got.VocabSize(), ref.Dir, want.VocabSize(), ref.Dir)
	}
	for id := range want.VocabSize() {
		a, _ := want.Token(id)
		if b, _ := got.Token(id); a != b {
			return fmt.Errorf("%s: token %d is %q; %s's tokenizer has %q: it was not quantized from %s", ck.TokenizerPath(), id, b, ref.Dir, a, ref.Dir)
		}
	}
	return nil
}
