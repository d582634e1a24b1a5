package gguf

import (
	"fmt"
	"strings"
)

// ValueType is a metadata value's type as GGUF stores it (gguf.h's
// gguf_type numbering).
type ValueType uint32

const (
	Uint8 ValueType = iota
	Int8
	Uint16
	Int16
	Uint32
	Int32
	Float32
	Bool
	String
	Array
	Uint64
	Int64
	Float64
)

// noType is the Type of the zero Value, which holds nothing; Write refuses it.
const noType ValueType = ^ValueType(0)

var valueTypeNames = [...]string{
	Uint8: "UINT8", Int8: "INT8", Uint16: "UINT16", Int16: "INT16", Uint32: "UINT32",
	Int32: "INT32", Float32: "FLOAT32", Bool: "BOOL", String: "STRING", Array: "ARRAY",
	Uint64: "UINT64", Int64: "INT64", Float64: "FLOAT64",
}

// String is the spec's name for t ("UINT32", "STRING").
func (t ValueType) String() string {
	if t == noType {
		return "no value"
	}
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("value type %d", uint32(t))
}

// size is the stored size of one value of a fixed-size type; 0 for String,
// Array and unknown types.
func (t ValueType) size() int {
	switch t {
	case Uint8, Int8, Bool:
		return 1
	case Uint16, Int16:
		return 2
	case Uint32, Int32, Float32:
		return 4
	case Uint64, Int64, Float64:
		return 8
	}
	return 0
}

// Value is one metadata value. It holds the Go value Any returns: uint8,
// int8, uint16, int16, uint32, int32, float32, bool, string, uint64, int64
// or float64 for a scalar; a slice of one of those for an array, so that a
// vocabulary of 150k tokens is one []string; []Value for an array of arrays,
// each element an array itself.
type Value struct{ x any }

// ValueOf wraps x, which must be one of the Go types listed on Value. An
// []Value must hold only arrays, nested at most 8 deep; llama.cpp loads no
// file with an array of arrays, so a model's metadata has none.
func ValueOf(x any) (Value, error) {
	v := Value{x}
	if v.Type() == noType {
		return Value{}, fmt.Errorf("gguf: %T is not a GGUF value type", x)
	}
	if err := v.check(0); err != nil {
		return Value{}, fmt.Errorf("gguf: %v", err)
	}
	return v, nil
}

// check validates what the type system cannot: that an array of arrays
// holds arrays only, not too deeply nested, and that lengths stay within
// what a reader (this one, llama.cpp's) accepts. enclosing counts the
// arrays around v.
func (v Value) check(enclosing int) error {
	switch x := v.x.(type) {
	case nil:
		return fmt.Errorf("empty Value (use a constructor or ValueOf)")
	case string:
		if len(x) > maxStringLen {
			return fmt.Errorf("string of %d bytes exceeds the %d-byte limit", len(x), maxStringLen)
		}
	case []string:
		for i, s := range x {
			if len(s) > maxStringLen {
				return fmt.Errorf("element %d: string of %d bytes exceeds the %d-byte limit", i, len(s), maxStringLen)
			}
		}
	case []Value:
		if enclosing+2 > maxDepth {
			return fmt.Errorf("arrays nested more than %d deep", maxDepth)
		}
		for i, e := range x {
			if e.Type() != Array {
				return fmt.Errorf("element %d of an array of arrays is %v, not an array", i, e.Type())
			}
			if err := e.check(enclosing + 1); err != nil {
				return fmt.Errorf("element %d: %v", i, err)
			}
		}
	}
	if n := v.Len(); n > maxArrayLen {
		return fmt.Errorf("array of %d elements exceeds the %d-element limit", n, maxArrayLen)
	}
	return nil
}

// The constructors a writer of model metadata needs; ValueOf makes the
// rest. A slice is held, not copied.
func StringValue(s string) Value      { return Value{s} }
func Uint32Value(u uint32) Value      { return Value{u} }
func Uint64Value(u uint64) Value      { return Value{u} }
func Int32Value(i int32) Value        { return Value{i} }
func Float32Value(f float32) Value    { return Value{f} }
func BoolValue(b bool) Value          { return Value{b} }
func StringsValue(s []string) Value   { return Value{s} }
func Float32sValue(f []float32) Value { return Value{f} }
func Int32sValue(i []int32) Value     { return Value{i} }

