package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/x448/float16"
)

// DecodeFloat32 decodes raw little-endian F32/F16/BF16 bytes into dst (len(dst) elements).
func DecodeFloat32(dtype DType, raw []byte, dst []float32) error {
	if !dtype.IsFloat() {
		return fmt.Errorf("safetensors: cannot decode %q to float32; only F32, F16 and BF16", dtype)
	}
	if want := len(dst) * dtype.Size(); len(raw) != want {
		return fmt.Errorf("safetensors: decoding %d %s values needs %d bytes, got %d", len(dst), dtype, want, len(raw))
	}
	decodeFloat32(dtype, raw, dst)
	return nil
}

// decodeFloat32 assumes DecodeFloat32's checks have been done.
func decodeFloat32(dtype DType, raw []byte, dst []float32) {
	le := binary.LittleEndian
	switch dtype {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(le.Uint32(raw[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = float16.Frombits(le.Uint16(raw[2*i:])).Float32()
		}
	case BF16:
		for i := range dst {
			dst[i] = FromBF16(le.Uint16(raw[2*i:]))
		}
	}
}

// FromBF16 widens a bfloat16 bit pattern to float32. The conversion is exact:
// bfloat16 is the top half of a float32.
func FromBF16(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// ToBF16 rounds f to the nearest bfloat16, ties to even, and returns its bit
// pattern. NaN stays NaN (quiet, sign kept): truncating its payload could
// otherwise leave all-zero mantissa bits, which would read back as Inf.
func ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x0040
	}
	// Adding 0x7fff rounds up exactly when the low half exceeds 0x8000; the
	// kept LSB breaks the tie at 0x8000 towards even. A carry out of the
	// mantissa bumps the exponent, which is correct, up to and including
	// rounding the largest finite values to Inf.
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// ToF16 rounds f to the nearest IEEE half, ties to even; out-of-range values
// become ±Inf and NaN stays NaN.
func ToF16(f float32) uint16 { return float16.Fromfloat32(f).Bits() }

// FromF16 widens an IEEE half bit pattern to float32 (exact).
func FromF16(b uint16) float32 { return float16.Frombits(b).Float32() }

// EncodeBF16 rounds each value to bfloat16 (round to nearest even) and packs them little-endian.
func EncodeBF16(src []float32) []byte {
	out := make([]byte, 2*len(src))
	for i, f := range src {
		binary.LittleEndian.PutUint16(out[2*i:], ToBF16(f))
	}
	return out
}

// EncodeF16 rounds each value to IEEE half (round to nearest even) and packs
// them little-endian.
func EncodeF16(src []float32) []byte {
	out := make([]byte, 2*len(src))
	for i, f := range src {
		binary.LittleEndian.PutUint16(out[2*i:], ToF16(f))
	}
	return out
}

// EncodeF32 packs float32 values little-endian.
func EncodeF32(src []float32) []byte {
	out := make([]byte, 4*len(src))
	for i, f := range src {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(f))
	}
	return out
}

// EncodeI32 packs int32 values little-endian.
func EncodeI32(src []int32) []byte {
	out := make([]byte, 4*len(src))
	for i, v := range src {
		binary.LittleEndian.PutUint32(out[4*i:], uint32(v))
	}
	return out
}
