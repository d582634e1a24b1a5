package gpuengine

import (
	"fmt"
	"path/filepath"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/exl3"
	"logitscope/internal/format/ggml"
	"logitscope/internal/format/lookup"
	"logitscope/internal/format/safetensors"
	"logitscope/internal/model/ggufmodel"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/shaders"
)

// Piece is rows [Row0, Row0+Rows) of a weight matrix as the GPU reads it:
// Length stored bytes at Offset of File, in Format's layout
// (shaders/weights.wgsl, shaders/ggml.wgsl). Pieces name file regions
// rather than hold bytes so that a device can copy them from the file
// straight into a buffer; neither Offset nor Length need be a multiple of
// 4 (GGUF's blocks are 18 to 210 bytes): the upload pads the buffer to
// whole words with zeros, and the piece's first row starts at its byte 0.
type Piece struct {
	Row0, Rows, Cols int
	Format           shaders.Format
	File             string
	Offset, Length   int64
	// Interleaved, when not 0, is the head dimension hd of llama.cpp's q/k
	// row permutation: the piece's rows are in GGUF's order, row j of each
	// head of hd rows holding Hugging Face's row (j%2)*(hd/2) + j/2, and
	// the matmul writes each row to its Hugging Face position (the bias
	// too is read in Hugging Face's order). Row0 and Rows are then
	// multiples of hd. The embedding never needs it.
	Interleaved int
	// EXL3 is the bits and codebook of an EXL3 piece (Format EXL3), the
	// whole layer's blob (exl3.Format.Bytes).
	EXL3 exl3.Format
	// Pieces of a model.Quantized are in memory, not in a file (File then
	// only names the tensor for errors): Lookup, when not nil, is the
	// lookup matrix whose rows [Row0, Row0+Rows) the piece holds (Format
	// Lookup), uploaded as LookupBlob lays them out, its products rounding
	// their activations as Acts says (package acts' names; "": float32);
	// Data, when not nil, is the piece's bytes (a float matrix's).
	Lookup *lookup.Matrix
	Acts   string
	Data   []byte
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
		if e := variant.EXL3(p.Scheme); e.K != 0 {
			if p.Length > maxBytes {
				return nil, fmt.Errorf("%s: %s is %d bytes of %s, over the device's %d-byte binding limit", s.v.Dir, name, p.Length, p.Scheme, maxBytes)
			}
			out = append(out, Piece{Rows: p.Shape[0], Cols: p.Shape[1], Format: shaders.EXL3, EXL3: e,
				File: filepath.Join(s.v.Dir, p.Shard), Offset: p.Offset, Length: p.Length})
			continue
		}
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
	if s, ok := p.scheme(); ok {
		l, err := quant.NewLayout(s, p.Rows, p.Cols)
		if err != nil {
			return 0, err
		}
		return uint32(l.QuantBytes() / 4), nil
	}
	return 0, nil
}

// scheme is the quantization scheme of a piece in one of package quant's
// formats.
func (p Piece) scheme() (quant.Scheme, bool) {
	for s, f := range schemeFormats {
		if f == p.Format {
			return s, true
		}
	}
	return "", false
}

// stacking is matrices of one format and width laid one above the other
// in a single piece, as one matrix of all their rows would lie: the
// piece, the file regions that fill its buffer one after another, the
// rows where the second and third matrices begin, and the first row that
// is not interleaved (0: all rows are, if any).
type stacking struct {
	piece   Piece
	regions []Piece
	splits  []int
	plain   int
}

// stackPieces stacks two or three whole matrices (one piece each) into one
// piece of at most maxBytes, or reports that it cannot: formats or widths
// differ, a matrix is interleaved unlike the first (only a last one that is
// not may follow: v below q and k), or a matrix's bytes do not end on a
// word. A quantized format's piece is two regions, codes then scales
// (quant.Layout), so the stack is every matrix's codes, then every
// matrix's scales; the other formats' rows are runs of bytes, so their
// matrices simply follow one another.
func stackPieces(ps []Piece, maxBytes int64) (stacking, bool) {
	if len(ps) < 2 || len(ps) > 3 {
		return stacking{}, false
	}
	first := ps[0]
	if first.Format == shaders.EXL3 || first.Format == shaders.Lookup { // each EXL3 layer rotates its own inputs; each lookup blob has its own header
		return stacking{}, false
	}
	st := stacking{piece: Piece{Cols: first.Cols, Format: first.Format, File: first.File, Interleaved: first.Interleaved}}
	var scales []Piece
	for i, p := range ps {
		if p.Row0 != 0 || p.Format != first.Format || p.Cols != first.Cols || p.Length%4 != 0 {
			return stacking{}, false
		}
		if p.Interleaved != first.Interleaved {
			if i != len(ps)-1 || p.Interleaved != 0 {
				return stacking{}, false
			}
			st.plain = st.piece.Rows
		}
		if i > 0 {
			st.splits = append(st.splits, st.piece.Rows)
		}
		st.piece.Rows += p.Rows
		st.piece.Length += p.Length
		codes := p
		if s, ok := p.scheme(); ok {
			l, err := quant.NewLayout(s, p.Rows, p.Cols)
			if err != nil || int64(l.Bytes()) != p.Length {
				return stacking{}, false
			}
			codes.Length = int64(l.QuantBytes())
			scales = append(scales, Piece{File: p.File, Offset: p.Offset + codes.Length, Length: p.Length - codes.Length})
		}
		st.regions = append(st.regions, codes)
	}
	st.regions = append(st.regions, scales...)
	if st.piece.Length > min(maxBytes, maxAddressed) || st.piece.check() != nil {
		return stacking{}, false
	}
	return st, true
}

