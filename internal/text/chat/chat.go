// Package chat renders a conversation into a prompt with the checkpoint's
// own Jinja chat template, as transformers' apply_chat_template does, so
// that every family is prompted the way it was trained rather than with
// ChatML.
package chat

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"

	"logitscope/internal/text/tokenizer"
)

// Message is one chat turn.
type Message = tokenizer.Message

// ChatML is the template used when a checkpoint ships none: transformers'
// former default_chat_template, which renders as tokenizer.ChatML does.
const ChatML = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"

// TemplateConfig is what rendering needs from tokenizer_config.json.
type TemplateConfig struct {
	// Template is the Jinja source; empty means ChatML.
	Template string
	// Tokens are the special tokens by name (bos_token, eos_token,
	// unk_token, pad_token...), which transformers hands the template.
	Tokens map[string]string
	// AddBOS is add_bos_token; nil when the config does not say.
	AddBOS *bool
	// Source names the file the template came from in errors.
	Source string
}

// ParseConfig reads chat_template and the *_token fields of a
// tokenizer_config.json. chat_template may be a string or a list of
// {name, template}, of which "default" is taken; tokens may be strings or
// {content: ...} objects (AddedToken).
func ParseConfig(data []byte) (TemplateConfig, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return TemplateConfig{}, err
	}
	cfg := TemplateConfig{Tokens: map[string]string{}}
	if t, ok := raw["chat_template"]; ok && string(t) != "null" {
		var err error
		if cfg.Template, err = template(t); err != nil {
			return TemplateConfig{}, err
		}
	}
	if v, ok := raw["add_bos_token"]; ok && string(v) != "null" {
		var b bool
		if err := json.Unmarshal(v, &b); err != nil {
			return TemplateConfig{}, fmt.Errorf("add_bos_token: %s is not a boolean", v)
		}
		cfg.AddBOS = &b
	}
	for k, v := range raw {
		if !strings.HasSuffix(k, "_token") || string(v) == "null" {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			cfg.Tokens[k] = s
			continue
		}
		var obj struct{ Content *string }
		if json.Unmarshal(v, &obj) == nil && obj.Content != nil {
			cfg.Tokens[k] = *obj.Content
		}
		// Anything else (add_bos_token's bool) is no token.
	}
	return cfg, nil
}

func template(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var named []struct{ Name, Template string }
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("chat_template: neither a string nor a list of {name, template}: %v", err)
	}
	var names []string
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
		names = append(names, fmt.Sprintf("%q", n.Name))
	}
	return "", fmt.Errorf("chat_template: no template named \"default\" among %s", strings.Join(names, ", "))
}

// LoadConfig reads a tokenizer_config.json. A missing file is ChatML, as
// a checkpoint without a template is.
func LoadConfig(path string) (TemplateConfig, error) {
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return TemplateConfig{}, nil
	}
	if err != nil {
		return TemplateConfig{}, err
	}
	cfg, err := ParseConfig(data)
	if err != nil {
		return TemplateConfig{}, fmt.Errorf("%s: %w", path, err)
	}
	cfg.Source = path
	return cfg, nil
}

// ConfigBeside loads the tokenizer_config.json in tokenizer.json's
// directory, where checkpoints keep both.
func ConfigBeside(tokenizerPath string) (TemplateConfig, error) {
	return LoadConfig(filepath.Join(filepath.Dir(tokenizerPath), "tokenizer_config.json"))
}

// RawPrefix is what transformers puts before a text encoded with
// add_special_tokens=True: the BOS that raw text (a panel) needs to look
// like what the model was trained on, or nothing. add_bos_token decides
// when the config sets it, as LlamaTokenizerFast and GemmaTokenizerFast
// rebuild their post-processor from it (DeepSeek-V3's tokenizer.json adds
// no BOS, its config asks for one); else the post-processor's (Llama 3's
// TemplateProcessing; Qwen's adds none).
func RawPrefix(tok *tokenizer.Tokenizer, cfg TemplateConfig) []int {
	id, ok := tok.BOS()
	if cfg.AddBOS != nil {
		id, ok = tok.TokenID(cfg.Tokens["bos_token"])
		ok = ok && *cfg.AddBOS
	}
	if !ok {
		return nil
	}
	return []int{id}
}

