// Package quantizedtest makes a model.Quantized for the engine's tests
// without a hub checkpoint: a synthetic checkpoint's matrices replaced by
// random lookup matrices of every form (lookuptest), with the activation
// quantizations a format may declare, and the float checkpoint of their
// decoded weights, the independent reference the engine is compared with.
package quantizedtest

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/lookup"
	"logitscope/internal/format/lookup/lookuptest"
	"logitscope/internal/format/safetensors"
	"logitscope/internal/model"
)

// Quantized is a model.Quantized held in memory.
type Quantized struct {
	model.Weights
	Lookups map[string]*lookup.Matrix
	Act     map[string]string
}

// shapes are the forms the matrices take in turn; acts the activation
// quantizations they declare in turn.
var (
	shapes = []lookuptest.Shape{{Bits: 4, GroupSize: 32, Offset: true}, {Bits: 8, GroupSize: -1}, {Bits: 4, GroupSize: 64, GIdx: true},
		{Bits: 4, GroupSize: 16}, {Bits: 8, GroupSize: 32, Offset: true}, {Bits: 4, GroupSize: -1, Offset: true}}
	acts = []string{"", "int8", "fp8", "fp4"}
)

// Random is w's weights with every matrix of g whose columns are a
// multiple of 32 (the GPU's groups; the embedding included, and experts
// one by one) a random lookup matrix, the forms and declared activations
// taken in turn (a router's activations float32); the rest stays w's.
func Random(g model.Geometry, w model.Weights, seed uint64) *Quantized {
	rng := rand.New(rand.NewPCG(seed, 1))
	q := &Quantized{Weights: w, Lookups: map[string]*lookup.Matrix{}, Act: map[string]string{}}
	i := 0
	for _, s := range g.Specs() {
		if len(s.Shape) != 2 || s.Shape[1]%32 != 0 {
			continue
		}
		q.Lookups[s.Name] = lookuptest.Random(rng, s.Shape[0], s.Shape[1], shapes[i%len(shapes)])
		if !strings.HasSuffix(s.Name, ".mlp.gate.weight") {
			// A router's activations stay float32, as the engines
			// that quantize activations keep them: a rounded
			// activation on the edge between two codes may round
			// apart where the devices' float32 sums differ in the
			// last bit, and a router near a tie would carry that to
			// another expert.
			q.Act[s.Name] = acts[i%len(acts)]
		}
		i++
	}
	return q
}

func (q *Quantized) Lookup(name string) (*lookup.Matrix, error) { return q.Lookups[name], nil }
func (q *Quantized) Acts(name string) string                    { return q.Act[name] }
func (q *Quantized) Format() string                             { return "quantizedtest" }

// Float32 decodes a lookup matrix as lookup.Matrix.Row does.
func (q *Quantized) Float32(name string) ([]float32, []int, error) {
	if m := q.Lookups[name]; m != nil {
		return m.Dequantize(), []int{m.Rows, m.Cols}, nil
	}
	return q.Weights.Float32(name)
}

// Shape is the matrix's; its size the lookup form's codes and scales.
func (q *Quantized) Shape(name string) ([]int, string, int64, bool) {
	shape, file, size, ok := q.Weights.Shape(name)
	if m := q.Lookups[name]; m != nil {
		size = int64(len(m.Codes) + 4*len(m.Scale) + 4*len(m.Offset))
	}
	return shape, file, size, ok
}

// WriteFloat writes q's weights, decoded, as the float32 checkpoint of
// ck's model in dir: ck's other files copied (config, tokenizer), one
// model.safetensors of every tensor.
func WriteFloat(q *Quantized, ck *checkpoint.Checkpoint, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(ck.Dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasSuffix(e.Name(), ".safetensors") || strings.HasSuffix(e.Name(), ".safetensors.index.json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(ck.Dir, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	var tensors []safetensors.Tensor
	for _, name := range q.Names() {
		v, shape, err := q.Float32(name)
		if err != nil {
			return err
		}
		data := make([]byte, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(x))
		}
		tensors = append(tensors, safetensors.Tensor{Name: name, DType: safetensors.F32, Shape: shape, Data: data})
	}
	f, err := os.Create(filepath.Join(dir, "model.safetensors"))
	if err != nil {
		return err
	}
	if err := safetensors.Write(f, tensors, map[string]string{"format": "pt"}); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
