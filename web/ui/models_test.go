package main

import (
	"net/url"
	"strings"
	"testing"

	"logitscope/internal/analysis/snapshot"
)

// A link's spec takes what it does not name from its model: the ready
// prompt and panel (the page's own for a model without them), a panel
// when the model has one, and a test side the model has.
func TestReadySpec(t *testing.T) {
	demo := &modelInfo{Name: "demo", Prompt: "Hi?", Panel: "Some text.", Nature: "synthetic",
		Variants: []variantInfo{{Kind: "variant", Name: "q8"}, {Kind: "variant", Name: "q4"}}}
	bare := &modelInfo{Name: "bare"}
	gguf := &modelInfo{Name: "g", Variants: []variantInfo{{Kind: "gguf", Name: "m-Q4_K_M.gguf"}}}
	q6 := &modelInfo{Name: "q6", Variants: []variantInfo{{Kind: "variant", Name: "q8"}, {Kind: "variant", Name: "q6"}}}
	for _, tc := range []struct {
		name          string
		query         string
		m             *modelInfo
		mode          string
		test          string
		prompt, panel string
	}{
		{"bare link", "", demo, snapshot.Panel, "q4", "Hi?", "Some text."},
		{"autorun alone", "autorun=1", demo, snapshot.Panel, "q4", "Hi?", "Some text."},
		{"named mode and prompt", "mode=greedy&prompt=Why", demo, snapshot.Greedy, "q4", "Why", "Some text."},
		{"named test kept", "test=q8", demo, snapshot.Panel, "q8", "Hi?", "Some text."},
		{"no sidecar", "model=bare", bare, snapshot.Greedy, "f32", readyPrompt, readyPanel},
		{"a GGUF only", "model=g", gguf, snapshot.Greedy, "m-Q4_K_M.gguf", readyPrompt, readyPanel},
		{"coarsest variant", "model=q6", q6, snapshot.Greedy, "q6", readyPrompt, readyPanel},
		{"model not listed", "model=x", nil, snapshot.Greedy, "q4", readyPrompt, readyPanel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, _ := url.ParseQuery(tc.query)
			s, err := snapshot.ParseQuery(q)
			if err != nil {
				t.Fatal(err)
			}
			got := readySpec(s, q, tc.m)
			if got.Mode != tc.mode || got.Test != tc.test || got.Prompt != tc.prompt || got.Panel != tc.panel {
				t.Errorf("mode %q test %q prompt %q panel %.20q; want %q %q %q %.20q", got.Mode, got.Test, got.Prompt, got.Panel,
					tc.mode, tc.test, tc.prompt, tc.panel)
			}
			if err := got.Check(); err != nil {
				t.Errorf("the ready spec does not run: %v", err)
			}
		})
	}
	if specNamed(url.Values{"autorun": {"1"}, "pos": {"3"}}) || !specNamed(url.Values{"prompt": {""}}) {
		t.Error("specNamed: autorun and a view name no spec; a prompt does")
	}
}

// A variant the model lacks is refused before anything is fetched, with a
// command that makes it, --model included.
func TestMissingVariant(t *testing.T) {
	bare := &modelInfo{Name: "bare", Variants: []variantInfo{{Kind: "gguf", Name: "m.gguf"}, {Kind: "hub", Name: "hub/awq"}}}
	for _, tc := range []struct {
		model, v, want string
	}{
		{"bare", "f32", ""},
		{"bare", "m.gguf", ""},
		{"bare", "local:x.gguf", ""},
		{"bare", "q4", "test side: model bare has no q4 variant. Make it with: go run ./cmd/logitscope quantize --model MODELS/bare --scheme q4 (MODELS: the directory given to serve -models), then restart serve."},
		{"bare", "other.gguf", "test side: model bare has no GGUF file other.gguf"},
		{"local:tiny/", "q6", "quantize --model PATH/tiny --scheme q6"},
		{"bare", "hub/awq", ""},
		{"bare", "hub/gptq", "test side: model bare has no hub checkpoint hub/gptq. Make one with: go run ./cmd/logitscope quantize --model MODELS/bare --format gptq --out MODELS/bare/hub/gptq"},
		{"local:tiny/", "hub/mlx", "quantize --model PATH/tiny --format gptq --out PATH/tiny/hub/mlx"},
		{"bare", "onnx/q4.onnx", "test side: model bare has no ONNX export onnx/q4.onnx. Make it with: go run ./cmd/logitscope export --model MODELS/bare --variant q4 --onnx MODELS/bare/onnx/q4.onnx"},
		{"bare", "onnx/f32.onnx", "--variant f32 --onnx MODELS/bare/onnx/f32.onnx"},
		{"local:tiny/", "onnx/q4.onnx", "a folder from this computer has none"},
	} {
		got := missingVariant(bare, tc.model, "test", tc.v)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s %s: %q, want %q", tc.model, tc.v, got, tc.want)
		}
	}
	if got := missingVariant(nil, "x", "test", "q4"); got != "" {
		t.Errorf("a model not known yet: %q", got)
	}
}