// Render renders msgs with the template, dating strftime_now today.
func Render(cfg TemplateConfig, msgs []Message, addGenerationPrompt bool) (string, error) {
	return RenderAt(cfg, msgs, addGenerationPrompt, time.Now())
}

// RenderAt is Render with strftime_now answering now, so that templates
// that print today's date (Llama 3.1's "Today Date") render the same in
// tests every day.
func RenderAt(cfg TemplateConfig, msgs []Message, addGenerationPrompt bool, now time.Time) (out string, err error) {
	// A template is a file from the model's author: a construct the
	// renderer panics on ({{ 'a' * -1 }}) is its error, not a crash.
	defer func() {
		if p := recover(); p != nil {
			out, err = "", fmt.Errorf("chat_template: rendering failed: %v", p)
		}
		if err != nil && cfg.Source != "" {
			err = fmt.Errorf("%s: %w", cfg.Source, err)
		}
	}()
	src := cfg.Template
	if src == "" {
		src = ChatML
	}
	if err := noRecursion(src); err != nil {
		return "", fmt.Errorf("chat_template: %w", err)
	}
	if _, err := jinja.Compile(src); err != nil {
		return "", fmt.Errorf("chat_template: %w", err)
	}
	// The renderer accepts some malformed tags ({{ 0 is }}) that its own
	// parse of the instrumented source refuses.
	tmpl, err := jinja.Compile(instrument(src))
	if err != nil {
		return "", fmt.Errorf("chat_template: the sandbox cannot run this template: %w", err)
	}
	list := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		d := jinja.NewDict()
		d.AsDict().Set("role", jinja.NewString(m.Role))
		d.AsDict().Set("content", jinja.NewString(m.Content))
		list[i] = d
	}
	data := map[string]jinja.Value{
		"messages":              jinja.NewList(list),
		"add_generation_prompt": jinja.NewBool(addGenerationPrompt),
		"raise_exception": jinja.NewCallable("raise_exception", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			msg := "(no message)"
			if len(args) > 0 && args[0].IsString() {
				msg = args[0].AsString()
			}
			return jinja.Undefined(), fmt.Errorf("raise_exception: %s", msg)
		}),
		"range": jinja.NewCallable("range", boundedRange),
		"strftime_now": jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			if len(args) != 1 || !args[0].IsString() {
				return jinja.Undefined(), fmt.Errorf("strftime_now wants one format string, got %d arguments", len(args))
			}
			return jinja.NewString(Strftime(args[0].AsString(), now)), nil
		}),
	}
	for k, v := range cfg.Tokens {
		data[k] = jinja.NewString(v)
	}
	b := &budget{deadline: time.Now().Add(maxRenderTime)}
	maps.Copy(data, b.callables())
	if out, err = tmpl.RenderValues(data); err != nil {
		return "", fmt.Errorf("chat_template: %w", err)
	}
	if out == "" && len(msgs) > 0 {
		return "", fmt.Errorf("chat_template: rendered no text for a conversation of %d message(s)", len(msgs))
	}
	return out, nil
}

// maxRange is transformers' sandbox's bound on range(): a template's
// range(100000000) grew past 6 GB.
const maxRange = 100_000

// boundedRange is Jinja's range(stop), range(start, stop[, step]) over
// integers, refusing more than maxRange items.
func boundedRange(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	n := make([]int64, len(args))
	for i, a := range args {
		if !a.IsInt() {
			return jinja.Undefined(), fmt.Errorf("range: argument %d is not an integer", i+1)
		}
		n[i] = a.AsInt()
	}
	start, stop, step := int64(0), int64(0), int64(1)
	switch len(n) {
	case 1:
		stop = n[0]
	case 2:
		start, stop = n[0], n[1]
	case 3:
		start, stop, step = n[0], n[1], n[2]
	default:
		return jinja.Undefined(), fmt.Errorf("range: 1 to 3 arguments, got %d", len(n))
	}
	if step == 0 {
		return jinja.Undefined(), fmt.Errorf("range: step is zero")
	}
	// The item count, in float64 so that no difference overflows.
	count := math.Ceil((float64(stop) - float64(start)) / float64(step))
	if count > maxRange {
		return jinja.Undefined(), fmt.Errorf("range of %.0f items: more than the sandbox's %d", count, maxRange)
	}
	items := make([]jinja.Value, 0, max(0, int(count)))
	for i := start; (step > 0 && i < stop) || (step < 0 && i > stop); i += step {
		items = append(items, jinja.NewInt(i))
	}
	return jinja.NewList(items), nil
}