// maxAddressed is the most bytes a piece may have: ggml.wgsl addresses
// bytes with u32.
const maxAddressed = 1<<32 - 4

// GGMLPieces splits a GGUF matrix of type t, shape (rows, cols) as GGUF
// lists it reversed (ne = [cols, rows]), stored at offset of file, into
// pieces of whole rows of at most maxBytes each, read by the kernels as
// stored (ggml's block types decoded in the shader, F32, F16 and BF16 as
// the float formats). With interleave = hd (not 0), the rows are llama.cpp's
// permuted q_proj or k_proj (see Piece.Interleaved): the pieces split on
// head boundaries and come out in Hugging Face's order. A type the kernels
// cannot read is refused, named.
func GGMLPieces(file string, offset int64, t ggml.Type, rows, cols int, maxBytes int64, interleave int) ([]Piece, error) {
	f, ok := shaders.GGMLFormat(t)
	if !ok {
		return nil, fmt.Errorf("%s: the GPU cannot read %v weights (it reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K and Q6_K)", file, t)
	}
	if rows <= 0 || cols <= 0 {
		return nil, fmt.Errorf("%s: a %v matrix of %d × %d", file, t, rows, cols)
	}
	rowBytes, err := t.RowBytes(cols)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	unit := 1 // rows that stay together: a head when interleaved
	if interleave != 0 {
		if interleave < 0 || interleave%2 != 0 || rows%interleave != 0 {
			return nil, fmt.Errorf("%s: %d rows do not split into heads of %d (an even head dim) for the q/k interleave", file, rows, interleave)
		}
		unit = interleave
	}
	maxBytes = min(maxBytes, maxAddressed)
	per := maxBytes / (int64(unit) * rowBytes) * int64(unit) // rows per piece
	if per == 0 {
		return nil, fmt.Errorf("%s: %d rows of a %v matrix with %d columns are %d bytes, over the device's %d-byte binding limit",
			file, unit, t, cols, int64(unit)*rowBytes, maxBytes)
	}
	var out []Piece
	for a := 0; a < rows; a += int(per) {
		b := min(rows, a+int(per))
		out = append(out, Piece{Row0: a, Rows: b - a, Cols: cols, Format: f, File: file,
			Offset: offset + int64(a)*rowBytes, Length: int64(b-a) * rowBytes, Interleaved: interleave})
	}
	return out, nil
}

// check refuses a piece the kernels would misread: an interleave that
// does not fit whole heads, a ggml block piece whose length is not its
// rows' bytes.
func (p Piece) check() error {
	if p.Format == shaders.EXL3 && (p.Row0 != 0 || p.Length != p.EXL3.Bytes(p.Cols, p.Rows) || p.Length%4 != 0) {
		return fmt.Errorf("%s: an %v piece of rows [%d, %d) of %d columns is %d bytes: want the whole layer's %d", p.File, p.EXL3, p.Row0, p.Row0+p.Rows, p.Cols, p.Length, p.EXL3.Bytes(p.Cols, p.Rows))
	}
	if p.Format == shaders.Lookup && (p.Lookup == nil || p.Cols%32 != 0 || p.Length != LookupBlobBytes(p.Lookup, p.Rows) || p.Row0+p.Rows > p.Lookup.Rows) {
		return fmt.Errorf("%s: a lookup piece of rows [%d, %d) of %d columns is %d bytes", p.File, p.Row0, p.Row0+p.Rows, p.Cols, p.Length)
	}
	if p.Interleaved != 0 && (p.Interleaved < 0 || p.Interleaved%2 != 0 || p.Row0%p.Interleaved != 0 || p.Rows%p.Interleaved != 0) {
		return fmt.Errorf("%s: rows [%d, %d) are not whole heads of %d for the q/k interleave", p.File, p.Row0, p.Row0+p.Rows, p.Interleaved)
	}
	if t, ok := p.Format.GGML(); ok {
		rowBytes, err := t.RowBytes(p.Cols)
		if err != nil {
			return fmt.Errorf("%s: %w", p.File, err)
		}
		if p.Length != int64(p.Rows)*rowBytes || p.Length > maxAddressed {
			return fmt.Errorf("%s: a piece of %d %v rows of %d columns is %d bytes, want %d", p.File, p.Rows, t, p.Cols, p.Length, int64(p.Rows)*rowBytes)
		}
	}
	return nil
}

// GGUFSource uploads a GGUF file's matrices as stored, ggml blocks decoded
// in the shaders (Llama's interleaved q/k rows written back in Hugging
// Face's order by the matmul), and its vectors as ggufmodel decodes them.
func GGUFSource(w *ggufmodel.Weights) Source { return ggufSource{w} }

type ggufSource struct{ w *ggufmodel.Weights }

func (s ggufSource) Matrix(name string, maxBytes int64) ([]Piece, error) {
	t, offset, rows, cols, interleaved, ok := s.w.Matrix(name)
	if !ok {
		return nil, fmt.Errorf("%s: no tensor %s", s.w.File.Path, name)
	}
	return GGMLPieces(s.w.File.Path, offset, t, rows, cols, maxBytes, interleaved)
}

func (s ggufSource) Vector(name string) ([]float32, error) {
	v, _, err := s.w.Float32(name)
	return v, err
}
