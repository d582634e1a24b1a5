// Package lookup holds the one form that every Hugging Face hub
// quantization (GPTQ, AWQ, compressed-tensors, MLX, bitsandbytes) is
// transcoded to, without loss, for the engine: a code per weight, a value
// table per matrix, and a scale and an offset per (row, group).
//
//	W (Rows, Cols): W[r,c] = Table[code(r,c)] * Scale[r,g(c)] + Offset[r,g(c)]
//
// computed in float32. Each format's reader fills it so that this is the
// format's exact dequantization: GPTQ's s·(q−z) is Table[q]=q, Offset=−s·z
// (s·q and s·z are exact in float32 for fp16 scales and codes of at most
// 8 bits, so their sum is s·(q−z) exactly); MLX's s·q+b is Offset=b;
// bitsandbytes' NF4·absmax is Table=NF4, Offset=0; FP8 and NVFP4 take the
// E4M3 and E2M1 value tables.
//
// The per-format packages (gptq, awq, compressed, mlx, bnb) each implement
// Format: they parse a config.json's quantization_config, transcode a
// module's stored tensors into a Matrix, and, for the tests and the demo,
// quantize float weights into the tensors the real tool writes.
package lookup

import (
	"encoding/json"
	"fmt"

	"logitscope/internal/format/safetensors"
)

// Matrix is a quantized weight matrix (Rows outputs, Cols inputs).
type Matrix struct {
	Rows, Cols int
	// Bits is 4 or 8: each row's codes are ceil(Cols*Bits/8) bytes, two
	// codes per byte, low nibble first, at 4 bits. Formats of 2 or 3 bits
	// store their codes as 4-bit ones (the table has 16 entries).
	Bits  int
	Codes []byte
	// Table is the value of each code: 1<<Bits entries.
	Table []float32
	// Groups is the number of groups per row; column c is in group
	// GIdx[c] when GIdx is set (GPTQ's act-order), else c/GroupSize.
	Groups    int
	GroupSize int
	GIdx      []int32
	// Scale and Offset are Rows*Groups each, row-major; Offset nil is 0.
	Scale  []float32
	Offset []float32
}

// RowBytes is the bytes of one row's codes.
func (m *Matrix) RowBytes() int { return (m.Cols*m.Bits + 7) / 8 }

// Group is column c's group.
func (m *Matrix) Group(c int) int {
	if m.GIdx != nil {
		return int(m.GIdx[c])
	}
	return c / m.GroupSize
}

// Code is the code of weight (r, c).
func (m *Matrix) Code(r, c int) int {
	row := m.Codes[r*m.RowBytes():]
	if m.Bits == 8 {
		return int(row[c])
	}
	return int(row[c/2]>>(4*(c%2))) & 15
}

// Check refuses a matrix whose parts do not fit together.
func (m *Matrix) Check() error {
	switch {
	case m.Rows <= 0 || m.Cols <= 0:
		return fmt.Errorf("lookup: shape (%d, %d)", m.Rows, m.Cols)
	case m.Bits != 4 && m.Bits != 8:
		return fmt.Errorf("lookup: %d-bit codes, want 4 or 8", m.Bits)
	case len(m.Codes) != m.Rows*m.RowBytes():
		return fmt.Errorf("lookup: %d bytes of codes for (%d, %d) at %d bits, want %d", len(m.Codes), m.Rows, m.Cols, m.Bits, m.Rows*m.RowBytes())
	case len(m.Table) != 1<<m.Bits:
		return fmt.Errorf("lookup: a table of %d values for %d-bit codes", len(m.Table), m.Bits)
	case m.Groups <= 0:
		return fmt.Errorf("lookup: %d groups", m.Groups)
	case len(m.Scale) != m.Rows*m.Groups:
		return fmt.Errorf("lookup: %d scales for %d rows of %d groups", len(m.Scale), m.Rows, m.Groups)
	case m.Offset != nil && len(m.Offset) != len(m.Scale):
		return fmt.Errorf("lookup: %d offsets for %d scales", len(m.Offset), len(m.Scale))
	}
	if m.GIdx != nil {
		if len(m.GIdx) != m.Cols {
			return fmt.Errorf("lookup: %d group indices for %d columns", len(m.GIdx), m.Cols)
		}
		for c, g := range m.GIdx {
			if g < 0 || int(g) >= m.Groups {
				return fmt.Errorf("lookup: column %d in group %d of %d", c, g, m.Groups)
			}
		}
	} else if m.GroupSize <= 0 || (m.Cols+m.GroupSize-1)/m.GroupSize != m.Groups {
		return fmt.Errorf("lookup: %d groups of %d for %d columns", m.Groups, m.GroupSize, m.Cols)
	}
	return nil
}

// Row decodes row r into dst (Cols): the reference every kernel is
// checked against. The product is rounded to float32 before the offset is
// added (the conversion forbids Go to fuse them into one multiply-add, as
// it may on arm64 and amd64 v3), so that every kernel can give its bits.
func (m *Matrix) Row(r int, dst []float32) {
	for c := range dst[:m.Cols] {
		g := r*m.Groups + m.Group(c)
		w := float32(m.Table[m.Code(r, c)] * m.Scale[g])
		if m.Offset != nil {
			w += m.Offset[g]
		}
		dst[c] = w
	}
}

// Dequantize is the whole matrix, row-major (Rows*Cols).
func (m *Matrix) Dequantize() []float32 {
	out := make([]float32, m.Rows*m.Cols)
	for r := range m.Rows {
		m.Row(r, out[r*m.Cols:(r+1)*m.Cols])
	}
	return out
}

// Tensors is where a reader finds a checkpoint's stored tensors
// (checkpoint.Checkpoint serves them).
type Tensors interface {
	Raw(name string) ([]byte, safetensors.TensorInfo, error)
}

// Format is one hub quantization format, as one config.json's
// quantization_config describes it.
type Format interface {
	// Name is the format and its settings, for receipts and reports:
	// "gptq 4-bit g128 asym", "mlx 4-bit g64".
	Name() string
	// Quantized says whether the format's tool quantizes the module (a
	// weight's name without ".weight": "model.layers.0.self_attn.q_proj"),
	// by its config's rules (ignore lists, modules_to_not_convert, MLX's
	// per-layer false): the writer asks it. A reader takes a module whose
	// ".weight" is stored as a float dtype as float whatever this says.
	Quantized(module string) bool
	// Matrix transcodes a quantized module's stored tensors, without loss.
	Matrix(t Tensors, module string) (*Matrix, error)
	// Acts is the activation quantization the format declares for the
	// module: "" (none), "int8" (per token, absmax/127), "fp8" (per
	// token E4M3) or "fp4" (NVFP4's E2M1 in groups of 16).
	Acts(module string) string
	// Quantize makes the tensors the format's own tool stores for a
	// module's float weight W (rows, cols), rounding to nearest.
	Quantize(module string, w []float32, rows, cols int) ([]safetensors.Tensor, error)
	// Config is the quantization_config the format's tool writes.
	Config() json.RawMessage
}

// Finisher is a Format whose tool rearranges the tensors after quantizing
// each module (MLX stacks a MoE's experts under switch_mlp); the writer
// calls Finish on all of them before writing.
type Finisher interface {
	Finish(tensors []safetensors.Tensor) ([]safetensors.Tensor, error)
}
