package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/receipt"
	"logitscope/internal/model/synth"
	"logitscope/internal/run/session"
	"logitscope/internal/text/tokenizer"
	"logitscope/internal/text/tokenizer/oracletest"
)

// roleTemplate tags each turn with its role, so that a prompt rendered
// with it cannot be mistaken for ChatML.
const roleTemplate = "{% for m in messages %}[{{ m.role }}] {{ m.content }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}"

// tokenize --chat applies the chat_template of the tokenizer_config.json
// beside the tokenizer, as transformers' apply_chat_template does: the ids
// equal Hugging Face's for each family's own template.
func TestTokenizeChatTemplate(t *testing.T) {
	for _, fam := range []string{"llama3_1", "gemma3", "deepseek_v3"} {
		t.Run(fam, func(t *testing.T) {
			dir := t.TempDir()
			tokPath := filepath.Join(dir, "tokenizer.json")
			oracletest.Run(t, nil, "write-tokenizer", tokPath, fam)
			oracletest.Run(t, nil, "write-config", filepath.Join(dir, "tokenizer_config.json"), fam)
			line, _ := json.Marshal(map[string]any{"add_generation_prompt": true, "now": "2026-07-26T12:00:00Z",
				"messages": []map[string]string{{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}}})
			var want struct{ IDs []int }
			if err := json.Unmarshal(oracletest.Run(t, append(line, '\n'), "chat", fam), &want); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			if err := tokenizeFrom(strings.NewReader(`"Hi there"`+"\n"), []string{"--tokenizer", tokPath, "--chat", "--system", "Be brief."}, &out, os.Stderr); err != nil {
				t.Fatal(err)
			}
			wantLine, _ := json.Marshal(map[string][]int{"ids": want.IDs})
			if got := strings.TrimSpace(out.String()); got != string(wantLine) {
				t.Fatalf("tokenize --chat\n got %s\nwant %s", got, wantLine)
			}
		})
	}
}

// capture renders the prompt with the checkpoint's chat_template and
// records the rendered text in the receipt.
func TestCaptureChatTemplate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if err := synth.Write(synth.Presets["tiny"], dir, synth.Options{ChatTemplate: roleTemplate}); err != nil {
		t.Fatal(err)
	}
	dumpPath := filepath.Join(t.TempDir(), "c.dump")
	out, err := run(t, captureCmd, "--model", dir, "--device", "cpu", "--runtime", "native", "--max-new", "2", "--system", "S", "--prompt-ids", "-", "--dump-logits", dumpPath, "Hello")
	if err != nil {
		t.Fatal(err)
	}
	const prompt = "[system] S<|im_end|>[user] Hello<|im_end|>[assistant] "
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	wantIDs, _ := json.Marshal(map[string][]int{"ids": tok.Encode(prompt)})
	if got := strings.SplitN(out, "\n", 2)[0]; got != string(wantIDs) {
		t.Fatalf("prompt ids\n got %s\nwant %s", got, wantIDs)
	}
	r, err := receipt.Read(receipt.Path(dumpPath))
	if err != nil {
		t.Fatal(err)
	}
	if r.Request.Prompt != prompt {
		t.Fatalf("receipt prompt = %q, want %q", r.Request.Prompt, prompt)
	}
}

// A text panel of a model whose tokenizer adds a BOS (Gemma 3's <bos>)
// starts each window with it, and the receipt says so; Qwen's adds none.
func TestCapturePanelBOS(t *testing.T) {
	src := t.TempDir()
	tokPath := filepath.Join(src, "tokenizer.json")
	oracletest.Run(t, nil, "write-tokenizer", tokPath, "gemma3")
	oracletest.Run(t, nil, "write-config", filepath.Join(src, "tokenizer_config.json"), "gemma3")
	panel := filepath.Join(src, "panel.txt")
	os.WriteFile(panel, []byte("One window, then another window, then a third one after that."), 0o644)
	for _, c := range []struct {
		name   string
		opt    synth.Options
		prefix []int
	}{
		{"gemma3 tokenizer", synth.Options{Tokenizer: tokPath}, []int{2}},
		{"qwen tokenizer", synth.Options{}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "m")
			if err := synth.Write(synth.Presets["tiny-gemma3"], dir, c.opt); err != nil {
				t.Fatal(err)
			}
			dumpPath := filepath.Join(t.TempDir(), "p.dump")
			if _, err := run(t, captureCmd, "--model", dir, "--device", "cpu", "--runtime", "native", "--panel", panel, "--window", "6", "--dump-logits", dumpPath); err != nil {
				t.Fatal(err)
			}
			r, err := receipt.Read(receipt.Path(dumpPath))
			if err != nil {
				t.Fatal(err)
			}
			tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
			if err != nil {
				t.Fatal(err)
			}
			text, _ := os.ReadFile(panel)
			ids := tok.Encode(string(text))
			windows := session.Windows(ids, 6, c.prefix)
			if !slices.Equal(r.Request.Prefix, c.prefix) || r.Request.Panel != receipt.PanelSHA256(windows) {
				t.Fatalf("receipt prefix %v, panel %s; want prefix %v and the windows %v", r.Request.Prefix, r.Request.Panel, c.prefix, windows)
			}
			// With a BOS every token of the text is a target; without, each
			// window's first is context only.
			if want := len(ids) - len(windows)*(1-len(c.prefix)); len(r.Targets) != want {
				t.Fatalf("%d targets, want %d", len(r.Targets), want)
			}
		})
	}
}

// mkmodel --tokenizer takes Qwen's real tokenizer files, whose
// tokenizer_config.json says bos_token null: the BOS is <|endoftext|>,
// as Qwen's config.json says.
func TestMkmodelQwenTokenizer(t *testing.T) {
	src := t.TempDir()
	tokPath := filepath.Join(src, "tokenizer.json")
	oracletest.Run(t, nil, "write-tokenizer", tokPath, "qwen3")
	oracletest.Run(t, nil, "write-config", filepath.Join(src, "tokenizer_config.json"), "qwen3")
	dir := filepath.Join(t.TempDir(), "m")
	if err := synth.Write(synth.Presets["tiny-qwen3"], dir, synth.Options{Tokenizer: tokPath}); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if b := ck.Generation.BOSTokenID; b == nil || *b != 151643 {
		t.Fatalf("generation_config.json's bos_token_id %v, want 151643 (<|endoftext|>)", b)
	}
}
