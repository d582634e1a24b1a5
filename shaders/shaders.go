// Package shaders holds every WGSL kernel of the engine, one file per op
// family, each with a header comment stating its bindings, shapes and
// layout.
package shaders

import (
	_ "embed"
	"encoding/binary"
	"fmt"

	"logitscope/internal/format/ggml"
)

var (
	//go:embed weights.wgsl
	weights string
	//go:embed ggml.wgsl
	ggmlBlocks string
	//go:embed iquants.wgsl
	iquants string
	//go:embed matmul.wgsl
	matmul string
	//go:embed matmul_out.wgsl
	matmulOut string
	//go:embed matmul_stacked.wgsl
	matmulStacked string
	//go:embed matmul_lanes.wgsl
	matmulLanes string
	//go:embed matmul_subgroup.wgsl
	matmulSubgroup string
	//go:embed matmul_a8.wgsl
	matmulA8 string
	//go:embed quantize.wgsl
	quantize string
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
	//go:embed moe.wgsl
	moe string
	//go:embed exl3.wgsl
	exl3 string
	//go:embed lookup.wgsl
	lookupGroups string
	//go:embed acts.wgsl
	actsRound string
)

// The workgroup geometry that the kernels and the dispatches share, stated
// once: every kernel's source starts with these as WGSL constants (WG,
// LANES, GRID_X), and gpuengine sizes its dispatches with the same Go
// constants. WebGPU's pipeline-overridable constants would be the usual
// way, but gogpu/wgpu's Vulkan backend ignores a pipeline's constants
// (TODO(compute-constants) in its hal/vulkan/pipeline.go), so the value
// travels in the source.
const (
	// Workgroup is every kernel's workgroup size, the matmul kernels'
	// unless their MatmulVariant sets another. The reductions halve it
	// down to one, so it must be a power of two.
	Workgroup = 64
	// MatmulLanes is how many invocations share one output row of
	// matmul.wgsl's main and expert.
	MatmulLanes = 8
	// MatmulTokens is how many tokens one invocation of the prefill
	// matmul (main8) takes: fixed by its WGSL (a mat2x4 of sums), stated
	// here for the dispatches.
	MatmulTokens = 8
	// GridX is the most matmul workgroups along x: larger matrices wrap
	// onto y (WebGPU allows 65535 per dimension).
	GridX = 32768
)

// prelude declares the geometry in WGSL.
var prelude = geometry(Workgroup)

// geometry is the prelude for kernels of wg invocations a workgroup.
func geometry(wg int) string {
	return fmt.Sprintf("const WG: u32 = %du;\nconst LANES: u32 = %du;\nconst GRID_X: u32 = %du;\n\n", wg, MatmulLanes, GridX)
}

// Format is how a weight matrix's bytes are laid out: weights.wgsl's
// float formats and package quant's schemes, ggml.wgsl's llama.cpp block
// types.
type Format uint32

const (
	F32 Format = iota
	BF16
	F16
	Q8
	Q6
	Q4
	// llama.cpp's block types, rows as GGUF stores them (ggml.wgsl). GGUF's
	// F32, F16 and BF16 matrices are the float formats above.
	Q4_0
	Q4_1
	Q5_0
	Q5_1
	Q8_0
	Q2_K
	Q3_K
	Q4_K
	Q5_K
	Q6_K
	// EXL3 is exllamav3's trellis layer (exl3.wgsl): the piece is the
	// whole layer's blob, and its bits and codebook are the piece's.
	EXL3
	// llama.cpp's i-quants, ternary types and MXFP4 (iquants.wgsl).
	IQ2_XXS
	IQ2_XS
	IQ2_S
	IQ3_XXS
	IQ3_S
	IQ1_S
	IQ1_M
	IQ4_NL
	IQ4_XS
	TQ1_0
	TQ2_0
	MXFP4
	// Lookup is a hub quantization's lookup matrix (lookup.wgsl): codes,
	// a table, a scale and offset per row group, decoded a group of 32
	// into ggml.wgsl's gq, so every entry point that reads ggml's block
	// types reads it.
	Lookup
)

var formatNames = [...]string{"f32", "bf16", "f16", "q8", "q6", "q4",
	"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "exl3",
	"IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M", "IQ4_NL", "IQ4_XS", "TQ1_0", "TQ2_0", "MXFP4", "lookup"}

