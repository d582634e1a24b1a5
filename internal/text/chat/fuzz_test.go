package chat

import (
	"strings"
	"testing"
	"time"
)

// FuzzRender renders arbitrary templates: a render ends, without a
// crash, with text inside the sandbox's bound or an error that names the
// template.
func FuzzRender(f *testing.F) {
	for _, s := range []string{
		ChatML,
		"{%- for m in messages if m.role == 'user' -%} {{ loop.index }}:{{ m.content }} {%- endfor %}",
		"{% set ns = namespace(s='ab') %}{% for i in range(8) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
		"{% macro f(x) %}[{{ x.content }}]{% endmacro %}{{ f(messages[0]) }}{% raw %}{{ raw }}{% endraw %}",
		"{{ 'a' * 3 }}{{ messages[0]['role'] | upper if messages else '' }}{# c #}",
		"{% if messages[0].tool_calls is defined %}{{ messages[0].tool_calls[0].function.name }}{% elif true %}{{ bos_token }}{% endif %}",
		"{{ {'a': 1}.a }}{{ [1, 2][1:] }}{{ (1, 2) }}{{ 'x'.join(['a', 'b']) }}",
	} {
		f.Add(s)
	}
	cfg := TemplateConfig{Tokens: map[string]string{"bos_token": "<s>"}, Source: "fuzz/tokenizer_config.json"}
	msgs := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "hi"}}
	f.Fuzz(func(t *testing.T, src string) {
		cfg.Template = src
		out, err := RenderAt(cfg, msgs, true, time.Time{})
		if err != nil && !strings.HasPrefix(err.Error(), "fuzz/tokenizer_config.json: ") {
			t.Fatalf("an error that does not name the template: %v", err)
		}
		if len(out) > maxOutput {
			t.Fatalf("%d bytes rendered: more than the sandbox's %d", len(out), maxOutput)
		}
	})
}