// Any is the Go value v holds (see Value); an array's slice is v's own,
// not a copy.
func (v Value) Any() any { return v.x }

// Type is v's type; an array's element type is ElemType.
func (v Value) Type() ValueType {
	switch v.x.(type) {
	case uint8:
		return Uint8
	case int8:
		return Int8
	case uint16:
		return Uint16
	case int16:
		return Int16
	case uint32:
		return Uint32
	case int32:
		return Int32
	case float32:
		return Float32
	case bool:
		return Bool
	case string:
		return String
	case uint64:
		return Uint64
	case int64:
		return Int64
	case float64:
		return Float64
	case []uint8, []int8, []uint16, []int16, []uint32, []int32, []float32, []bool,
		[]string, []uint64, []int64, []float64, []Value:
		return Array
	}
	return noType
}

// ElemType is the type of an array's elements (Array for an array of
// arrays); for a scalar it is the zero Value's type.
func (v Value) ElemType() ValueType {
	switch v.x.(type) {
	case []uint8:
		return Uint8
	case []int8:
		return Int8
	case []uint16:
		return Uint16
	case []int16:
		return Int16
	case []uint32:
		return Uint32
	case []int32:
		return Int32
	case []float32:
		return Float32
	case []bool:
		return Bool
	case []string:
		return String
	case []uint64:
		return Uint64
	case []int64:
		return Int64
	case []float64:
		return Float64
	case []Value:
		return Array
	}
	return noType
}

// Len is an array's length; 0 for a scalar.
func (v Value) Len() int {
	switch x := v.x.(type) {
	case []uint8:
		return len(x)
	case []int8:
		return len(x)
	case []uint16:
		return len(x)
	case []int16:
		return len(x)
	case []uint32:
		return len(x)
	case []int32:
		return len(x)
	case []float32:
		return len(x)
	case []bool:
		return len(x)
	case []string:
		return len(x)
	case []uint64:
		return len(x)
	case []int64:
		return len(x)
	case []float64:
		return len(x)
	case []Value:
		return len(x)
	}
	return 0
}

// String renders v for debugging and error messages: a scalar as Go
// prints it, a string quoted, an array as its type, length and first few
// elements.
func (v Value) String() string {
	const shown = 6
	switch x := v.x.(type) {
	case nil:
		return "<no value>"
	case string:
		return quoteShort(x)
	case []string:
		parts := make([]string, 0, shown+1)
		for _, s := range x[:min(len(x), shown)] {
			parts = append(parts, quoteShort(s))
		}
		if len(x) > shown {
			parts = append(parts, "...")
		}
		return fmt.Sprintf("[%d]STRING{%s}", len(x), strings.Join(parts, ", "))
	case []Value:
		parts := make([]string, 0, shown+1)
		for _, e := range x[:min(len(x), shown)] {
			parts = append(parts, e.String())
		}
		if len(x) > shown {
			parts = append(parts, "...")
		}
		return fmt.Sprintf("[%d]ARRAY{%s}", len(x), strings.Join(parts, ", "))
	}
	if v.Type() != Array {
		return fmt.Sprint(v.x)
	}
	s := fmt.Sprint(v.x) // "[1 2 3]"
	if n := v.Len(); n > shown {
		s = strings.Join(strings.Fields(strings.Trim(s, "[]"))[:shown], " ") + " ..."
	} else {
		s = strings.Trim(s, "[]")
	}
	return fmt.Sprintf("[%d]%v{%s}", v.Len(), v.ElemType(), s)
}

// quoteShort quotes s, cut to a length that keeps an error on one
// readable line (a chat template is kilobytes).
func quoteShort(s string) string {
	const max = 60
	if len(s) > max {
		return fmt.Sprintf("%q...", strings.ToValidUTF8(s[:max], ""))
	}
	return fmt.Sprintf("%q", s)
}
