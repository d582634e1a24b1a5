package exl3

import (
	"encoding/binary"
	"fmt"

	"logitscope/internal/format/safetensors"
)

// The codebook multipliers this package decodes: the value of a layer's
// mcg or mul1 tensor (int32 bits) in exllamav3 from October 2025 on.
const (
	mcgMultiplier  = 0xCBAC1FED
	mul1Multiplier = 0x83DCD12D
)

// ReadLayer reads the quantized linear layer named prefix (for example
// model.layers.3.mlp.experts.7.down_proj) from f: prefix.trellis (I16, k/16
// × n/16 × 16·K), prefix.suh (F16, k) and prefix.svh (F16, n), or older
// files' packed signs prefix.su (I16, k/16) and prefix.sv, and the
// codebook a prefix.mcg or prefix.mul1 tensor names (3INST without
// either). Errors name the file and the tensor.
func ReadLayer(f *safetensors.File, prefix string) (Layer, error) {
	var l Layer
	file := f.Path
	fail := func(format string, a ...any) (Layer, error) {
		return Layer{}, fmt.Errorf("%s: %s: %s", file, prefix, fmt.Sprintf(format, a...))
	}
	tr, ok := f.Info(prefix + ".trellis")
	if !ok {
		return fail("no %s.trellis: not an EXL3 layer", prefix)
	}
	if tr.DType == safetensors.I16 && len(tr.Shape) == 3 && tr.Shape[2]%16 == 8 {
		return fail("trellis %v: %d words a tile, a half-integer bitrate (K+½, mul1 only), which this build does not decode", tr.Shape, tr.Shape[2])
	}
	if tr.DType != safetensors.I16 || len(tr.Shape) != 3 || tr.Shape[2]%16 != 0 {
		return fail("trellis is %s %v: want I16 (k/16, n/16, 16·K)", tr.DType, tr.Shape)
	}
	l.In, l.Out, l.K = 16*tr.Shape[0], 16*tr.Shape[1], tr.Shape[2]/16
	if l.K < 1 || l.K > 8 || l.In%128 != 0 || l.Out%128 != 0 || l.In == 0 || l.Out == 0 {
		return fail("trellis %v: %d×%d at %d bits per weight; want multiples of 128 and 1 to 8 bits", tr.Shape, l.In, l.Out, l.K)
	}
	words := func(name string, dt safetensors.DType, n int) ([]uint16, error) {
		info, ok := f.Info(name)
		switch {
		case !ok:
			return nil, fmt.Errorf("%s: no %s", file, name)
		case info.DType != dt:
			return nil, fmt.Errorf("%s: %s is %s %v, want %s", file, name, info.DType, info.Shape, dt)
		}
		raw, err := f.ReadRaw(name)
		if err != nil {
			return nil, err
		}
		if len(raw) != 2*n {
			return nil, fmt.Errorf("%s: %s holds %d values, want %d", file, name, len(raw)/2, n)
		}
		w := make([]uint16, n)
		for i := range w {
			w[i] = binary.LittleEndian.Uint16(raw[2*i:])
		}
		return w, nil
	}
	var err error
	if l.Trellis, err = words(prefix+".trellis", safetensors.I16, l.In/16*l.Out/16*16*l.K); err != nil {
		return Layer{}, err
	}
	// suh and svh, or the packed signs su and sv of older files: one bit
	// an element, the lowest first, set for −1 (exllamav3's unpack_bf).
	scales := func(name string, n int) ([]uint16, error) {
		if _, ok := f.Info(prefix + ".s" + name + "h"); ok || n%16 != 0 {
			return words(prefix+".s"+name+"h", safetensors.F16, n)
		}
		if _, ok := f.Info(prefix + ".s" + name); !ok {
			return nil, fmt.Errorf("%s: no %s.s%sh nor %s.s%s", file, prefix, name, prefix, name)
		}
		bits, err := words(prefix+".s"+name, safetensors.I16, n/16)
		if err != nil {
			return nil, err
		}
		v := make([]uint16, n)
		for i := range v {
			v[i] = 0x3C00 | bits[i/16]>>(i%16)&1<<15 // ±1.0
		}
		return v, nil
	}
	if l.Suh, err = scales("u", l.In); err != nil {
		return Layer{}, err
	}
	if l.Svh, err = scales("v", l.Out); err != nil {
		return Layer{}, err
	}
	for _, c := range []struct {
		cb   Codebook
		mult uint32
	}{{MCG, mcgMultiplier}, {MUL1, mul1Multiplier}} {
		name := prefix + "." + c.cb.String()
		info, ok := f.Info(name)
		if !ok {
			continue
		}
		raw, err := f.ReadRaw(name)
		if err != nil {
			return Layer{}, err
		}
		if info.DType != safetensors.I32 || len(raw) != 4 {
			return fail("%s is %s %v: want one I32", name, info.DType, info.Shape)
		}
		// Files written before the multipliers were fixed may hold others,
		// which this decoder would read as noise.
		if m := binary.LittleEndian.Uint32(raw); m != c.mult {
			return fail("%s multiplier %#08x: this build decodes %#08x only", c.cb, m, c.mult)
		}
		if l.Codebook != Inst3 {
			return fail("both an mcg and a mul1 tensor: which codebook?")
		}
		l.Codebook = c.cb
	}
	return l, nil
}
