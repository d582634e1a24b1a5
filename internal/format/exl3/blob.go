package exl3

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Format is a layer's bits per weight and codebook, as a variant names
// it: "exl3-k4-mcg". K is 0 for a tensor that is not EXL3.
type Format struct {
	K        int
	Codebook Codebook
}

func (f Format) String() string { return fmt.Sprintf("exl3-k%d-%s", f.K, f.Codebook) }

// ParseFormat reads "exl3-kK" (the MCG codebook, the seed's) or
// "exl3-kK-CODEBOOK" with CODEBOOK one of 3inst, mcg, mul1, K 1 to 8.
func ParseFormat(s string) (Format, error) {
	rest, ok := strings.CutPrefix(s, "exl3-k")
	if !ok {
		return Format{}, fmt.Errorf("exl3: format %q: want exl3-kK or exl3-kK-CODEBOOK (K 1 to 8; CODEBOOK 3inst, mcg or mul1)", s)
	}
	bits, cb, hasCB := strings.Cut(rest, "-")
	k, err := strconv.Atoi(bits)
	if err != nil || k < 1 || k > 8 {
		return Format{}, fmt.Errorf("exl3: format %q: %q bits per weight: want 1 to 8", s, bits)
	}
	f := Format{K: k, Codebook: MCG}
	if hasCB {
		switch cb {
		case "3inst":
			f.Codebook = Inst3
		case "mcg":
		case "mul1":
			f.Codebook = MUL1
		default:
			return Format{}, fmt.Errorf("exl3: format %q: codebook %q: want 3inst, mcg or mul1", s, cb)
		}
	}
	return f, nil
}

// Pad is n rounded up to a multiple of 128, the width of the Hadamard
// transforms: exllamav3 pads both dims of a layer so.
func Pad(n int) int { return (n + 127) / 128 * 128 }

// Blob is how a variant stores a layer of in inputs and out outputs
// (unpadded): its trellis words, then suh, then svh, all little-endian
// 16-bit, over the padded dims: the three tensors exllamav3 writes for
// it, back to back, so that one file region holds the layer.
func (f Format) TrellisBytes(in, out int) int64 {
	return int64(Pad(in)/16) * int64(Pad(out)/16) * 16 * int64(f.K) * 2
}

// Bytes is the size of a layer's blob.
func (f Format) Bytes(in, out int) int64 {
	return f.TrellisBytes(in, out) + 2*int64(Pad(in)+Pad(out))
}

// Blob lays out l as Format.Bytes describes.
func (l Layer) Blob() []byte {
	b := make([]byte, 0, 2*(len(l.Trellis)+len(l.Suh)+len(l.Svh)))
	for _, ws := range [][]uint16{l.Trellis, l.Suh, l.Svh} {
		for _, w := range ws {
			b = binary.LittleEndian.AppendUint16(b, w)
		}
	}
	return b
}

// FromBlob reads back a blob of a layer of in inputs and out outputs.
func FromBlob(b []byte, in, out int, f Format) (Layer, error) {
	l := Layer{In: Pad(in), Out: Pad(out), K: f.K, Codebook: f.Codebook}
	if int64(len(b)) != f.Bytes(in, out) {
		return l, fmt.Errorf("exl3: a %s layer of %d×%d is %d bytes, got %d", f, in, out, f.Bytes(in, out), len(b))
	}
	words := func(n int) []uint16 {
		w := make([]uint16, n)
		for i := range w {
			w[i] = binary.LittleEndian.Uint16(b[2*i:])
		}
		b = b[2*n:]
		return w
	}
	l.Trellis = words(int(f.TrellisBytes(in, out) / 2))
	l.Suh, l.Svh = words(l.In), words(l.Out)
	return l, nil
}

// Scales are a blob's suh and svh as float32 (exact: they are fp16).
func (f Format) Scales(blob []byte, in, out int) (suh, svh []float32) {
	widen := func(b []byte) []float32 {
		v := make([]float32, len(b)/2)
		for i := range v {
			v[i] = float32(f16(binary.LittleEndian.Uint16(b[2*i:])))
		}
		return v
	}
	t := f.TrellisBytes(in, out)
	return widen(blob[t : t+2*int64(Pad(in))]), widen(blob[t+2*int64(Pad(in)):])
}

// DecodeColumns writes columns [c0, c1) of Ŵ (in, out: the padded dims),
// both multiples of 16, as rows of dst: dst[(c−c0)·in + r] = Ŵ[r, c],
// the output c's weights over the inputs, as a matrix product reads
// them. trellis is the blob's first TrellisBytes. The values are
// Inner's, bit for bit, through a table of the codebook's 65536 states:
// a tile's states are read straight from its bitstream, two words at a
// time, rather than rolled through it as States does.
func (f Format) DecodeColumns(trellis []byte, in, out, c0, c1 int, dst []float32) {
	k, per := f.K, 32*f.K // bits a weight, bytes a tile
	lut := table(f.Codebook)
	n := TileWeights * k // bits in a tile's stream
	// at[p] is position p's place in dst from its tile's corner.
	var at [TileWeights]int
	for p := range at {
		r, c := Position(p)
		at[p] = c*in + r
	}
	var u [8*8 + 1]uint32
	for tn := c0 / 16; tn < c1/16; tn++ {
		for tk := range in / 16 {
			tile := trellis[(tk*(out/16)+tn)*per:][:per]
			for i := range 8 * k {
				u[i] = binary.LittleEndian.Uint32(tile[4*i:]) // words 2i and 2i+1, the first low
			}
			u[8*k] = u[0] // the stream read circularly
			d := dst[(16*tn-c0)*in+16*tk:]
			s := n + k - 16 // position 0's state's first bit, from the stream's end
			for p := range TileWeights {
				if s >= n {
					s -= n
				}
				w := uint64(u[s>>5])<<32 | uint64(u[s>>5+1])
				d[at[p]] = lut[uint16(w>>(48-s&31))]
				s += k
			}
		}
	}
}

// Hadamard32 applies the normalised 128-wide Hadamard to each block of
// 128 of x, in place, in float32: the butterflies of hadamard, then one
// multiplication by 1/√128. Both engines transform activations with it,
// in this order of operations.
func Hadamard32(x []float32) {
	scale := float32(1 / math.Sqrt(128))
	for b := 0; b < len(x); b += 128 {
		v := x[b : b+128 : b+128]
		for h := 1; h < 128; h *= 2 {
			for i := 0; i < 128; i += 2 * h {
				for j := i; j < i+h; j++ {
					v[j], v[j+h] = v[j]+v[j+h], v[j]-v[j+h]
				}
			}
		}
		for i := range v {
			v[i] *= scale
		}
	}
}

// Rows is a blob's W as the engines store a matrix, (out, in) for a layer
// of in inputs and out outputs (unpadded): each output's weights, from
// Exact rounded once to float32.
func (f Format) Rows(blob []byte, in, out int) ([]float32, error) {
	l, err := FromBlob(blob, in, out, f)
	if err != nil {
		return nil, err
	}
	w, err := l.Exact() // (In, Out), padded
	if err != nil {
		return nil, err
	}
	rows := make([]float32, out*in)
	for r := range out {
		for c := range in {
			rows[r*in+c] = float32(w[c*l.Out+r])
		}
	}
	return rows, nil
}