// ggmlFormats pairs each ggml type the kernels read with its format.
var ggmlFormats = map[ggml.Type]Format{
	ggml.F32: F32, ggml.F16: F16, ggml.BF16: BF16,
	ggml.Q4_0: Q4_0, ggml.Q4_1: Q4_1, ggml.Q5_0: Q5_0, ggml.Q5_1: Q5_1, ggml.Q8_0: Q8_0,
	ggml.Q2_K: Q2_K, ggml.Q3_K: Q3_K, ggml.Q4_K: Q4_K, ggml.Q5_K: Q5_K, ggml.Q6_K: Q6_K,
	ggml.IQ2_XXS: IQ2_XXS, ggml.IQ2_XS: IQ2_XS, ggml.IQ2_S: IQ2_S, ggml.IQ3_XXS: IQ3_XXS, ggml.IQ3_S: IQ3_S,
	ggml.IQ1_S: IQ1_S, ggml.IQ1_M: IQ1_M, ggml.IQ4_NL: IQ4_NL, ggml.IQ4_XS: IQ4_XS,
	ggml.TQ1_0: TQ1_0, ggml.TQ2_0: TQ2_0, ggml.MXFP4: MXFP4,
}

// GGMLFormat is the format in which the kernels read a GGUF matrix of type
// t as stored; false for a type they cannot read (Q8_1, Q8_K, the integer
// types).
func GGMLFormat(t ggml.Type) (Format, bool) {
	f, ok := ggmlFormats[t]
	return f, ok
}

// GGML is the ggml block type that format f reads (Q4_0 … MXFP4); false for
// the float formats and quant's schemes, whose layouts are not blocks.
func (f Format) GGML() (ggml.Type, bool) {
	if f < Q4_0 {
		return 0, false
	}
	for t, g := range ggmlFormats {
		if g == f {
			return t, true
		}
	}
	return 0, false
}

func (f Format) String() string {
	if int(f) < len(formatNames) {
		return formatNames[f]
	}
	return fmt.Sprintf("Format(%d)", f)
}

// Matmul is the weight-decoding matrix product for format f: entry points
// main, main8, rows4 and rows4x8 for one matrix, expert for a bank of
// routed experts, and a8rows4 and a8rows4x8 with 8-bit activations
// (formats with A8); v picks the variant.
func Matmul(f Format, v MatmulVariant) string {
	out, lanes, enable := matmulOut, matmulLanes, ""
	if v.Stacked {
		out = matmulStacked
	}
	if v.Subgroups {
		lanes, enable = matmulSubgroup, "enable subgroups;\n\n"
	}
	return enable + withFormat(f, v.WG(), matmul+"\n"+out+"\n"+lanes+"\n"+matmulA8)
}

// A8 is whether Matmul's a8 entry points take format f: integer codes in
// blocks of 32 with a scale each, the formats that the CPU engine
// multiplies with 8-bit activations.
func (f Format) A8() bool {
	switch f {
	case Q8, Q6, Q4, Q8_0, Q4_0:
		return true
	}
	return false
}

// MatmulVariant is a choice among matmul.wgsl's companions; the zero value
// is the plain kernel, in core WGSL. Every variant gives the same bits.
type MatmulVariant struct {
	// Stacked: the piece stacks two or three matrices, each with its own Y
	// (matmul_stacked.wgsl: bindings 6 and 7 besides the plain kernel's).
	Stacked bool
	// Subgroups: main and expert add a row's lanes in a subgroup
	// (matmul_subgroup.wgsl), for devices with the subgroups feature and
	// subgroups of at least MatmulLanes invocations (A8Lanes for a8main,
	// which gpuengine never asks of it: see its matmulVariant).
	Subgroups bool
	// Workgroup is the invocations of a workgroup of every entry point
	// (a power of two from A8Lanes to 256); 0 stands for Workgroup. It
	// sets how many rows a workgroup computes, not how a row is summed:
	// every size gives the same bits.
	Workgroup int
}

// A8Lanes is how many invocations share one output row of a8main.
const A8Lanes = 16

// WG is the variant's workgroup size.
func (v MatmulVariant) WG() int {
	if v.Workgroup == 0 {
		return Workgroup
	}
	return v.Workgroup
}

// Rows is the output rows of a workgroup of main and expert
// (MatmulLanes invocations a row); Rows4, of rows4, rows4x8, expert4,
// a8rows4 and a8rows4x8 (four rows an invocation); Rows8, of main8 (a
// row an invocation); A8Rows, of a8main (A8Lanes invocations a row).
func (v MatmulVariant) Rows() int   { return v.WG() / MatmulLanes }
func (v MatmulVariant) Rows4() int  { return 4 * v.WG() }
func (v MatmulVariant) Rows8() int  { return v.WG() }
func (v MatmulVariant) A8Rows() int { return v.WG() / A8Lanes }

// MatmulVariants is every variant.
var MatmulVariants = []MatmulVariant{{}, {Stacked: true}, {Subgroups: true}, {Stacked: true, Subgroups: true}}

