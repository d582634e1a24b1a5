package bnb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// State is the JSON that QuantState.as_dict(packed=True) stores as a U8
// tensor: the quantization's settings that are not tensors.
type State struct {
	QuantType string `json:"quant_type"`
	Blocksize int    `json:"blocksize"`
	// DType is the original weight's dtype, which bnb dequantizes to.
	DType string `json:"dtype"`
	Shape []int  `json:"shape"`
	// The nested fields are set with double quantization only.
	NestedBlocksize int      `json:"nested_blocksize,omitempty"`
	NestedDType     string   `json:"nested_dtype,omitempty"`
	NestedOffset    *float64 `json:"nested_offset,omitempty"`
}

// blocksizes are the ones bnb's quantize_4bit and dequantize_4bit accept.
var blocksizes = []int{32, 64, 128, 256, 512, 1024, 2048, 4096}

// ParseState reads and checks a quant state (named for errors): a 2-D
// shape, a known dtype and blocksize, and all or none of the nested
// fields. Keys bnb would not load are refused, as QuantState.from_dict
// refuses them.
func ParseState(raw []byte, name string) (State, error) {
	var s State
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&s); err != nil {
		return s, fmt.Errorf("%s: %v", name, err)
	}
	if d.More() {
		return s, fmt.Errorf("%s: data after the JSON object", name)
	}
	floats := []string{"float16", "bfloat16", "float32"}
	nested := s.NestedBlocksize != 0 || s.NestedDType != "" || s.NestedOffset != nil
	switch {
	case s.QuantType != "nf4" && s.QuantType != "fp4":
		return s, fmt.Errorf("%s: quant_type %q, want nf4 or fp4", name, s.QuantType)
	case !slices.Contains(blocksizes, s.Blocksize):
		return s, fmt.Errorf("%s: blocksize %d, want one of %v", name, s.Blocksize, blocksizes)
	case !slices.Contains(floats, s.DType):
		return s, fmt.Errorf("%s: dtype %q, want one of %v", name, s.DType, floats)
	case len(s.Shape) != 2 || s.Shape[0] <= 0 || s.Shape[1] <= 0 || s.Shape[0] > 1<<31/s.Shape[1]:
		return s, fmt.Errorf("%s: shape %v, want (rows, cols) of a linear weight", name, s.Shape)
	case !nested:
		return s, nil
	case s.NestedBlocksize <= 0: // dequantize_blockwise takes any (bnb writes 256)
		return s, fmt.Errorf("%s: nested_blocksize %d, want a positive blocksize", name, s.NestedBlocksize)
	case s.NestedDType != "float32":
		return s, fmt.Errorf("%s: nested_dtype %q, want float32", name, s.NestedDType)
	case s.NestedOffset == nil || math.IsInf(*s.NestedOffset, 0) || math.IsNaN(*s.NestedOffset):
		return s, fmt.Errorf("%s: nested_offset %s, want a number", name, show(s.NestedOffset))
	}
	return s, nil
}

// Nested says whether the absmax are double quantized.
func (s State) Nested() bool { return s.NestedOffset != nil }

// Encode writes the state as Python's json.dumps writes as_dict's
// non-tensor items: in its key order, with ", " and ": ".
func (s State) Encode() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"quant_type": %q, "blocksize": %d, "dtype": %q, "shape": [%d, %d]`, s.QuantType, s.Blocksize, s.DType, s.Shape[0], s.Shape[1])
	if s.Nested() {
		fmt.Fprintf(&b, `, "nested_blocksize": %d, "nested_dtype": %q, "nested_offset": %s`, s.NestedBlocksize, s.NestedDType, pyFloat(*s.NestedOffset))
	}
	b.WriteString("}")
	return []byte(b.String())
}

// pyFloat formats x as Python's repr does: the shortest round trip, with
// ".0" on whole numbers and an exponent below 1e-4 or from 1e16.
func pyFloat(x float64) string {
	if a := math.Abs(x); a != 0 && (a < 1e-4 || a >= 1e16) {
		s := strconv.FormatFloat(x, 'e', -1, 64)
		// Go writes e-05 as Python does; both pad the exponent to 2 digits.
		return s
	}
	s := strconv.FormatFloat(x, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}
