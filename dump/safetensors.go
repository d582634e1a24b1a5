package dump

import (
	"bytes"
	"fmt"
	"strings"

	"logitscope/safetensors"
)

// LogitsTensor is the tensor name that per-window safetensors captures use.
const LogitsTensor = "logits"

// ReadSafetensors reads the logits tensor, (rows, vocab) or (1, rows,
// vocab) in F32, F16 or BF16, and the file's string metadata.
func ReadSafetensors(path string) (*Logits, map[string]string, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	return fromSafetensors(f, path)
}

// ParseSafetensors is ReadSafetensors on bytes in memory.
func ParseSafetensors(data []byte, name string) (*Logits, map[string]string, error) {
	f, err := safetensors.NewFile(bytes.NewReader(data), int64(len(data)), name)
	if err != nil {
		return nil, nil, err
	}
	return fromSafetensors(f, name)
}

func fromSafetensors(f *safetensors.File, name string) (*Logits, map[string]string, error) {
	info, ok := f.Info(LogitsTensor)
	if !ok {
		return nil, nil, fmt.Errorf("%s: no %q tensor (has %s)", name, LogitsTensor, strings.Join(f.Names(), ", "))
	}
	shape := info.Shape
	if len(shape) == 3 && shape[0] == 1 {
		shape = shape[1:]
	}
	if len(shape) != 2 || shape[1] == 0 {
		return nil, nil, fmt.Errorf("%s: %q has shape %v, want (rows, vocab) or (1, rows, vocab)", name, LogitsTensor, info.Shape)
	}
	if !info.DType.IsFloat() {
		return nil, nil, fmt.Errorf("%s: %q is %s, want F32, F16 or BF16", name, LogitsTensor, info.DType)
	}
	data, err := f.ReadFloat32(LogitsTensor)
	if err != nil {
		return nil, nil, err
	}
	return &Logits{Rows: shape[0], Vocab: shape[1], Data: data}, f.Metadata, nil
}

// WriteSafetensors writes l as an F32 logits tensor with metadata.
func WriteSafetensors(path string, l *Logits, meta map[string]string) error {
	return safetensors.WriteFile(path, []safetensors.Tensor{{
		Name: LogitsTensor, DType: safetensors.F32, Shape: []int{l.Rows, l.Vocab}, Data: safetensors.EncodeF32(l.Data),
	}}, meta)
}

// ReadAny reads a dump in either format: safetensors when the name ends in
// .safetensors, else the binary dump (whose metadata is nil).
func ReadAny(path string) (*Logits, map[string]string, error) {
	if strings.HasSuffix(path, ".safetensors") {
		return ReadSafetensors(path)
	}
	l, err := ReadFile(path)
	return l, nil, err
}
