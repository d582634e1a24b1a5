package chat

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ardanlabs/jinja"
)

func TestParseConfig(t *testing.T) {
	for _, c := range []struct {
		name, json string
		template   string
		tokens     map[string]string
		err        string
	}{
		{"string", `{"chat_template": "T", "bos_token": "<s>", "eos_token": "</s>", "add_bos_token": true}`, "T", map[string]string{"bos_token": "<s>", "eos_token": "</s>"}, ""},
		{"named list", `{"chat_template": [{"name": "tool_use", "template": "X"}, {"name": "default", "template": "D"}]}`, "D", map[string]string{}, ""},
		{"no default", `{"chat_template": [{"name": "tool_use", "template": "X"}]}`, "", nil, `no template named "default" among "tool_use"`},
		{"AddedToken", `{"bos_token": {"__type": "AddedToken", "content": "<|b|>", "lstrip": false}, "pad_token": null}`, "", map[string]string{"bos_token": "<|b|>"}, ""},
		{"null template", `{"chat_template": null}`, "", map[string]string{}, ""},
		{"bad template", `{"chat_template": 3}`, "", nil, "chat_template: neither a string nor a list"},
		{"bad add_bos_token", `{"add_bos_token": "yes"}`, "", nil, `add_bos_token: "yes" is not a boolean`},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(c.json))
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.name == "string" && (cfg.AddBOS == nil || !*cfg.AddBOS) {
				t.Errorf("AddBOS = %v, want true", cfg.AddBOS)
			}
			if cfg.Template != c.template {
				t.Errorf("Template = %q, want %q", cfg.Template, c.template)
			}
			if len(cfg.Tokens) != len(c.tokens) {
				t.Errorf("Tokens = %v, want %v", cfg.Tokens, c.tokens)
			}
			for k, v := range c.tokens {
				if cfg.Tokens[k] != v {
					t.Errorf("Tokens[%s] = %q, want %q", k, cfg.Tokens[k], v)
				}
			}
		})
	}
}

