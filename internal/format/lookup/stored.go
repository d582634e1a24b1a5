package lookup

import (
	"fmt"
	"math"
	"math/bits"
	"slices"

	"logitscope/internal/format/safetensors"
)

// Stored is one tensor as a checkpoint stores it, its bytes checked
// against its dtype and shape, for the readers to take apart.
type Stored struct {
	Name  string
	DType safetensors.DType
	Shape []int
	Data  []byte
}

// Read fetches a tensor and checks that its bytes are exactly its shape
// of its dtype, so that a reader can index it without further bounds
// worries (a hostile header cannot make it read past the data).
func Read(t Tensors, name string) (Stored, error) {
	raw, info, err := t.Raw(name)
	if err != nil {
		return Stored{}, err
	}
	s := Stored{Name: name, DType: info.DType, Shape: info.Shape, Data: raw}
	size := uint64(info.DType.Size())
	if size == 0 {
		return Stored{}, fmt.Errorf("%s: unknown dtype %q", name, info.DType)
	}
	n := size
	for _, d := range info.Shape {
		if d < 0 {
			return Stored{}, fmt.Errorf("%s: shape %v", name, info.Shape)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > math.MaxInt32*uint64(64) {
			return Stored{}, fmt.Errorf("%s: shape %v is too large", name, info.Shape)
		}
		n = lo
	}
	if uint64(len(raw)) != n {
		return Stored{}, fmt.Errorf("%s: %d bytes for shape %v of %s, want %d", name, len(raw), info.Shape, info.DType, n)
	}
	return s, nil
}

// Want refuses a tensor of another dtype or shape; a -1 in shape matches
// any length.
func (s Stored) Want(shape []int, dtypes ...safetensors.DType) error {
	if !slices.Contains(dtypes, s.DType) {
		return fmt.Errorf("%s: dtype %s, want %v", s.Name, s.DType, dtypes)
	}
	ok := len(shape) == len(s.Shape)
	for i := 0; ok && i < len(shape); i++ {
		ok = shape[i] < 0 || shape[i] == s.Shape[i]
	}
	if !ok {
		return fmt.Errorf("%s: shape %v, want %v", s.Name, s.Shape, shape)
	}
	return nil
}

// Floats decodes an F32, F16 or BF16 tensor exactly.
func (s Stored) Floats() ([]float32, error) {
	out := make([]float32, len(s.Data)/max(s.DType.Size(), 1))
	if err := safetensors.DecodeFloat32(s.DType, s.Data, out); err != nil {
		return nil, fmt.Errorf("%s: %v", s.Name, err)
	}
	return out, nil
}

// Memory serves tensors held in memory as Tensors: what a Format's
// Quantize made, read back without a file (tests, demos).
type Memory map[string]safetensors.Tensor

// Put adds tensors, replacing any of the same name.
func (m Memory) Put(ts ...safetensors.Tensor) Memory {
	for _, t := range ts {
		m[t.Name] = t
	}
	return m
}

// Raw is a tensor's bytes and description.
func (m Memory) Raw(name string) ([]byte, safetensors.TensorInfo, error) {
	t, ok := m[name]
	if !ok {
		return nil, safetensors.TensorInfo{}, fmt.Errorf("no tensor %q", name)
	}
	return t.Data, safetensors.TensorInfo{Name: name, DType: t.DType, Shape: t.Shape, Length: int64(len(t.Data))}, nil
}
