// Package safetensors reads and writes the safetensors format: an 8-byte
// little-endian header length, a JSON header naming each tensor's dtype,
// shape and [begin, end) byte range inside the data section, then the data.
package safetensors

import (
	"errors"
	"io"
)

// DType is a safetensors element type as spelled in the header.
type DType string

const (
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
	I8   DType = "I8"
	U8   DType = "U8"
	I32  DType = "I32"
)

// Size is the element size in bytes (0 for an unknown dtype).
func (d DType) Size() int { panic("TODO") }

// TensorInfo locates one tensor. Offset is absolute within the file.
type TensorInfo struct {
	Name   string
	DType  DType
	Shape  []int
	Offset int64
	Length int64
}

// NumElements is the product of Shape (1 for a scalar).
func (t TensorInfo) NumElements() int { panic("TODO") }

// File is an opened, validated safetensors file.
type File struct {
	Path     string
	Metadata map[string]string
}

var errTODO = errors.New("TODO")

// Open opens and validates path.
func Open(path string) (*File, error) { return nil, errTODO }

// NewFile validates the safetensors bytes readable from r (size bytes); name
// is used in error messages.
func NewFile(r io.ReaderAt, size int64, name string) (*File, error) { return nil, errTODO }

// Names lists the tensors in data-offset order.
func (f *File) Names() []string { return nil }

// Info describes one tensor.
func (f *File) Info(name string) (TensorInfo, bool) { return TensorInfo{}, false }

// ReadRaw returns the tensor's bytes as stored.
func (f *File) ReadRaw(name string) ([]byte, error) { return nil, errTODO }

// ReadFloat32 decodes an F32, F16 or BF16 tensor to float32.
func (f *File) ReadFloat32(name string) ([]float32, error) { return nil, errTODO }

// Close releases the file.
func (f *File) Close() error { return nil }

// Tensor is one tensor to write.
type Tensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// Write writes a safetensors file: deterministic bytes for the same input
// (tensors sorted by name, header padded with spaces to a multiple of 8).
func Write(w io.Writer, tensors []Tensor, metadata map[string]string) error { return errTODO }

// WriteFile writes path atomically (temporary file in the same directory, then rename).
func WriteFile(path string, tensors []Tensor, metadata map[string]string) error { return errTODO }

// DecodeFloat32 decodes raw little-endian F32/F16/BF16 bytes into dst (len(dst) elements).
func DecodeFloat32(dtype DType, raw []byte, dst []float32) error { return errTODO }

// EncodeBF16 rounds each value to bfloat16 (round to nearest even) and packs them little-endian.
func EncodeBF16(src []float32) []byte { panic("TODO") }
