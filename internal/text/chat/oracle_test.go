package chat

import (
	"bufio"
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"logitscope/internal/text/tokenizer"
	"logitscope/internal/text/tokenizer/oracletest"
)

// The oracle (package oracletest) is Hugging Face's @huggingface/jinja and
// tokenizers.js on the real tokenizer_config.json and tokenizer.json of
// five families.
var families = []string{"qwen3", "llama3_1", "gemma3", "llama2", "deepseek_v3"}

// The conversations transformers' apply_chat_template is asked most: a
// system prompt and a question, a bare question, and a multi-turn chat.
var conversations = []struct {
	name   string
	msgs   []Message
	addGen bool
}{
	{"system+user", []Message{{Role: "system", Content: "You are a terse assistant."}, {Role: "user", Content: "What is 2+2?"}}, true},
	{"user", []Message{{Role: "user", Content: "Write a haiku about rain.\nMake it sad."}}, true},
	{"multi-turn", []Message{
		{Role: "system", Content: "You are a helpful assistant."},
		{Role: "user", Content: "Name a prime."},
		{Role: "assistant", Content: "Seven."},
		{Role: "user", Content: "Another one, in 日本語? 🙂"},
	}, true},
	{"multi-turn, no generation prompt", []Message{
		{Role: "user", Content: "Hi"},
		{Role: "assistant", Content: "Hello!"},
	}, false},
	// Conversations a template may refuse with raise_exception (Gemma 3's
	// alternation rule does): both sides must raise, or render the same.
	{"two user turns in a row", []Message{{Role: "user", Content: "Hi"}, {Role: "user", Content: "Again"}}, true},
	{"system only", []Message{{Role: "system", Content: "Be brief."}}, true},
}

// now is the date strftime_now answers on both sides.
var now = time.Date(2026, time.July, 26, 12, 0, 0, 0, time.UTC)

// TestOracle renders every conversation with every family's own template
// here and with @huggingface/jinja, and requires the same text and, through
// the tokenizer package, the same ids as tokenizers.js (no special tokens
// added: the rendered text carries its BOS, as transformers encodes it).
func TestOracle(t *testing.T) {
	oracletest.Node(t)
	raised := map[string]string{}
	for _, fam := range families {
		t.Run(fam, func(t *testing.T) {
			dir := t.TempDir()
			tokPath := filepath.Join(dir, "tokenizer.json")
			oracletest.Run(t, nil, "write-tokenizer", tokPath, fam)
			tok, err := tokenizer.Load(tokPath)
			if err != nil {
				t.Fatal(err)
			}
			cfgPath := filepath.Join(dir, "tokenizer_config.json")
			oracletest.Run(t, nil, "write-config", cfgPath, fam)
			cfg, err := LoadConfig(cfgPath)
			if err != nil {
				t.Fatal(err)
			}

			var in bytes.Buffer
			for _, c := range conversations {
				var msgs []map[string]string // transformers' {"role", "content"}
				for _, m := range c.msgs {
					msgs = append(msgs, map[string]string{"role": m.Role, "content": m.Content})
				}
				line, err := json.Marshal(map[string]any{"messages": msgs, "add_generation_prompt": c.addGen, "now": now.Format(time.RFC3339)})
				if err != nil {
					t.Fatal(err)
				}
				in.Write(append(line, '\n'))
			}
			sc := bufio.NewScanner(bytes.NewReader(oracletest.Run(t, in.Bytes(), "chat", fam)))
			sc.Buffer(nil, 1<<24)
			for _, c := range conversations {
				if !sc.Scan() {
					t.Fatalf("oracle gave no line for %s", c.name)
				}
				var want struct {
					Text, Error string
					IDs         []int
				}
				if err := json.Unmarshal(sc.Bytes(), &want); err != nil {
					t.Fatal(err)
				}
				got, err := RenderAt(cfg, c.msgs, c.addGen, now)
				if (err != nil) != (want.Error != "") {
					t.Errorf("%s: got error %v, Hugging Face's %q", c.name, err, want.Error)
					continue
				}
				if err != nil {
					raised[fam+": "+c.name] = err.Error()
					continue
				}
				if got != want.Text {
					t.Errorf("%s: rendered\n got %q\nwant %q", c.name, got, want.Text)
					continue
				}
				if ids := tok.Encode(got); !slices.Equal(ids, want.IDs) {
					t.Errorf("%s: ids\n got %v\nwant %v", c.name, ids, want.IDs)
				}
			}
		})
	}
	// The refusal is the template's own message, so that a user sees why.
	if k := "gemma3: two user turns in a row"; !strings.Contains(raised[k], "Conversation roles must alternate") {
		t.Errorf("%s: want the template's raise_exception, got %q", k, raised[k])
	}
}

