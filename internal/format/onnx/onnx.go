// Package onnx writes ONNX models: the subset of onnx.proto's ModelProto
// that a graph of operators over initializers needs (nodes with int, float
// and int-list attributes, tensors as raw little-endian bytes, inputs and
// outputs with fixed or named dimensions), encoded in protobuf's wire
// format by hand so that no protobuf module or generated code is needed.
//
// Field numbers are onnx.proto's (ONNX 1.x, IR version 8). Protobuf
// limits a message to 2 GiB; Marshal refuses a larger model rather than
// writing one that readers reject.
package onnx

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// IRVersion is the ONNX IR version written: 8 goes with opset 17 and 18.
const IRVersion = 8

// Element types (TensorProto.DataType).
const (
	Float = 1
	Uint8 = 2
	Int8  = 3
	Int64 = 7
)

// MaxBytes is protobuf's limit on a message's size.
const MaxBytes = 1<<31 - 1

// Model is a ModelProto: a graph and the operator sets it imports
// (domain "" is ONNX's own, "com.microsoft" onnxruntime's contrib ops).
type Model struct {
	Producer string
	Opsets   []Opset
	Graph    Graph
	// Metadata is the model's metadata_props, in order: what a reader
	// learns of the model without reading its graph (ReadMeta).
	Metadata []Prop
}

// Prop is one StringStringEntryProto of metadata_props.
type Prop struct{ Key, Value string }

// Opset is one OperatorSetIdProto.
type Opset struct {
	Domain  string
	Version int64
}

// Graph is a GraphProto: nodes in topological order over named values.
type Graph struct {
	Name           string
	Nodes          []Node
	Initializers   []Tensor
	Inputs, Output []Value
}

// Node is a NodeProto.
type Node struct {
	Op, Domain, Name string
	Inputs, Outputs  []string // "" is an absent optional input
	Attrs            []Attr
}

// Attr is an AttributeProto of one kind: Ints when non-nil, else Float
// when IsFloat, else Int.
type Attr struct {
	Name    string
	Int     int64
	Float   float32
	IsFloat bool
	Ints    []int64
}

// Int is an integer attribute.
func Int(name string, v int64) Attr { return Attr{Name: name, Int: v} }

// Ints is an integer-list attribute.
func Ints(name string, v ...int64) Attr { return Attr{Name: name, Ints: v} }

// FloatAttr is a float attribute.
func FloatAttr(name string, v float32) Attr { return Attr{Name: name, Float: v, IsFloat: true} }

// Tensor is a TensorProto holding its elements as raw little-endian bytes.
type Tensor struct {
	Name string
	Type int32
	Dims []int64
	Raw  []byte
}

// Value is a ValueInfoProto of a tensor type: each dimension a size, or
// a name (Params[i] != "") for one fixed only when the model runs.
type Value struct {
	Name   string
	Type   int32
	Dims   []int64
	Params []string
}

// attribute types (AttributeProto.AttributeType)
const (
	attrFloat = 1
	attrInt   = 2
	attrInts  = 7
)

// Marshal encodes m as an ONNX file's bytes.
func Marshal(m Model) ([]byte, error) {
	var size int64
	for _, t := range m.Graph.Initializers {
		size += int64(len(t.Raw))
	}
	if size > MaxBytes {
		return nil, fmt.Errorf("onnx: graph %q: initializers hold %d bytes, over protobuf's 2 GiB limit", m.Graph.Name, size)
	}
	var b enc
	b.varintField(1, IRVersion)
	b.stringField(2, m.Producer)
	b.message(7, func(g *enc) { g.graph(m.Graph) })
	for _, o := range m.Opsets {
		b.message(8, func(e *enc) {
			e.stringField(1, o.Domain)
			e.varintField(2, uint64(o.Version))
		})
	}
	for _, p := range m.Metadata {
		b.message(14, func(e *enc) {
			e.stringField(1, p.Key)
			e.stringField(2, p.Value)
		})
	}
	if len(b) > MaxBytes {
		return nil, fmt.Errorf("onnx: graph %q: the model is %d bytes, over protobuf's 2 GiB limit", m.Graph.Name, len(b))
	}
	return b, nil
}

// Write encodes m to w.
func Write(w io.Writer, m Model) error {
	b, err := Marshal(m)
	if err == nil {
		_, err = w.Write(b)
	}
	return err
}

// enc is a protobuf message being encoded.
type enc []byte

func (e *enc) tag(field, wire int) { *e = binary.AppendUvarint(*e, uint64(field<<3|wire)) }

func (e *enc) varintField(field int, v uint64) {
	e.tag(field, 0)
	*e = binary.AppendUvarint(*e, v)
}

func (e *enc) bytesField(field int, v []byte) {
	e.tag(field, 2)
	*e = binary.AppendUvarint(*e, uint64(len(v)))
	*e = append(*e, v...)
}

// stringField writes a string, even an empty one: a repeated string
// (a node's inputs) keeps its place, and "" is ONNX's absent input.
func (e *enc) stringField(field int, v string) { e.bytesField(field, []byte(v)) }

func (e *enc) message(field int, body func(*enc)) {
	var m enc
	body(&m)
	e.bytesField(field, m)
}

func (e *enc) graph(g Graph) {
	for _, n := range g.Nodes {
		e.message(1, func(e *enc) { e.node(n) })
	}
	e.stringField(2, g.Name)
	for _, t := range g.Initializers {
		e.message(5, func(e *enc) { e.tensor(t) })
	}
	for _, v := range g.Inputs {
		e.message(11, func(e *enc) { e.value(v) })
	}
	for _, v := range g.Output {
		e.message(12, func(e *enc) { e.value(v) })
	}
}

func (e *enc) node(n Node) {
	for _, s := range n.Inputs {
		e.stringField(1, s)
	}
	for _, s := range n.Outputs {
		e.stringField(2, s)
	}
	e.stringField(3, n.Name)
	e.stringField(4, n.Op)
	for _, a := range n.Attrs {
		e.message(5, func(e *enc) { e.attr(a) })
	}
	if n.Domain != "" {
		e.stringField(7, n.Domain)
	}
}

func (e *enc) attr(a Attr) {
	e.stringField(1, a.Name)
	switch {
	case a.Ints != nil:
		for _, v := range a.Ints {
			e.varintField(8, uint64(v))
		}
		e.varintField(20, attrInts)
	case a.IsFloat:
		e.tag(2, 5)
		*e = binary.LittleEndian.AppendUint32(*e, math.Float32bits(a.Float))
		e.varintField(20, attrFloat)
	default:
		e.varintField(3, uint64(a.Int))
		e.varintField(20, attrInt)
	}
}

func (e *enc) tensor(t Tensor) {
	for _, d := range t.Dims {
		e.varintField(1, uint64(d))
	}
	e.varintField(2, uint64(t.Type))
	e.stringField(8, t.Name)
	e.bytesField(9, t.Raw)
}

func (e *enc) value(v Value) {
	e.stringField(1, v.Name)
	e.message(2, func(e *enc) { // TypeProto
		e.message(1, func(e *enc) { // TypeProto.Tensor
			e.varintField(1, uint64(v.Type))
			e.message(2, func(e *enc) { // TensorShapeProto
				for i, d := range v.Dims {
					e.message(1, func(e *enc) {
						if i < len(v.Params) && v.Params[i] != "" {
							e.stringField(2, v.Params[i])
						} else {
							e.varintField(1, uint64(d))
						}
					})
				}
			})
		})
	})
}
