// Package shaders holds every WGSL kernel of the engine, one file per op
// family, each with a header comment stating its bindings, shapes and
// layout.
package shaders

import (
	_ "embed"
	"fmt"
)

var (
	//go:embed weights.wgsl
	weights string
	//go:embed matmul.wgsl
	matmul string
	//go:embed embed.wgsl
	embed string
	//go:embed rmsnorm.wgsl
	rmsnorm string
	//go:embed rope.wgsl
	rope string
	//go:embed attention.wgsl
	attention string
	//go:embed elementwise.wgsl
	elementwise string
)

// Format is how a weight matrix's bytes are laid out (weights.wgsl).
type Format uint32

const (
	F32 Format = iota
	BF16
	F16
	Q8
	Q6
	Q4
)

var formatNames = [...]string{"f32", "bf16", "f16", "q8", "q6", "q4"}

func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("Format(%d)", f)
}

// Matmul is the weight-decoding matrix product for format f.
func Matmul(f Format) string { return withFormat(f, matmul) }

// Embed is the weight-decoding row gather for format f.
func Embed(f Format) string { return withFormat(f, embed) }

// withFormat prepends the format constant and the decoders to a kernel.
func withFormat(f Format, kernel string) string {
	return fmt.Sprintf("const FORMAT: u32 = %du;\n\n%s\n%s", f, weights, kernel)
}

// RMSNorm, RoPE, Attention and Elementwise (entry points add and
// silu_mul) need no weight decoding.
func RMSNorm() string     { return rmsnorm }
func RoPE() string        { return rope }
func Attention() string   { return attention }
func Elementwise() string { return elementwise }
