package onnxmodel

import (
	"fmt"
	"os"
	"strconv"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/onnx"
	"logitscope/internal/model"
	"logitscope/internal/quant/variant"
)

// Meta is what an export says of itself in its metadata_props, so that a
// server can tell, reading a few bytes, which checkpoint and variant an
// .onnx file computes and how long an input it takes.
type Meta struct {
	Arch     string // config.json's architecture
	Vocab    int    // logits per row
	Layers   int
	Dim      int    // hidden size
	MaxLen   int    // the longest input (Export's maxLen)
	Variant  string // "f32" or the variant's scheme ("q4")
	Model    string // the checkpoint's Fingerprint
	Manifest string // the variant's seal (manifest_sha256); "" for f32
}

// Metadata keys, prefixed so as not to collide with other producers'.
const (
	keyArch     = "logitscope.architecture"
	keyVocab    = "logitscope.vocab"
	keyLayers   = "logitscope.layers"
	keyDim      = "logitscope.hidden_size"
	keyMaxLen   = "logitscope.max_len"
	keyVariant  = "logitscope.variant"
	keyModel    = "logitscope.model_sha256"
	keyManifest = "logitscope.manifest_sha256"
)

// metaOf is what Export records of ck (and v, nil for float32) for
// inputs of up to maxLen tokens.
func metaOf(ck *checkpoint.Checkpoint, g model.Geometry, v *variant.Variant, maxLen int) (Meta, error) {
	m := Meta{Arch: g.Arch, Vocab: g.Vocab, Layers: g.NumLayers, Dim: g.Dim, MaxLen: maxLen, Variant: variant.SchemeF32}
	if v != nil {
		// The manifest names the checkpoint it was made from: a variant
		// exports without the checkpoint's weights at hand.
		m.Variant, m.Model, m.Manifest = v.Manifest.Scheme, v.Manifest.Model, v.Manifest.Seal
		return m, nil
	}
	fp, err := ck.Fingerprint()
	m.Model = fp
	return m, err
}

func (m Meta) props() []onnx.Prop {
	return []onnx.Prop{
		{Key: keyArch, Value: m.Arch}, {Key: keyVocab, Value: strconv.Itoa(m.Vocab)},
		{Key: keyLayers, Value: strconv.Itoa(m.Layers)}, {Key: keyDim, Value: strconv.Itoa(m.Dim)},
		{Key: keyMaxLen, Value: strconv.Itoa(m.MaxLen)}, {Key: keyVariant, Value: m.Variant},
		{Key: keyModel, Value: m.Model}, {Key: keyManifest, Value: m.Manifest},
	}
}

// ReadMeta reads the metadata of the export at path without reading its
// weights. A file that is not a logitscope export (another producer, or
// one written before exports carried metadata) is an error naming it.
func ReadMeta(path string) (Meta, error) {
	f, err := os.Open(path)
	if err != nil {
		return Meta{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Meta{}, err
	}
	raw, err := onnx.ReadMeta(f, st.Size(), path)
	if err != nil {
		return Meta{}, err
	}
	if raw.Producer != "logitscope" || raw.Props[keyVocab] == "" {
		return Meta{}, fmt.Errorf("%s: producer %q without logitscope's metadata: not an export of logitscope export --onnx (export it again)", path, raw.Producer)
	}
	p := raw.Props
	m := Meta{Arch: p[keyArch], Variant: p[keyVariant], Model: p[keyModel], Manifest: p[keyManifest]}
	for _, n := range []struct {
		key string
		to  *int
	}{{keyVocab, &m.Vocab}, {keyLayers, &m.Layers}, {keyDim, &m.Dim}, {keyMaxLen, &m.MaxLen}} {
		v, err := strconv.Atoi(p[n.key])
		if err != nil || v < 1 {
			return Meta{}, fmt.Errorf("%s: metadata %s %q: want a positive integer", path, n.key, p[n.key])
		}
		*n.to = v
	}
	return m, nil
}

// Fits says why an export with metadata m does not compute the
// checkpoint of config cfg, whose fingerprint is fp ("" when not known:
// then the geometry alone is compared); nil when it does.
func (m Meta) Fits(cfg checkpoint.Config, fp string) error {
	switch {
	case m.Arch != cfg.Arch():
		return fmt.Errorf("exported from a %s, the model is a %s", m.Arch, cfg.Arch())
	case m.Vocab != cfg.VocabSize:
		return fmt.Errorf("exported with a vocabulary of %d, the model's is %d", m.Vocab, cfg.VocabSize)
	case m.Layers != cfg.NumHiddenLayers || m.Dim != cfg.HiddenSize:
		return fmt.Errorf("exported from %d layers of %d, the model has %d of %d", m.Layers, m.Dim, cfg.NumHiddenLayers, cfg.HiddenSize)
	case fp != "" && m.Model != fp:
		return fmt.Errorf("exported from checkpoint %.12s, the model is %.12s (export it again)", m.Model, fp)
	}
	return nil
}
