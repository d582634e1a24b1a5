package main

// The served models as the page knows them, and what a link's spec takes
// from its model: a ready prompt and panel, the variants it has. Pure Go
// (no syscall/js), tested natively.

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/format/sidecar"
)

// modelInfo is one entry of GET /models/.
type modelInfo struct {
	Name         string        `json:"name"`
	Architecture string        `json:"architecture"`
	Vocab        int           `json:"vocab"`
	Variants     []variantInfo `json:"variants"`
	Files        []fileInfo    `json:"files"`
	// From the model's sidecar (package sidecar): its nature, one line
	// about it, and a ready prompt and panel text.
	Nature string `json:"nature"`
	About  string `json:"about"`
	Prompt string `json:"prompt"`
	Panel  string `json:"panel"`
}

// fileInfo is one of the files GET /models/ lists for a model.
type fileInfo struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
}

// variantInfo is one of a model's variants or GGUF files.
type variantInfo struct {
	Kind   string         `json:"kind"` // variant, gguf or hub
	Name   string         `json:"name"` // what a spec's side names
	Bytes  float64        `json:"bytes"`
	Policy string         `json:"policy"`
	SHA256 string         `json:"sha256"` // a served GGUF's; a served hub checkpoint's fingerprint
	Types  map[string]int `json:"types"`  // a GGUF's tensors per ggml type
	Format string         `json:"format"` // a hub checkpoint's ("gptq 4-bit g128 sym")
}

// What a model without a sidecar is offered: any model can answer a
// question and read a paragraph, so the form is never empty.
const (
	readyPrompt = "What is the capital of France?"
	readyPanel  = "Quantization maps each weight of a language model to a small integer and a shared scale. " +
		"The model gets smaller and faster, and its logits move a little. Most of the time the largest logit " +
		"stays the largest, and the next token does not change.\n"
)

// has says whether m can run variant v: f32 always, else one of its
// variants or GGUF files.
func (m *modelInfo) has(v string) bool {
	return v == "f32" || slices.ContainsFunc(m.Variants, func(x variantInfo) bool { return x.Name == v })
}

// defaultTest is the test side a link that names none gets on m: q4 when
// m has it, else its coarsest quantized variant, else its first GGUF file,
// else f32 (the form then says how to make a variant: offering a q4 that
// is not there only fails once its files are asked for).
func (m *modelInfo) defaultTest() string {
	for _, v := range []string{"q4", "q6", "q8"} {
		if m.has(v) {
			return v
		}
	}
	for _, v := range m.Variants {
		return v.Name
	}
	return "f32"
}

// specNamed says whether a link names any of a spec's fields: a bare link
// (or one with only autorun or a view) opens on the model's ready spec.
func specNamed(q url.Values) bool {
	for _, k := range []string{"model", "fp", "ref", "test", "mode", "device", "prompt", "panel", "system", "max_new", "window", "stops"} {
		if q.Has(k) {
			return true
		}
	}
	return false
}

// readySpec fills what the link q left out of s from m (nil: the model is
// not listed): m's ready prompt and panel (or the page's own), a panel
// when m has a ready panel and the link names no mode, and a test side
// that m has. What the link names stays as it is.
func readySpec(s snapshot.Spec, q url.Values, m *modelInfo) snapshot.Spec {
	prompt, panel := readyPrompt, readyPanel
	if m != nil && m.Prompt != "" {
		prompt = m.Prompt
	}
	if m != nil && m.Panel != "" {
		panel = m.Panel
	}
	if !q.Has("prompt") && s.Prompt == "" {
		s.Prompt = prompt
	}
	if !q.Has("panel") && s.Panel == "" {
		s.Panel = panel
	}
	if m == nil {
		return s
	}
	if !q.Has("mode") && m.Panel != "" {
		s.Mode = snapshot.Panel
	}
	if !q.Has("test") {
		s.Test = m.defaultTest()
	}
	return s
}

