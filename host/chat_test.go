package host

import (
	"context"
	"path/filepath"
	"slices"
	"testing"

	"logitscope/internal/model/synth"
	"logitscope/internal/text/chat"
	"logitscope/internal/text/tokenizer"
)

// roleTemplate tags each turn with its role, so that a prompt rendered
// with it cannot be mistaken for ChatML.
const roleTemplate = "{% for m in messages %}[{{ m.role }}] {{ m.content }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}"

// A text request renders the checkpoint's own chat_template inside
// engine.wasm, as the CLI does natively.
func TestTextRequestUsesChatTemplate(t *testing.T) {
	setup(t)
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(synth.Presets["tiny"], dir, synth.Options{ChatTemplate: roleTemplate}); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}

	e, err := fixtures.mod.Open(ctx, nil, dir, "f32", 64)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	_, res, err := e.Run(ctx, map[string]any{"mode": "greedy", "text": "Hello", "system": "S", "max_new": 1, "stops": []int{}})
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.LoadConfig(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	prompt, err := chat.Render(tmpl, tokenizer.Turns("S", "Hello"), true)
	if err != nil {
		t.Fatal(err)
	}
	if prompt != "[system] S<|im_end|>[user] Hello<|im_end|>[assistant] " {
		t.Fatalf("rendered %q", prompt)
	}
	if want := tok.Encode(prompt); !slices.Equal(res.PromptIDs, want) {
		t.Fatalf("prompt ids\n got %v\nwant %v", res.PromptIDs, want)
	}
}