// Name names the variant's kernel for format f: "matmul-q4",
// "matmul-stacked-subgroups-wg128-q4".
func (v MatmulVariant) Name(f Format) string {
	name := "matmul-"
	if v.Stacked {
		name += "stacked-"
	}
	if v.Subgroups {
		name += "subgroups-"
	}
	if v.WG() != Workgroup {
		name += fmt.Sprintf("wg%d-", v.WG())
	}
	return name + f.String()
}

// Embed is the weight-decoding row gather for format f.
func Embed(f Format) string { return withFormat(f, Workgroup, embed) }

// withFormat prepends the geometry for workgroups of wg, the format
// constant and the decoders to a kernel.
func withFormat(f Format, wg int, kernel string) string {
	return fmt.Sprintf("%sconst FORMAT: u32 = %du;\n\n%s\n%s\n%s\n%s\n%s\n%s", geometry(wg), f, weights, lookupGroups, ggmlBlocks, iqTables(f), iquants, kernel)
}

// iqTableNames are the tables (ggml.Tables' names) that format f's
// decoder reads as iq_grid, iq_signs and iq_values (iquants.wgsl); ""
// where it needs none.
func iqTableNames(f Format) (grid, signs, values string) {
	switch f {
	case IQ2_XXS:
		return "iq2xxs_grid", "ksigns", ""
	case IQ2_XS:
		return "iq2xs_grid", "ksigns", ""
	case IQ2_S:
		return "iq2s_grid", "", ""
	case IQ3_XXS:
		return "iq3xxs_grid", "ksigns", ""
	case IQ3_S:
		return "iq3s_grid", "", ""
	case IQ1_S, IQ1_M:
		return "iq1s_grid", "", ""
	case IQ4_NL, IQ4_XS:
		return "", "", "kvalues_iq4nl"
	case MXFP4:
		return "", "", "kvalues_mxfp4"
	}
	return "", "", ""
}

// iqTableWords are format f's tables (package ggml's, read back from
// llama.cpp's library): its grid's, sign table's and value table's words.
func iqTableWords(f Format) (grid, signs, values []uint32) {
	words := map[string][]uint32{}
	for _, t := range ggml.Tables() {
		words[t.Name] = t.Words
	}
	g, s, v := iqTableNames(f)
	return words[g], words[s], words[v]
}

// Tables are the bytes that a buffer of weights in format f ends with:
// its grid's, sign table's and value table's words in turn, which
// iquants.wgsl reads from the end of w (arrayLength). Empty for the
// formats without tables. (Naga, gogpu's, reads a WGSL constant array at
// a runtime index as zeros, and a function's local copy of a grid is
// far too slow on lavapipe: hence the buffer.)
func Tables(f Format) []byte {
	g, s, v := iqTableWords(f)
	var b []byte
	for _, w := range [][]uint32{g, s, v} {
		for _, x := range w {
			b = binary.LittleEndian.AppendUint32(b, x)
		}
	}
	return b
}

// MaxTableBytes is the most bytes Tables gives a format: the room a
// weight buffer keeps for them under the device's binding limit.
const MaxTableBytes = 2048 * 8 // IQ1_S and IQ1_M: iq1s_grid, 2048 entries of 8 bytes

// iqTables declares the sizes of format f's tables in words, for
// iquants.wgsl to find them at the end of w.
func iqTables(f Format) string {
	g, s, v := iqTableWords(f)
	return fmt.Sprintf("const IQ_GRID_WORDS: u32 = %du;\nconst IQ_SIGNS_WORDS: u32 = %du;\nconst IQ_VALUES_WORDS: u32 = %du;\n", len(g), len(s), len(v))
}

// RMSNorm (with main_q8), RoPE, Attention, Elementwise (entry points
// add, silu_mul, gelu_tanh_mul, scale, and quantize and the *_q8 ones,
// which round activations to 8-bit blocks for Matmul's a8 entry points:
// quantize.wgsl, which comes first: naga lowers a function called before
// its declaration without the constants declared after the call) and MoE
// (route and combine) need no weight decoding.
func RMSNorm() string     { return prelude + quantize + "\n" + rmsnorm }
func RoPE() string        { return prelude + rope }
func Attention() string   { return prelude + attention }
func Elementwise() string { return prelude + quantize + "\n" + elementwise }
func MoE() string         { return prelude + moe }

// Acts rounds activations as package acts does (acts.wgsl) before a
// product with a lookup matrix.
func Acts() string { return prelude + actsRound }

// EXL3Product is exllamav3's layers' product and its parts (rotate_in, product,
// rotate_out, and decode for tests): exl3.wgsl, which decodes its own
// format, not through weights.wgsl.
func EXL3Product() string { return prelude + exl3 }
