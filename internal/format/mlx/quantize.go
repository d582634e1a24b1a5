package mlx

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"

	"logitscope/internal/format/safetensors"
)

// Quantize is MLX's affine_quantize of W (rows, cols) in groups of
// consecutive columns, in float32 as MLX's CPU kernel computes it: the
// group's edge (its min or max, whichever is larger in magnitude) is made
// exactly representable, codes are rounded against the unrounded scale and
// bias, which are then stored in the scales dtype. An expert's tensors are
// named after its own module; Finish stacks them as mlx-lm stores them.
func (f *Format) Quantize(module string, w []float32, rows, cols int) ([]safetensors.Tensor, error) {
	if f.err != nil {
		return nil, f.err
	}
	l, ok := f.layer(module)
	switch {
	case !ok:
		return nil, fmt.Errorf("mlx: %s is left float by the config", module)
	case rows <= 0 || cols <= 0 || len(w) != rows*cols:
		return nil, fmt.Errorf("mlx: %s: %d weights for (%d, %d)", module, len(w), rows, cols)
	case cols%l.GroupSize != 0:
		return nil, fmt.Errorf("mlx: %s: %d columns are not whole groups of %d (mlx-lm leaves such a matrix float)", module, cols, l.GroupSize)
	}
	groups := cols / l.GroupSize
	nbins := float32(int(1)<<l.Bits - 1)
	const eps = float32(1e-7)
	codes := make([]byte, cols)
	packed := make([]byte, 0, rows*cols*l.Bits/8)
	scales := make([]float32, 0, rows*groups)
	biases := make([]float32, 0, rows*groups)
	for r := range rows {
		for g := range groups {
			x := w[r*cols+g*l.GroupSize : r*cols+(g+1)*l.GroupSize]
			lo, hi := slices.Min(x), slices.Max(x)
			edge, scale := hi, -max((hi-lo)/nbins, eps)
			if abs(lo) > abs(hi) {
				edge, scale = lo, -scale
			}
			bias := float32(0)
			if q0 := rint(edge / scale); q0 != 0 {
				scale, bias = edge/q0, edge
			}
			for j, v := range x {
				codes[g*l.GroupSize+j] = byte(min(max(rint((v-bias)/scale), 0), nbins))
			}
			scales = append(scales, scale)
			biases = append(biases, bias)
		}
		packed = pack(packed, codes, l.Bits)
	}
	return []safetensors.Tensor{
		{Name: module + ".weight", DType: safetensors.U32, Shape: []int{rows, cols * l.Bits / 32}, Data: packed},
		{Name: module + ".scales", DType: f.scales, Shape: []int{rows, groups}, Data: encode(f.scales, scales)},
		{Name: module + ".biases", DType: f.scales, Shape: []int{rows, groups}, Data: encode(f.scales, biases)},
	}, nil
}

func abs(x float32) float32 { return float32(math.Abs(float64(x))) }

// rint rounds half to even, as std::rint does.
func rint(x float32) float32 { return float32(math.RoundToEven(float64(x))) }

// pack appends codes of bits each as one little-endian bit stream (a
// whole number of bytes: a row is whole groups of at least 32 codes).
func pack(dst, codes []byte, bits int) []byte {
	var acc uint64
	n := 0
	for _, q := range codes {
		acc |= uint64(q) << n
		for n += bits; n >= 8; n -= 8 {
			dst = append(dst, byte(acc))
			acc >>= 8
		}
	}
	return dst
}

func encode(dt safetensors.DType, v []float32) []byte {
	switch dt {
	case safetensors.F16:
		return safetensors.EncodeF16(v)
	case safetensors.F32:
		return safetensors.EncodeF32(v)
	}
	return safetensors.EncodeBF16(v)
}

// expertTensorRE is an expert's tensor as Quantize names it (or a float
// one the writer keeps).
var expertTensorRE = regexp.MustCompile(`^(.+\.mlp)\.experts\.(\d+)\.([A-Za-z0-9_]+)\.(weight|scales|biases|bias)$`)

// Finish stacks each layer's experts' tensors into
// <layer>.mlp.switch_mlp.<proj>.<weight|scales|biases> of shape
// [experts, ...], as mlx-lm's sanitize does before quantizing (the groups
// run along the last dimension, so quantizing before or after stacking
// gives the same bytes). Every expert from 0 must be there, alike in dtype
// and shape.
func (f *Format) Finish(tensors []safetensors.Tensor) ([]safetensors.Tensor, error) {
	type stack struct{ parts map[int]safetensors.Tensor }
	stacks := map[string]*stack{}
	var out []safetensors.Tensor
	var order []string
	for _, t := range tensors {
		m := expertTensorRE.FindStringSubmatch(t.Name)
		if m == nil {
			out = append(out, t)
			continue
		}
		e, err := strconv.Atoi(m[2])
		if err != nil {
			return nil, fmt.Errorf("mlx: %s: expert %s", t.Name, m[2])
		}
		name := m[1] + ".switch_mlp." + m[3] + "." + m[4]
		s := stacks[name]
		if s == nil {
			s = &stack{parts: map[int]safetensors.Tensor{}}
			stacks[name] = s
			order = append(order, name)
		}
		if _, dup := s.parts[e]; dup {
			return nil, fmt.Errorf("mlx: %s appears twice", t.Name)
		}
		s.parts[e] = t
	}
	for _, name := range order {
		s := stacks[name]
		first := s.parts[0]
		st := safetensors.Tensor{Name: name, DType: first.DType, Shape: append([]int{len(s.parts)}, first.Shape...)}
		for e := range len(s.parts) {
			p, ok := s.parts[e]
			if !ok {
				return nil, fmt.Errorf("mlx: %s: expert %d of %d is missing", name, e, len(s.parts))
			}
			if p.DType != first.DType || !slices.Equal(p.Shape, first.Shape) {
				return nil, fmt.Errorf("mlx: %s: %s %v, expert 0's is %s %v", p.Name, p.DType, p.Shape, first.DType, first.Shape)
			}
			st.Data = append(st.Data, p.Data...)
		}
		out = append(out, st)
	}
	return out, nil
}
