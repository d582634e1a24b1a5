package sensitivity

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"logitscope/internal/analysis/attribution"
	"logitscope/internal/engine"
	"logitscope/internal/model"
)

var layerName = regexp.MustCompile(`^model\.layers\.(\d+)\.(.*)$`)
var expertIndex = regexp.MustCompile(`\.experts\.\d+\.`)

// place is a matrix's layer (attribution.Unit.Layer) and kind: its name without the
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
func Units(changed []engine.Matrix, layers int, how string) ([]attribution.Unit, error) {
	if how != attribution.ByTensor && how != attribution.ByLayer && how != attribution.ByKind {
		return nil, fmt.Errorf("--unit %q: want %s, %s or %s", how, attribution.ByTensor, attribution.ByLayer, attribution.ByKind)
	}
	var units []attribution.Unit
	index := map[string]int{}
	for _, m := range changed {
		l, kind := place(m.Name, layers)
		key := m.Name
		switch {
		case how == attribution.ByLayer && l >= 0 && l < layers:
			key = fmt.Sprintf("layer %d", l)
		case how == attribution.ByKind:
			key = kind
		}
		i, ok := index[key]
		if !ok {
			i = len(units)
			index[key] = i
			units = append(units, attribution.Unit{Name: key, Layer: l, Kind: kind})
			if how == attribution.ByLayer && key != m.Name {
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
