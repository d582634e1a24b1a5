package dump

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strconv"
	"strings"

	"logitscope/internal/format/routing"
	"logitscope/internal/format/safetensors"
)

// LogitsTensor is the tensor name that per-window safetensors captures use.
const LogitsTensor = "logits"

// A mixture of experts' dump adds RoutesTensor, I32 of shape (rows, sparse
// layers, top-k): the experts each row's token was routed to, most
// probable first, and two metadata entries that label it: RouteLayers,
// the model's layer numbers of its sparse layers ("0,1,5"), and
// RouteExperts, how many experts each layer routes among (decimal). A
// dump without the tensor is a dense model's, or another tool's.
const (
	RoutesTensor = "routes"
	RouteLayers  = "route_layers"
	RouteExperts = "route_experts"
)

// ParseSafetensors reads a safetensors dump held in memory: the logits
// tensor, (rows, vocab) or (1, rows, vocab) in F32, F16 or BF16, the routes
// when the file has them, and the file's string metadata.
func ParseSafetensors(data []byte, name string) (*Logits, map[string]string, error) {
	f, err := safetensors.NewFile(bytes.NewReader(data), int64(len(data)), name)
	if err != nil {
		return nil, nil, err
	}
	return fromSafetensors(f, name)
}

func fromSafetensors(f *safetensors.File, name string) (*Logits, map[string]string, error) {
	r, err := SafetensorsReader(f, name)
	if err != nil {
		return nil, nil, err
	}
	l, err := r.ReadAll()
	if err != nil {
		return nil, nil, err
	}
	return l, f.Metadata, nil
}

// logitsShape checks the logits tensor: (rows, vocab) or (1, rows, vocab),
// in F32, F16 or BF16.
func logitsShape(f *safetensors.File, name string) (rows, vocab int, err error) {
	info, ok := f.Info(LogitsTensor)
	if !ok {
		return 0, 0, fmt.Errorf("%s: no %q tensor (has %s)", name, LogitsTensor, strings.Join(f.Names(), ", "))
	}
	shape := info.Shape
	if len(shape) == 3 && shape[0] == 1 {
		shape = shape[1:]
	}
	if len(shape) != 2 || shape[1] == 0 {
		return 0, 0, fmt.Errorf("%s: %q has shape %v, want (rows, vocab) or (1, rows, vocab)", name, LogitsTensor, info.Shape)
	}
	if !info.DType.IsFloat() {
		return 0, 0, fmt.Errorf("%s: %q is %s, want F32, F16 or BF16", name, LogitsTensor, info.DType)
	}
	return shape[0], shape[1], nil
}

// readRoutes reads and checks the routes tensor and its labels.
func readRoutes(f *safetensors.File, name string, rows int) (*routing.Routes, error) {
	info, _ := f.Info(RoutesTensor)
	if info.DType != safetensors.I32 {
		return nil, fmt.Errorf("%s: %q is %s, want I32", name, RoutesTensor, info.DType)
	}
	if len(info.Shape) != 3 || info.Shape[0] != rows {
		return nil, fmt.Errorf("%s: %q has shape %v, want (%d rows, sparse layers, top-k)", name, RoutesTensor, info.Shape, rows)
	}
	rt := &routing.Routes{Rows: rows, Layout: routing.Layout{TopK: info.Shape[2]}}
	var err error
	meta, ok := f.Metadata[RouteLayers]
	if !ok {
		return nil, fmt.Errorf("%s: %q has no %s metadata to label its layers", name, RoutesTensor, RouteLayers)
	}
	if rt.Layers, err = routing.ParseLayers(meta); err != nil {
		return nil, fmt.Errorf("%s: metadata %s %q: %v", name, RouteLayers, meta, err)
	}
	if len(rt.Layers) != info.Shape[1] {
		return nil, fmt.Errorf("%s: metadata %s %q names %d layers, %q has %d", name, RouteLayers, meta, len(rt.Layers), RoutesTensor, info.Shape[1])
	}
	meta, ok = f.Metadata[RouteExperts]
	if rt.Experts, err = strconv.Atoi(meta); !ok || err != nil || strconv.Itoa(rt.Experts) != meta {
		return nil, fmt.Errorf("%s: metadata %s %q: want the number of experts in decimal", name, RouteExperts, meta)
	}
	raw, err := f.ReadRaw(RoutesTensor)
	if err != nil {
		return nil, err
	}
	rt.IDs = make([]int32, len(raw)/4)
	for i := range rt.IDs {
		rt.IDs[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	if err := rt.Check(name + ": " + RoutesTensor); err != nil {
		return nil, err
	}
	return rt, nil
}

// WriteSafetensors writes l as an F32 logits tensor with metadata, and
// its routes (with their labels in the metadata) when it has them.
func WriteSafetensors(path string, l *Logits, meta map[string]string) error {
	tensors, meta, err := safetensorsOf(l, meta)
	if err != nil {
		return fmt.Errorf("dump: %s: %v", path, err)
	}
	return safetensors.WriteFile(path, tensors, meta)
}

func writeSafetensors(w io.Writer, l *Logits, meta map[string]string) error {
	tensors, meta, err := safetensorsOf(l, meta)
	if err != nil {
		return fmt.Errorf("dump: %v", err)
	}
	return safetensors.Write(w, tensors, meta)
}

func safetensorsOf(l *Logits, meta map[string]string) ([]safetensors.Tensor, map[string]string, error) {
	if l.Rows*l.Vocab != len(l.Data) {
		return nil, nil, fmt.Errorf("%d rows × %d vocab does not match %d values", l.Rows, l.Vocab, len(l.Data))
	}
	tensors := []safetensors.Tensor{{
		Name: LogitsTensor, DType: safetensors.F32, Shape: []int{l.Rows, l.Vocab}, Data: safetensors.EncodeF32(l.Data),
	}}
	rt := l.Routes
	if rt == nil {
		return tensors, meta, nil
	}
	if rt.Rows != l.Rows {
		return nil, nil, fmt.Errorf("%d rows of routes for %d rows of logits", rt.Rows, l.Rows)
	}
	if err := rt.Check(RoutesTensor); err != nil {
		return nil, nil, err
	}
	for _, k := range []string{RouteLayers, RouteExperts} {
		if _, ok := meta[k]; ok {
			return nil, nil, fmt.Errorf("metadata %s is the routes' label, not the caller's", k)
		}
	}
	all := map[string]string{RouteLayers: routing.FormatLayers(rt.Layers), RouteExperts: strconv.Itoa(rt.Experts)}
	for k, v := range meta {
		all[k] = v
	}
	tensors = append(tensors, safetensors.Tensor{Name: RoutesTensor, DType: safetensors.I32,
		Shape: []int{rt.Rows, len(rt.Layers), rt.TopK}, Data: safetensors.EncodeI32(rt.IDs)})
	return tensors, all, nil
}

// ReadAny reads a whole dump in either format (Open), and a safetensors
// file's metadata (nil for a binary dump).
func ReadAny(path string) (*Logits, map[string]string, error) {
	r, err := Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	l, err := r.ReadAll()
	return l, r.Meta, err
}