func TestRender(t *testing.T) {
	msgs := []Message{{Role: "system", Content: "S"}, {Role: "user", Content: "U"}}
	at := time.Date(2026, time.March, 5, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		template string
		want     string
		err      string
	}{
		{"ChatML without a template", "", "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n", ""},
		{"tokens", "{{ bos_token }}{{ messages[1].content }}{{ eos_token }}", "<s>U</s>", ""},
		{"strftime_now", `{{ strftime_now("%d %b %Y") }}|{{ strftime_now("%-d %B, %A") }}`, "05 Mar 2026|5 March, Thursday", ""},
		{"raise_exception", `{{ raise_exception("roles must alternate") }}`, "", "chat_template: raise_exception: roles must alternate"},
		{"syntax", "{% for %}", "", "chat_template: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := TemplateConfig{Template: c.template, Tokens: map[string]string{"bos_token": "<s>", "eos_token": "</s>"}}
			got, err := RenderAt(cfg, msgs, true, at)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err = %v, want %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// A template runs sandboxed where it can be: what the renderer panics on
// is an error naming the template, and range() is bounded as in
// transformers' sandbox, with Python's semantics otherwise.
func TestRenderSandbox(t *testing.T) {
	render := func(src string) (string, error) {
		return Render(TemplateConfig{Template: src}, []Message{{Role: "user", Content: "hi"}}, false)
	}
	for _, c := range []struct{ src, want string }{
		{"{{ 'a' * -1 }}", "chat_template: "},
		{"{% for i in range(100000000) %}x{% endfor %}", "range of 100000000 items: more than the sandbox's 100000"},
		{"{% for i in range(0, 1000000000, 2) %}x{% endfor %}", "range of 500000000 items"},
		{"{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", "macro f calls itself (f → f)"},
		{"{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}", "calls itself"},
		{"{% set a = [] %}{% set _ = a.append(a) %}{{ a }}", "a.append(a) puts a list inside itself"},
		// Output, iterations and repetition are bounded before they grow.
		{"{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}", "a value of 33554432 bytes: more than the sandbox's 16777216"},
		{"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "the loops run more than the sandbox's 1000000 iterations"},
		{"{% for i in range(100000) %}" + strings.Repeat("x", 200) + "{% endfor %}", "the output exceeds the sandbox's 16777216 bytes"},
		{"{% for i in range(100000) %}{{ 'x' * 200 }}{% endfor %}", "the output exceeds"},
		{"{{ 'a' * 1000000000000 }}", "a text repeated 1000000000000 times"},
		{"{% set n = 1000000 %}{{ 'a' * (n * n) }}", "a text repeated 1000000000000 times"},
		// Reading from an undefined value raises, as Jinja2 does.
		{"{{ foo.bar }}", "foo is undefined, and the template reads from it"},
		{"{{ messages[0].tool_calls.function }}", "messages[0].tool_calls is undefined"},
		{"{% if messages[0]['x']['y'] %}{% endif %}", "messages[0]['x'] is undefined"},
		{"{% for m in messages[0].calls.list %}{% endfor %}", "messages[0].calls is undefined"},
	} {
		if out, err := render(c.src); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q, %v; want an error saying %q", c.src, out, err, c.want)
		}
	}
	// 40 macros, each calling every later one: no cycle, and the check
	// visits each macro once (a search of every path took 2⁴⁰ steps).
	var chain strings.Builder
	for i := range 40 {
		fmt.Fprintf(&chain, "{%% macro m%d() %%}", i)
		for j := i + 1; j < 40; j++ {
			fmt.Fprintf(&chain, "{%% if false %%}{{ m%d() }}{%% endif %%}", j)
		}
		chain.WriteString("{% endmacro %}")
	}
	if err := noRecursion(chain.String()); err != nil {
		t.Errorf("an acyclic chain of macros: %v", err)
	}
	for _, c := range []struct{ src, want string }{
		{"{% for i in range(3) %}{{ i }}{% endfor %}", "012"},
		{"{% for i in range(5, 0, -2) %}{{ i }}{% endfor %}", "531"},
		{"{% for i in range(2, 2) %}{{ i }}{% endfor %}-", "-"},
		{"{{ foo }}{{ messages[0].missing }}{% if messages[0].x is defined %}x{% endif %}-", "-"},
		{"{{ messages[0].role }}{{ messages[0]['content'] | upper }}{{ '=' * 3 }}{{ 2 * 3 }}", "userHI===6"},
		{"{%- for m in messages if m.role == 'user' -%} {{ loop.index }}:{{ m.content }} {%- endfor %}", "1:hi"},
		{"{% raw %}{{ x.y }}{% endraw %}", "{{ x.y }}"},
		{"{# {{ x.y }} #}{{ 'a}}b' }}{{ \"%}\" }}", "a}}b%}"},
		{"{% macro b(x) %}[{{ x }}]{% endmacro %}{% macro a(x) %}{{ b(x) }}{{ b(x) }}{% endmacro %}{{ a(1) }}", "[1][1]"},
		{"{% set ns = namespace(l=[]) %}{% set _ = ns.l.append(1) %}{{ ns.l }}", "[1]"},
	} {
		if out, err := render(c.src); err != nil || out != c.want {
			t.Errorf("%s: %q, %v; want %q", c.src, out, err, c.want)
		}
	}
}

// A failing template's error names its file, and a render past its time
// stops at the next callable the sandbox put in.
func TestRenderNamesTemplateAndStopsInTime(t *testing.T) {
	cfg := TemplateConfig{Template: "{{ messages[0].a.b }}", Source: "m/tokenizer_config.json"}
	_, err := Render(cfg, []Message{{Role: "user", Content: "hi"}}, true)
	if err == nil || !strings.HasPrefix(err.Error(), "m/tokenizer_config.json: chat_template: ") {
		t.Errorf("got %v, want an error naming m/tokenizer_config.json", err)
	}
	cfg.Template = "{{ '' }}"
	if _, err := Render(cfg, []Message{{Role: "user", Content: "hi"}}, true); err == nil || !strings.Contains(err.Error(), "rendered no text for a conversation of 1 message(s)") {
		t.Errorf("an empty prompt: %v", err)
	}
	b := &budget{deadline: time.Now().Add(-time.Second)}
	if _, err := b.callables()["__out"].AsCallable().Fn([]jinja.Value{jinja.NewString("x")}, nil); err == nil || !strings.Contains(err.Error(), "rendering took more than the sandbox's 10s") {
		t.Errorf("past the deadline: %v", err)
	}
}
