package model

import "logitscope/internal/format/lookup"

// Quantized is weights of which some matrices are stored in a hub
// quantization (GPTQ, AWQ, compressed-tensors, MLX, bitsandbytes),
// transcoded without loss to lookup matrices; Float32 decodes any tensor,
// those included, exactly.
type Quantized interface {
	Weights
	// Lookup is a matrix (a ".weight" name, an expert's included) as
	// stored, or nil for one the format leaves float.
	Lookup(name string) (*lookup.Matrix, error)
	// Acts is the activation quantization the format declares for the
	// matrix ("", "int8", "fp8", "fp4": lookup.Format.Acts).
	Acts(name string) string
	// Format names the format and its settings for receipts.
	Format() string
}
