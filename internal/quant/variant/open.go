package variant

import (
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/seal"
	"logitscope/internal/quant"
)

// Variant is an opened, verified variant. It serves model.Weights.
type Variant struct {
	Dir      string
	Manifest *Manifest
	pieces   map[string][]Piece
	names    []string
}

// Open reads dir/manifest.json, verifies its seal, its structure and the
// size and sha256 of every shard. Errors name the file at fault.
func Open(dir string) (*Variant, error) {
	path := filepath.Join(dir, "manifest.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if err := seal.Verify(data, "manifest_sha256", path); err != nil {
		return nil, err
	}
	m, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	for _, s := range m.Shards {
		p := filepath.Join(dir, s.Name)
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if st.Size() != s.Size {
			return nil, fmt.Errorf("%s: %d bytes, manifest.json says %d", p, st.Size(), s.Size)
		}
		sum, err := checkpoint.FileSHA256(p)
		if err != nil {
			return nil, err
		}
		if sum != s.SHA256 {
			return nil, fmt.Errorf("%s: sha256 %s, manifest.json says %s: the shard is corrupt", p, sum, s.SHA256)
		}
	}
	v := &Variant{Dir: dir, Manifest: m, pieces: map[string][]Piece{}}
	for _, p := range m.Tensors {
		if len(v.pieces[p.Name]) == 0 {
			v.names = append(v.names, p.Name)
		}
		v.pieces[p.Name] = append(v.pieces[p.Name], p)
	}
	return v, nil
}

// CheckSource refuses a variant quantized from another checkpoint than the
// one whose Fingerprint is fp. The caller, which knows the model, says how
// to quantize it again.
func (v *Variant) CheckSource(fp string) error {
	if fp != v.Manifest.Model {
		return fmt.Errorf("%s was quantized from another checkpoint (model_sha256 %.12s…, this one is %.12s…)",
			filepath.Join(v.Dir, "manifest.json"), v.Manifest.Model, fp)
	}
	return nil
}

// Pieces lists a tensor's stored pieces in row order.
func (v *Variant) Pieces(name string) []Piece { return v.pieces[name] }

// Names lists the tensors in manifest order.
func (v *Variant) Names() []string { return v.names }

// Shape gives a tensor's shape, its first shard and its stored bytes.
func (v *Variant) Shape(name string) ([]int, string, int64, bool) {
	ps := v.pieces[name]
	if len(ps) == 0 {
		return nil, "", 0, false
	}
	var n int64
	for _, p := range ps {
		n += p.Length
	}
	return ps[0].Shape, filepath.Join(v.Dir, ps[0].Shard), n, true
}

// Float32 dequantizes a tensor exactly as the GPU kernels do.
func (v *Variant) Float32(name string) ([]float32, []int, error) {
	ps := v.pieces[name]
	if len(ps) == 0 {
		return nil, nil, fmt.Errorf("%s: no tensor %q", v.Dir, name)
	}
	cols := ps[0].cols()
	out := make([]float32, ps[0].Shape[0]*cols)
	for _, p := range ps {
		blob, err := v.Raw(p)
		if err != nil {
			return nil, nil, err
		}
		dst := out[p.Rows[0]*cols : p.Rows[1]*cols]
		if p.Scheme == SchemeF32 {
			for i := range dst {
				dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(blob[4*i:]))
			}
			continue
		}
		if f := EXL3(p.Scheme); f.K != 0 {
			w, err := f.Rows(blob, p.Shape[1], p.Shape[0])
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %s: %v", filepath.Join(v.Dir, p.Shard), p.Name, err)
			}
			copy(dst, w)
			continue
		}
		s, _ := quant.ParseScheme(p.Scheme) // checked by Open
		if err := quant.Dequantize(s, blob, p.Rows[1]-p.Rows[0], cols, dst); err != nil {
			return nil, nil, fmt.Errorf("%s: %s rows %v: %v", filepath.Join(v.Dir, p.Shard), p.Name, p.Rows, err)
		}
	}
	return out, ps[0].Shape, nil
}

// Raw reads a piece's stored bytes (for GPU uploads).
func (v *Variant) Raw(p Piece) ([]byte, error) {
	path := filepath.Join(v.Dir, p.Shard)
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, p.Length)
	if _, err := f.ReadAt(b, p.Offset); err != nil {
		return nil, fmt.Errorf("%s: reading %s at %d: %w", path, p.Name, p.Offset, err)
	}
	return b, nil
}