// dated is the date header of Meta's full Llama 3.1 and 3.2 templates
// (the oracle's Llama 3.1 package ships a shorter one): strftime_now
// probed with "is defined", then called.
const dated = `{{- bos_token }}
{%- if not date_string is defined %}
    {%- if strftime_now is defined %}
        {%- set date_string = strftime_now("%d %b %Y") %}
    {%- else %}
        {%- set date_string = "26 Jul 2024" %}
    {%- endif %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
`

// TestOracleDate renders a template that prints today's date, with the
// date injected on both sides.
func TestOracleDate(t *testing.T) {
	oracletest.Node(t)
	msgs := []Message{{Role: "user", Content: "  What day is it?  "}}
	line, err := json.Marshal(map[string]any{"template": dated, "add_generation_prompt": true, "now": now.Format(time.RFC3339),
		"messages": []map[string]string{{"role": msgs[0].Role, "content": msgs[0].Content}}})
	if err != nil {
		t.Fatal(err)
	}
	var want struct{ Text string }
	if err := json.Unmarshal(oracletest.Run(t, append(line, '\n'), "chat", "llama3_1"), &want); err != nil {
		t.Fatal(err)
	}
	got, err := RenderAt(TemplateConfig{Template: dated, Tokens: map[string]string{"bos_token": "<|begin_of_text|>"}}, msgs, true, now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(got, "Today Date: 26 Jul 2026\n") {
		t.Errorf("no injected date in %q", got)
	}
	if got != want.Text {
		t.Fatalf("rendered\n got %q\nwant %q", got, want.Text)
	}
}

// TestRawPrefix checks the BOS each family's raw text starts with: the
// post-processor's where tokenizers.js adds one (compared with its
// add_special_tokens=True ids), and DeepSeek-V3's from add_bos_token, which
// only transformers' LlamaTokenizerFast applies (its BOS is id 0).
func TestRawPrefix(t *testing.T) {
	oracletest.Node(t)
	for _, c := range []struct {
		fam  string
		want []int
		// byConfig: transformers adds the BOS from add_bos_token, not the
		// tokenizer.json that tokenizers.js runs.
		byConfig bool
	}{
		{"qwen3", nil, false},
		{"llama3_1", []int{128000}, false}, // <|begin_of_text|>
		{"gemma3", []int{2}, false},        // <bos>
		{"llama2", []int{1}, false},        // <s>
		{"deepseek_v3", []int{0}, true},    // <｜begin▁of▁sentence｜>
	} {
		t.Run(c.fam, func(t *testing.T) {
			dir := t.TempDir()
			tokPath, cfgPath := filepath.Join(dir, "tokenizer.json"), filepath.Join(dir, "tokenizer_config.json")
			oracletest.Run(t, nil, "write-tokenizer", tokPath, c.fam)
			oracletest.Run(t, nil, "write-config", cfgPath, c.fam)
			tok, err := tokenizer.Load(tokPath)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := LoadConfig(cfgPath)
			if err != nil {
				t.Fatal(err)
			}
			got := RawPrefix(tok, cfg)
			if !slices.Equal(got, c.want) {
				t.Fatalf("prefix %v, want %v", got, c.want)
			}
			var hf struct{ IDs, Special []int }
			if err := json.Unmarshal(oracletest.Run(t, []byte(`"Hello world"`+"\n"), "conform", c.fam), &hf); err != nil {
				t.Fatal(err)
			}
			if ids := tok.Encode("Hello world"); !slices.Equal(ids, hf.IDs) {
				t.Fatalf("ids %v, Hugging Face's %v", ids, hf.IDs)
			}
			// tokenizers.js adds the post-processor's BOS, and none where
			// only transformers reads add_bos_token.
			want := append(slices.Clone(c.want), hf.IDs...)
			if c.byConfig {
				want = hf.IDs
			}
			if !slices.Equal(hf.Special, want) {
				t.Fatalf("add_special_tokens=True: tokenizers.js %v, want %v", hf.Special, want)
			}
		})
	}
}
