// Package ggml holds llama.cpp's tensor types: their block layouts and
// their dequantization, computed exactly as ggml's dequantize_row_* does.
package ggml

import (
	"fmt"
	"maps"
	"slices"
)

// Type is a ggml_type as GGUF files store it (ggml.h's enum numbering).
type Type uint32

const (
	F32  Type = 0
	F16  Type = 1
	Q4_0 Type = 2
	Q4_1 Type = 3
	Q5_0 Type = 6
	Q5_1 Type = 7
	Q8_0 Type = 8
	Q8_1 Type = 9
	Q2_K Type = 10
	Q3_K Type = 11
	Q4_K Type = 12
	Q5_K Type = 13
	Q6_K Type = 14
	Q8_K Type = 15
	// The i-quants: weights as indices into ggml's fixed grids of 4 or 8
	// magnitudes with separate signs (IQ1_*, IQ2_*, IQ3_*), or 4-bit
	// indices into a non-linear table of 16 values (IQ4_*).
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	BF16    Type = 30
	IQ1_M   Type = 29
	// The ternary types (weights -1, 0, 1 times a scale) and OCP's MXFP4
	// (E2M1 weights with a shared power-of-two scale).
	TQ1_0 Type = 34
	TQ2_0 Type = 35
	MXFP4 Type = 39
)

// QK_K is the number of weights in a K-quant super-block.
const QK_K = 256

// traits is what a type's blocks look like: blockSize weights stored in
// blockBytes bytes.
type traits struct {
	name                  string
	blockSize, blockBytes int
}

// types lists every type a GGUF file may hold whose layout is fixed, so
// that a reader can check sizes even of tensors it cannot decode. The
// types in otherNames are named for errors but have no entry: a file
// holding one is refused naming the tensor and the type.
var types = map[Type]traits{
	F32: {"F32", 1, 4}, F16: {"F16", 1, 2}, BF16: {"BF16", 1, 2}, F64: {"F64", 1, 8},
	I8: {"I8", 1, 1}, I16: {"I16", 1, 2}, I32: {"I32", 1, 4}, I64: {"I64", 1, 8},
	Q4_0: {"Q4_0", 32, 2 + 16}, Q4_1: {"Q4_1", 32, 2 + 2 + 16},
	Q5_0: {"Q5_0", 32, 2 + 4 + 16}, Q5_1: {"Q5_1", 32, 2 + 2 + 4 + 16},
	Q8_0: {"Q8_0", 32, 2 + 32}, Q8_1: {"Q8_1", 32, 4 + 32},
	Q2_K:    {"Q2_K", QK_K, QK_K/16 + QK_K/4 + 2 + 2},
	Q3_K:    {"Q3_K", QK_K, QK_K/8 + QK_K/4 + 12 + 2},
	Q4_K:    {"Q4_K", QK_K, 2 + 2 + 12 + QK_K/2},
	Q5_K:    {"Q5_K", QK_K, 2 + 2 + 12 + QK_K/8 + QK_K/2},
	Q6_K:    {"Q6_K", QK_K, QK_K/2 + QK_K/4 + QK_K/16 + 2},
	Q8_K:    {"Q8_K", QK_K, 4 + QK_K + QK_K/16*2},
	IQ2_XXS: {"IQ2_XXS", QK_K, 2 + QK_K/4},
	IQ2_XS:  {"IQ2_XS", QK_K, 2 + QK_K/4 + QK_K/32},
	IQ2_S:   {"IQ2_S", QK_K, 2 + QK_K/4 + QK_K/16},
	IQ3_XXS: {"IQ3_XXS", QK_K, 2 + 3*QK_K/8},
	IQ3_S:   {"IQ3_S", QK_K, 2 + QK_K/4 + QK_K/8 + QK_K/32 + QK_K/64},
	IQ1_S:   {"IQ1_S", QK_K, 2 + QK_K/8 + QK_K/16},
	IQ1_M:   {"IQ1_M", QK_K, QK_K/8 + QK_K/16 + QK_K/32},
	IQ4_NL:  {"IQ4_NL", 32, 2 + 16},
	IQ4_XS:  {"IQ4_XS", QK_K, 2 + 2 + QK_K/64 + QK_K/2},
	TQ1_0:   {"TQ1_0", QK_K, (QK_K-4*QK_K/64)/5 + QK_K/64 + 2},
	TQ2_0:   {"TQ2_0", QK_K, QK_K/4 + 2},
	MXFP4:   {"MXFP4", 32, 1 + 16},
}

// otherNames names the types without a fixed layout here.
var otherNames = map[Type]string{
	40: "NVFP4", 41: "Q1_0", 42: "Q2_0",
}

func (t Type) String() string {
	if tr, ok := types[t]; ok {
		return tr.name
	}
	if n, ok := otherNames[t]; ok {
		return n
	}
	return fmt.Sprintf("type %d", uint32(t))
}

// ParseType reads a type by name ("Q4_K", "F16").
func ParseType(name string) (Type, error) {
	for t, tr := range types {
		if tr.name == name {
			return t, nil
		}
	}
	return 0, fmt.Errorf("ggml: unknown type %q", name)
}

// BlockSize is the number of weights in one block (1 for plain types); 0
// for a type without a fixed layout here.
func (t Type) BlockSize() int { return types[t].blockSize }

// BlockBytes is the stored size of one block; 0 for a type without a fixed
// layout here.
func (t Type) BlockBytes() int { return types[t].blockBytes }

// RowBytes is the stored size of a row of n weights. A row must be whole
// blocks, as ggml requires of every tensor's first dimension.
func (t Type) RowBytes(n int) (int64, error) {
	tr, ok := types[t]
	if !ok {
		return 0, fmt.Errorf("ggml: %v has no block layout here", t)
	}
	if n < 0 || n%tr.blockSize != 0 {
		return 0, fmt.Errorf("ggml: a row of %d %v weights is not whole %d-weight blocks", n, t, tr.blockSize)
	}
	return int64(n/tr.blockSize) * int64(tr.blockBytes), nil
}

// Types lists the types with a block layout here, in ggml.h's numbering:
// the ones whose sizes a reader can check, named when a file holds another.
func Types() []Type { return slices.Sorted(maps.Keys(types)) }
