package hubquant

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"logitscope/internal/format/awq"
	"logitscope/internal/format/bnb"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/compressed"
	"logitscope/internal/format/gptq"
	"logitscope/internal/format/lookup"
	"logitscope/internal/format/mlx"
	"logitscope/internal/format/safetensors"
)

// Options are a writer's settings, as quantize's flags give them; each
// format takes those it has. Errors name the settings by those flags
// (--bits, --group-size, --checkpoint-format).
type Options struct {
	Bits      int
	GroupSize int // −1: one group per row
	Sym       bool
	DescAct   bool
	// Checkpoint is the format's checkpoint_format, "" for its default
	// (GPTQ: "gptq", v1, or "gptq_v2").
	Checkpoint string
	// Given names the settings the user gave (by flag: "bits",
	// "group-size", "sym", "desc-act", "checkpoint-format"): a format
	// refuses one it has not, and keeps its tool's default for one not
	// given.
	Given map[string]bool
}

// takes refuses a setting o was given that the format named does not
// have.
func (o Options) takes(format string, settings ...string) error {
	for _, k := range slices.Sorted(maps.Keys(o.Given)) {
		if o.Given[k] && !slices.Contains(settings, k) {
			if len(settings) == 0 {
				return fmt.Errorf("--%s: %s has no settings (it writes its tool's preset)", k, format)
			}
			return fmt.Errorf("--%s: %s takes only --%s", k, format, strings.Join(settings, ", --"))
		}
	}
	return nil
}

// Writers makes the formats quantize --format writes, by name. The one
// place a writer is registered.
var Writers = map[string]func(Options) (lookup.Format, error){
	"gptq":     gptqWriter,
	"awq":      awqWriter,
	"ct-w4a16": w4a16Writer,
	"ct-w8a8":  ctPreset("ct-w8a8"),
	"ct-fp8":   ctPreset("ct-fp8"),
	"ct-nvfp4": ctPreset("ct-nvfp4"),
	"mlx":      mlxWriter,
	"bnb-nf4":  presetWriter("bnb-nf4", func() (lookup.Format, error) { return bnb.NF4(false), nil }),
	"bnb-fp4":  presetWriter("bnb-fp4", func() (lookup.Format, error) { return bnb.FP4(false), nil }),
}

// presetWriter is a format written at its tool's preset, without settings.
func presetWriter(name string, f func() (lookup.Format, error)) func(Options) (lookup.Format, error) {
	return func(o Options) (lookup.Format, error) {
		if err := o.takes(name); err != nil {
			return nil, err
		}
		return f()
	}
}

// ctPreset is llm-compressor's preset of that writer name.
func ctPreset(name string) func(Options) (lookup.Format, error) {
	return presetWriter(name, func() (lookup.Format, error) { return compressed.ByName(name) })
}

// awqWriter is AutoAWQ's GEMM: 4 bits, zero points unless --sym is given.
func awqWriter(o Options) (lookup.Format, error) {
	if err := o.takes("awq", "bits", "group-size", "sym"); err != nil {
		return nil, err
	}
	if o.Bits != 4 {
		return nil, fmt.Errorf("--bits %d: awq writes 4", o.Bits)
	}
	if o.GroupSize != -1 && o.GroupSize <= 0 {
		return nil, fmt.Errorf("--group-size %d: awq takes a positive size or -1 (one group per row)", o.GroupSize)
	}
	return awq.New(4, o.GroupSize, !(o.Given["sym"] && o.Sym)), nil
}

// w4a16Writer is llm-compressor's W4A16 (pack-quantized int4); --desc-act
// is its actorder "group".
func w4a16Writer(o Options) (lookup.Format, error) {
	if err := o.takes("ct-w4a16", "bits", "group-size", "sym", "desc-act"); err != nil {
		return nil, err
	}
	if o.Bits != 4 {
		return nil, fmt.Errorf("--bits %d: ct-w4a16 writes 4", o.Bits)
	}
	actorder := ""
	if o.DescAct {
		actorder = "group"
	}
	return compressed.W4A16(o.GroupSize, o.Sym, actorder)
}

// mlxWriter is mlx-lm's affine quantization, 4 bits in groups of 64
// unless --bits and --group-size say otherwise.
func mlxWriter(o Options) (lookup.Format, error) {
	if err := o.takes("mlx", "bits", "group-size"); err != nil {
		return nil, err
	}
	bits, gs := 4, 64
	if o.Given["bits"] {
		bits = o.Bits
	}
	if o.Given["group-size"] {
		gs = o.GroupSize
	}
	f := mlx.New(bits, gs)
	return f, f.Err()
}