// missingVariant says why side's variant v cannot run on model m (the
// served model named name, or a folder from this computer), naming the
// command that makes it; "" when m has it or is not known.
func missingVariant(m *modelInfo, name, side, v string) string {
	if m == nil || m.has(v) {
		return ""
	}
	if _, local := snapshot.LocalName(v); local {
		return ""
	}
	if dir, ok := strings.CutPrefix(v, snapshot.HubPrefix); ok {
		return fmt.Sprintf("%s side: model %s has no hub checkpoint %s. %s", side, modelName(name), v, hubHint(name, dir))
	}
	if snapshot.IsONNX(v) {
		return onnxMissing(name, side, v)
	}
	if !slices.Contains([]string{"q8", "q6", "q4"}, v) {
		return fmt.Sprintf("%s side: model %s has no GGUF file %s", side, modelName(name), v)
	}
	return fmt.Sprintf("%s side: model %s has no %s variant. %s", side, modelName(name), v, quantizeHint(name, v))
}

// onnxMissing says that model name has no ONNX export v, and the command
// that writes one where serve lists it (onnx/q4.onnx from the q4 variant).
func onnxMissing(name, side, v string) string {
	if _, local := snapshot.LocalModel(name); local {
		return fmt.Sprintf("%s side: %s runs a served model's ONNX export through onnxruntime-web; a folder from this computer has none", side, v)
	}
	scheme := strings.TrimSuffix(strings.TrimPrefix(strings.ToLower(v), snapshot.ONNXPrefix), ".onnx")
	if !slices.Contains([]string{"f32", "q4"}, scheme) {
		scheme = "q4"
	}
	return fmt.Sprintf("%s side: model %s has no ONNX export %s. Make it with: go run ./cmd/logitscope export --model MODELS/%s --variant %s --onnx MODELS/%s/%s (MODELS: the directory given to serve -models), then restart serve.",
		side, modelName(name), v, name, scheme, name, v)
}

// quantizeHint is the command that makes a model's variant v: the server's
// model directory is MODELS/NAME (serve -models MODELS), a folder from
// this computer wherever it lies.
func quantizeHint(name, v string) string {
	if folder, local := snapshot.LocalModel(name); local {
		return fmt.Sprintf("Make it with: go run ./cmd/logitscope quantize --model PATH/%s --scheme %s (PATH: where the folder lies), then choose the folder again.", folder, v)
	}
	return fmt.Sprintf("Make it with: go run ./cmd/logitscope quantize --model MODELS/%s --scheme %s (MODELS: the directory given to serve -models), then restart serve.", name, v)
}

// hubHint is the command that writes a model's hub checkpoint into its
// hub/ (quantize --format, whose settings name the directory), where the
// server and a chosen folder find it.
func hubHint(name, dir string) string {
	if folder, local := snapshot.LocalModel(name); local {
		return fmt.Sprintf("Make one with: go run ./cmd/logitscope quantize --model PATH/%s --format gptq --out PATH/%s/hub/%s (or awq, ct-w4a16, ct-w8a8, ct-fp8, ct-nvfp4, mlx, bnb-nf4, bnb-fp4; PATH: where the folder lies), or put a checkpoint from the hub there, then choose the folder again.", folder, folder, dir)
	}
	return fmt.Sprintf("Make one with: go run ./cmd/logitscope quantize --model MODELS/%s --format gptq --out MODELS/%s/hub/%s (or awq, ct-w4a16, ct-w8a8, ct-fp8, ct-nvfp4, mlx, bnb-nf4, bnb-fp4; MODELS: the directory given to serve -models), or put a checkpoint from the hub there, then restart serve.", name, name, dir)
}

// natureOf is what the page says of model m: its sidecar's nature and
// line, or the user's model when it has none.
func natureOf(m *modelInfo) *snapshot.Model {
	if m == nil || m.Nature == "" {
		return &snapshot.Model{Nature: sidecar.User}
	}
	return &snapshot.Model{Nature: m.Nature, About: m.About}
}
