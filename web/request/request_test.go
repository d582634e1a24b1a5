package request

import (
	"path/filepath"
	"slices"
	"testing"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/model/synth"
	"logitscope/internal/text/chat"
	"logitscope/internal/text/tokenizer"
)

// The page's reference request prompts with the model's chat template:
// ChatML for a model without one, its own template otherwise.
func TestRefChatTemplate(t *testing.T) {
	dir := t.TempDir()
	if err := synth.Write(synth.Presets["tiny"], dir, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	sys := "Be brief."
	spec := snapshot.NewSpec()
	spec.Prompt, spec.System = "Hello", sys
	for _, c := range []struct {
		name   string
		tmpl   chat.TemplateConfig
		prompt string
	}{
		{"ChatML without a template", chat.TemplateConfig{}, tokenizer.ChatML(tokenizer.Turns(sys, "Hello"), true)},
		{"the model's template", chat.TemplateConfig{Template: "{% for m in messages %}{{ m.role }}: {{ m.content }}{{ eos_token }}{% endfor %}",
			Tokens: map[string]string{"eos_token": "<|im_end|>"}}, "system: Be brief.<|im_end|>user: Hello<|im_end|>"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, err := Ref(spec, tok, c.tmpl)
			if err != nil {
				t.Fatal(err)
			}
			if want := tok.Encode(c.prompt); !slices.Equal(req.PromptIDs, want) {
				t.Fatalf("prompt ids\n got %v\nwant %v", req.PromptIDs, want)
			}
		})
	}
	if _, err := Ref(spec, tok, chat.TemplateConfig{Template: "{% for %}"}); err == nil {
		t.Fatal("a broken template rendered")
	}
}
