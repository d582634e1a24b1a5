package sensitivity

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"logitscope/internal/engine"
	"logitscope/internal/model"
)

// The ways a sweep groups matrices into units (Options.Unit).
const (
	ByTensor = "tensor" // each matrix alone
	ByLayer  = "layer"  // a transformer block's matrices together
	ByKind   = "kind"   // one kind (mlp.down_proj) in every layer together
)

// Unit is what a sweep quantizes, or restores, at once.
type Unit struct {
	Name string `json:"name"`
	// Layer is the first layer a unit's matrices act in: a sweep
	// recomputes from there, on the residual stream entering it. -1 is the
	// embeddings (everything is recomputed), NumLayers the LM head.
	Layer   int      `json:"layer"`
	Kind    string   `json:"kind"`
	Tensors []string `json:"tensors"`
	Format  string   `json:"format"` // the test's formats, "+"-joined
	Params  int64    `json:"params"`
	Bytes   int64    `json:"bytes"` // the test's stored size
}

// Bits is the unit's stored bits per weight in the test.
func (u Unit) Bits() float64 { return 8 * float64(u.Bytes) / float64(u.Params) }

var layerName = regexp.MustCompile(`^model\.layers\.(\d+)\.(.*)$`)
var expertIndex = regexp.MustCompile(`\.experts\.\d+\.`)

// place is a matrix's layer (Unit.Layer) and kind: its name without the
// layer, an expert's index or ".weight" (mlp.experts.down_proj).
func place(name string, layers int) (int, string) {
	kind := strings.TrimSuffix(name, ".weight")
	switch name {
	case model.EmbedName:
		return -1, "embed_tokens"
	case model.HeadName:
		return layers, "lm_head"
	}
	l := 0
	if m := layerName.FindStringSubmatch(kind); m != nil {
		l, _ = strconv.Atoi(m[1])
		kind = m[2]
	}
	return l, expertIndex.ReplaceAllString(kind, ".experts.")
}

// Units groups the matrices a mix's test changes by how ("tensor",
// "layer" or "kind"), in load order.
func Units(changed []engine.Matrix, layers int, how string) ([]Unit, error) {
	if how != ByTensor && how != ByLayer && how != ByKind {
		return nil, fmt.Errorf("--unit %q: want %s, %s or %s", how, ByTensor, ByLayer, ByKind)
	}
	var units []Unit
	index := map[string]int{}
	for _, m := range changed {
		l, kind := place(m.Name, layers)
		key := m.Name
		switch {
		case how == ByLayer && l >= 0 && l < layers:
			key = fmt.Sprintf("layer %d", l)
		case how == ByKind:
			key = kind
		}
		i, ok := index[key]
		if !ok {
			i = len(units)
			index[key] = i
			units = append(units, Unit{Name: key, Layer: l, Kind: kind})
			if how == ByLayer && key != m.Name {
				units[i].Kind = "layer"
			}
		}
		u := &units[i]
		u.Layer = min(u.Layer, l)
		u.Tensors = append(u.Tensors, m.Name)
		if !strings.Contains("+"+u.Format+"+", "+"+m.Format+"+") {
			if u.Format != "" {
				u.Format += "+"
			}
			u.Format += m.Format
		}
		u.Params += int64(m.Rows) * int64(m.Cols)
		u.Bytes += m.Bytes
	}
	if len(units) == 0 {
		return nil, fmt.Errorf("the test stores every matrix as float32: there is nothing to sweep")
	}
	return units, nil
}