// WriterNames is Writers' names, sorted, for messages.
func WriterNames() []string { return slices.Sorted(maps.Keys(Writers)) }

func gptqWriter(o Options) (lookup.Format, error) {
	c := gptq.Config{Bits: o.Bits, GroupSize: o.GroupSize, Sym: o.Sym, DescAct: o.DescAct}
	switch o.Checkpoint {
	case "", "gptq":
	case "gptq_v2":
		c.V2 = true
	default:
		return nil, fmt.Errorf("--checkpoint-format %q: gptq writes gptq (v1, zero-1 stored) or gptq_v2", o.Checkpoint)
	}
	if !slices.Contains(gptq.Bits, c.Bits) {
		return nil, fmt.Errorf("--bits %d: gptq writes 2, 3, 4 or 8", c.Bits)
	}
	if c.GroupSize != -1 && c.GroupSize <= 0 {
		return nil, fmt.Errorf("--group-size %d: gptq takes a positive size or -1 (one group per row)", c.GroupSize)
	}
	return gptq.New(c)
}

// copied are the files a quantizing tool carries over from the source
// checkpoint: tokenizer and generation settings.
var copied = []string{
	"generation_config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
	"added_tokens.json", "vocab.json", "merges.txt", "tokenizer.model", "chat_template.jinja", "chat_template.json",
}

// Subdir is the directory of a model directory that holds the hub
// checkpoints quantized from it: quantize --format writes them there, and
// serve lists them as the model's sides.
const Subdir = "hub"

// DefaultDir is where quantize --format writes f's checkpoint of the
// model at modelDir: Subdir and f's name with dashes for spaces
// (hub/gptq-4-bit-g128-sym).
func DefaultDir(modelDir string, f lookup.Format) string {
	return filepath.Join(modelDir, Subdir, strings.ReplaceAll(f.Name(), " ", "-"))
}

// Write quantizes ck into dir as f's tool would: config.json (the
// source's, plus quantization_config), the tokenizer and generation
// files copied, and model.safetensors holding the quantized modules'
// tensors and every other tensor as stored. progress, if set, is told
// after each source tensor.
func Write(ck *checkpoint.Checkpoint, f lookup.Format, dir string, progress func(done, total int)) error {
	src := filepath.Join(ck.Dir, "config.json")
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	_, isMLX := f.(*mlx.Format)
	config, err := withQuantization(b, f.Config(), isMLX)
	if err != nil {
		return fmt.Errorf("%s: %w", src, err)
	}
	var out []safetensors.Tensor
	names := ck.Names()
	for i, name := range names {
		ts, err := tensorsOf(ck, f, name)
		if err != nil {
			return err
		}
		out = append(out, ts...)
		if progress != nil {
			progress(i+1, len(names))
		}
	}
	if fin, ok := f.(lookup.Finisher); ok {
		if out, err = fin.Finish(out); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), config, 0o644); err != nil {
		return err
	}
	for _, name := range copied {
		data, err := os.ReadFile(filepath.Join(ck.Dir, name))
		if os.IsNotExist(err) {
			continue
		}
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), data, 0o644)
		}
		if err != nil {
			return err
		}
	}
	return safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), out, map[string]string{"format": "pt"})
}

// tensorsOf is what the quantized checkpoint stores for one source
// tensor: the format's tensors for a matrix it quantizes, else the
// tensor's bytes as they are.
func tensorsOf(ck *checkpoint.Checkpoint, f lookup.Format, name string) ([]safetensors.Tensor, error) {
	raw, info, err := ck.Raw(name)
	if err != nil {
		return nil, err
	}
	module, isWeight := strings.CutSuffix(name, ".weight")
	if !isWeight || len(info.Shape) != 2 || !f.Quantized(module) {
		return []safetensors.Tensor{{Name: name, DType: info.DType, Shape: info.Shape, Data: raw}}, nil
	}
	w, shape, err := ck.Float32(name)
	if err != nil {
		return nil, err
	}
	ts, err := f.Quantize(module, w, shape[0], shape[1])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ck.Dir, err)
	}
	return ts, nil
}

// withQuantization is config.json with quantization_config set to qc (and
// MLX's quantization),
// every other field as written (numbers keep their spelling).
func withQuantization(config, qc json.RawMessage, mlx bool) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(config))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	m["quantization_config"] = qc
	if mlx {
		// mlx-lm's own key; it writes the copy above for transformers.
		m["quantization"] = qc
	}
	b, err := json.MarshalIndent(m, "", "  ")
	return append(b, '\n'), err
}
