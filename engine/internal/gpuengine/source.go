package gpuengine

import (
	"fmt"
	"path/filepath"

	"logitscope/checkpoint"
	"logitscope/quant"
	"logitscope/safetensors"
	"logitscope/shaders"
	"logitscope/variant"
)

// Piece is rows [Row0, Row0+Rows) of a weight matrix as the GPU reads it:
// Length stored bytes at Offset of File, in Format's layout
// (shaders/weights.wgsl). Pieces name file regions rather than hold bytes
// so that a device can copy them from the file straight into a buffer.
type Piece struct {
	Row0, Rows, Cols int
	Format           shaders.Format
	File             string
	Offset, Length   int64
}

// Source serves a model's weights for upload: matrices as stored (decoded
// on the GPU), vectors (norms, biases) as float32.
type Source interface {
	// Matrix splits a matrix into pieces of at most maxBytes each.
	Matrix(name string, maxBytes int64) ([]Piece, error)
	Vector(name string) ([]float32, error)
}

// CheckpointSource uploads a checkpoint's own bf16, f16 or f32 bytes: the
// f32 variant, decoded in the shader.
func CheckpointSource(ck *checkpoint.Checkpoint) Source { return ckSource{ck} }

type ckSource struct{ ck *checkpoint.Checkpoint }

func (s ckSource) Matrix(name string, maxBytes int64) ([]Piece, error) {
	info, file, ok := s.ck.Info(name)
	if !ok {
		return nil, fmt.Errorf("%s: no tensor %s", s.ck.Dir, name)
	}
	var f shaders.Format
	switch info.DType {
	case safetensors.F32:
		f = shaders.F32
	case safetensors.BF16:
		f = shaders.BF16
	case safetensors.F16:
		f = shaders.F16
	default:
		return nil, fmt.Errorf("%s: %s is %s; the GPU reads F32, BF16 and F16", s.ck.Dir, name, info.DType)
	}
	if len(info.Shape) != 2 {
		return nil, fmt.Errorf("%s: %s has shape %v, not a matrix", s.ck.Dir, name, info.Shape)
	}
	rows, cols := info.Shape[0], info.Shape[1]
	rowBytes := int64(cols * info.DType.Size())
	// Pieces of whole rows, and an even number of them so that 16-bit
	// elements never straddle two pieces' words.
	per := max(2, int(maxBytes/rowBytes)/2*2)
	var out []Piece
	for a := 0; a < rows; a += per {
		b := min(rows, a+per)
		out = append(out, Piece{Row0: a, Rows: b - a, Cols: cols, Format: f,
			File: file, Offset: info.Offset + int64(a)*rowBytes, Length: int64(b-a) * rowBytes})
	}
	return out, nil
}

func (s ckSource) Vector(name string) ([]float32, error) {
	v, _, err := s.ck.Float32(name)
	return v, err
}

// VariantSource uploads a quantized variant's pieces as stored.
func VariantSource(v *variant.Variant) Source { return varSource{v} }

type varSource struct{ v *variant.Variant }

// schemeFormats pairs each quantization scheme with the shaders' format.
var schemeFormats = map[quant.Scheme]shaders.Format{quant.Q8: shaders.Q8, quant.Q6: shaders.Q6, quant.Q4: shaders.Q4}

// pieceFormat is how the shaders read a variant piece: its scheme's
// format, or float32 for a matrix the variant's policy kept.
func pieceFormat(scheme string) (shaders.Format, bool) {
	if scheme == variant.SchemeF32 {
		return shaders.F32, true
	}
	f, ok := schemeFormats[quant.Scheme(scheme)]
	return f, ok
}

func (s varSource) Matrix(name string, maxBytes int64) ([]Piece, error) {
	var out []Piece
	for _, p := range s.v.Pieces(name) {
		f, ok := pieceFormat(p.Scheme)
		if !ok || len(p.Shape) != 2 {
			return nil, fmt.Errorf("%s: %s is %s %v, not a matrix", s.v.Dir, name, p.Scheme, p.Shape)
		}
		if p.Length > maxBytes {
			return nil, fmt.Errorf("%s: a piece of %s is %d bytes, over the device's %d-byte binding limit", s.v.Dir, name, p.Length, maxBytes)
		}
		out = append(out, Piece{Row0: p.Rows[0], Rows: p.Rows[1] - p.Rows[0], Cols: p.Shape[1], Format: f,
			File: filepath.Join(s.v.Dir, p.Shard), Offset: p.Offset, Length: p.Length})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no tensor %s", s.v.Dir, name)
	}
	return out, nil
}

func (s varSource) Vector(name string) ([]float32, error) {
	v, _, err := s.v.Float32(name)
	return v, err
}

// scaleBase is the first word of a quantized piece's scale region (0 for
// float formats, which have none).
func (p Piece) scaleBase() (uint32, error) {
	for s, f := range schemeFormats {
		if f == p.Format {
			l, err := quant.NewLayout(s, p.Rows, p.Cols)
			if err != nil {
				return 0, err
			}
			return uint32(l.QuantBytes() / 4), nil
		}
	}
	return 0, nil
}