// Strftime formats t as Python's strftime does for the directives chat
// templates use; others pass through unchanged.
func Strftime(format string, t time.Time) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' || i+1 == len(format) {
			b.WriteByte(c)
			continue
		}
		i++
		pad := true
		if format[i] == '-' && i+1 < len(format) { // glibc's %-d: no padding
			pad = false
			i++
		}
		num := func(n, width int) {
			if pad {
				fmt.Fprintf(&b, "%0*d", width, n)
			} else {
				fmt.Fprintf(&b, "%d", n)
			}
		}
		switch format[i] {
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'y':
			num(t.Year()%100, 2)
		case 'm':
			num(int(t.Month()), 2)
		case 'd':
			num(t.Day(), 2)
		case 'H':
			num(t.Hour(), 2)
		case 'M':
			num(t.Minute(), 2)
		case 'S':
			num(t.Second(), 2)
		case 'j':
			num(t.YearDay(), 3)
		case 'B':
			b.WriteString(t.Month().String())
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			if !pad {
				b.WriteByte('-')
			}
			b.WriteByte(format[i])
		}
	}
	return b.String()
}

var (
	macroDef = regexp.MustCompile(`\{%-?\s*macro\s+([A-Za-z_][A-Za-z0-9_]*)\s*\(`)
	macroEnd = regexp.MustCompile(`\{%-?\s*endmacro\b`)
)

// noRecursion refuses a template whose macros call themselves, directly
// or through each other: the renderer has no depth bound, and Go's stack
// overflow is fatal, not an error. Chat templates do not recurse.
func noRecursion(src string) error {
	defs := macroDef.FindAllStringSubmatchIndex(src, -1)
	body := map[string]string{}
	for _, d := range defs {
		rest := src[d[1]:]
		end := len(rest)
		if e := macroEnd.FindStringIndex(rest); e != nil {
			end = e[0]
		}
		body[src[d[2]:d[3]]] = rest[:end]
	}
	// The call graph, each edge found once: macro → the macros its body
	// calls.
	names := slices.Sorted(maps.Keys(body))
	callees := map[string][]string{}
	for _, callee := range names {
		call := regexp.MustCompile(`\b` + regexp.QuoteMeta(callee) + `\s*\(`)
		for _, m := range names {
			if call.MatchString(body[m]) {
				callees[m] = append(callees[m], callee)
			}
		}
	}
	// Depth-first, each macro finished once (a template of many macros
	// calling each other without a cycle stays linear): a macro met again
	// on the path is a cycle.
	done := map[string]bool{}
	var path []string
	var visit func(string) error
	visit = func(m string) error {
		if i := slices.Index(path, m); i >= 0 {
			return fmt.Errorf("macro %s calls itself (%s): recursion is not rendered", m, strings.Join(append(path[i:], m), " → "))
		}
		if done[m] {
			return nil
		}
		path = append(path, m)
		for _, c := range callees[m] {
			if err := visit(c); err != nil {
				return err
			}
		}
		path = path[:len(path)-1]
		done[m] = true
		return nil
	}
	for _, m := range names {
		if err := visit(m); err != nil {
			return err
		}
	}
	// A list put inside itself prints forever in the same way.
	for _, m := range selfAdd.FindAllStringSubmatch(src, -1) {
		if regexp.MustCompile(`\b` + regexp.QuoteMeta(m[1]) + `\b`).MatchString(m[3]) {
			return fmt.Errorf("%s.%s(%s) puts a list inside itself, which is not rendered", m[1], m[2], m[3])
		}
	}
	return nil
}

var selfAdd = regexp.MustCompile(`\b([A-Za-z_][A-Za-z0-9_]*)\.(append|extend|insert)\(([^)]*)\)`)
