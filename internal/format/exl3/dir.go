package exl3

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/safetensors"
)

// Tensors is l as exllamav3 writes it under prefix (a linear layer's name
// without ".weight"): trellis, suh, svh, and the codebook's marker
// tensor (none for 3INST).
func (l Layer) Tensors(prefix string) []safetensors.Tensor {
	u16 := func(w []uint16) []byte {
		b := make([]byte, 2*len(w))
		for i, x := range w {
			binary.LittleEndian.PutUint16(b[2*i:], x)
		}
		return b
	}
	ts := []safetensors.Tensor{
		{Name: prefix + ".trellis", DType: safetensors.I16, Shape: []int{l.In / 16, l.Out / 16, 16 * l.K}, Data: u16(l.Trellis)},
		{Name: prefix + ".suh", DType: safetensors.F16, Shape: []int{len(l.Suh)}, Data: u16(l.Suh)},
		{Name: prefix + ".svh", DType: safetensors.F16, Shape: []int{len(l.Svh)}, Data: u16(l.Svh)},
	}
	if m, ok := map[Codebook]uint32{MCG: mcgMultiplier, MUL1: mul1Multiplier}[l.Codebook]; ok {
		ts = append(ts, safetensors.Tensor{Name: prefix + "." + l.Codebook.String(), DType: safetensors.I32, Shape: []int{}, Data: binary.LittleEndian.AppendUint32(nil, m)})
	}
	return ts
}

// Dir is a model directory exllamav3 converted: its config.json's
// quantization_config, and its safetensors files, each with its sha256,
// so that a variant taking layers from it can name the bytes it took.
type Dir struct {
	Path   string
	Method string            // quantization_config.quant_method: "exl3"
	Bits   float64           // quantization_config.bits, the mean the converter aimed at
	Files  map[string]string // base name → sha256
	open   []*safetensors.File
}

// OpenDir opens dir and hashes its safetensors files. A config.json, when
// there is one, must say quant_method "exl3".
func OpenDir(dir string) (*Dir, error) {
	d := &Dir{Path: dir, Files: map[string]string{}}
	if data, err := os.ReadFile(filepath.Join(dir, "config.json")); err == nil {
		var c struct {
			Q *struct {
				Method string  `json:"quant_method"`
				Bits   float64 `json:"bits"`
			} `json:"quantization_config"`
		}
		if err := json.Unmarshal(data, &c); err != nil {
			return nil, fmt.Errorf("%s: %v", filepath.Join(dir, "config.json"), err)
		}
		if c.Q == nil || c.Q.Method != "exl3" {
			return nil, fmt.Errorf("%s: no quantization_config with quant_method \"exl3\": not a model exllamav3 converted", filepath.Join(dir, "config.json"))
		}
		d.Method, d.Bits = c.Q.Method, c.Q.Bits
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	paths, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(paths) == 0 {
		return nil, fmt.Errorf("%s: no .safetensors files", dir)
	}
	slices.Sort(paths)
	for _, p := range paths {
		sum, err := checkpoint.FileSHA256(p)
		if err != nil {
			d.Close()
			return nil, err
		}
		f, err := safetensors.Open(p)
		if err != nil {
			d.Close()
			return nil, err
		}
		d.Files[filepath.Base(p)], d.open = sum, append(d.open, f)
	}
	return d, nil
}

// Layer reads the EXL3 layer of a matrix (its Hugging Face name, ending
// in ".weight") from whichever file holds its trellis; ok is false when
// none does.
func (d *Dir) Layer(name string) (l Layer, file string, ok bool, err error) {
	prefix := strings.TrimSuffix(name, ".weight")
	for _, f := range d.open {
		if _, has := f.Info(prefix + ".trellis"); has {
			l, err = ReadLayer(f, prefix)
			return l, filepath.Base(f.Path), true, err
		}
	}
	return Layer{}, "", false, nil
}

// Close closes the files.
func (d *Dir) Close() {
	for _, f := range d.open {
		f.Close()
	}
	d.open = nil
}
