package checkpoint

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// qwen is a trimmed Qwen2-0.5B config.json.
const qwen = `{
  "architectures": ["Qwen2ForCausalLM"],
  "model_type": "qwen2",
  "hidden_size": 896,
  "intermediate_size": 4864,
  "num_hidden_layers": 24,
  "num_attention_heads": 14,
  "num_key_value_heads": 2,
  "vocab_size": 151936,
  "max_position_embeddings": 32768,
  "rms_norm_eps": 1e-06,
  "rope_theta": 1000000.0,
  "tie_word_embeddings": true,
  "hidden_act": "silu",
  "rope_scaling": null,
  "torch_dtype": "bfloat16"
}`

// edit returns qwen with fields replaced (or deleted when the value is nil).
func edit(t *testing.T, changes map[string]any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(qwen), &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range changes {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(qwen), "config.json")
	if err != nil {
		t.Fatal(err)
	}
	if c.Arch() != "Qwen2ForCausalLM" || c.HeadDim != 64 || c.NumKeyValueHeads != 2 ||
		c.RopeTheta != 1e6 || c.RMSNormEps != 1e-6 || !c.TieWordEmbeddings ||
		c.AttentionBias != nil || c.RopeScaling != nil || c.TorchDtype != "bfloat16" {
		t.Errorf("parsed %+v", c)
	}
}

func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig(edit(t, map[string]any{
		"num_key_value_heads": nil, "rms_norm_eps": nil, "rope_theta": nil,
		"max_position_embeddings": nil, "torch_dtype": nil, "dtype": "float32",
		"attention_bias": false, "rope_scaling": map[string]any{"rope_type": "llama3", "factor": 32.0},
	}), "config.json")
	if err != nil {
		t.Fatal(err)
	}
	if c.NumKeyValueHeads != 14 || c.RMSNormEps != 1e-6 || c.RopeTheta != 10000 || c.MaxPositionEmbeddings != 32768 {
		t.Errorf("defaults not applied: %+v", c)
	}
	if c.AttentionBias == nil || *c.AttentionBias || c.TorchDtype != "float32" {
		t.Errorf("attention_bias/dtype: %+v", c)
	}
	if !strings.Contains(string(c.RopeScaling), `"llama3"`) {
		t.Errorf("rope_scaling = %s", c.RopeScaling)
	}

	// transformers v5 moves rope_theta under rope_parameters.
	c, err = ParseConfig(edit(t, map[string]any{"rope_theta": nil, "rope_parameters": map[string]any{"rope_theta": 5e5}}), "config.json")
	if err != nil || c.RopeTheta != 5e5 || c.RopeScaling != nil {
		t.Errorf("rope_parameters: %v, %s, %v", c.RopeTheta, c.RopeScaling, err)
	}
	// ... and rope_scaling with it: a scaling written there is not lost.
	c, err = ParseConfig(edit(t, map[string]any{"rope_theta": nil, "rope_parameters": map[string]any{
		"rope_theta": 5e5, "rope_type": "llama3", "factor": 32.0}}), "config.json")
	if err != nil || c.RopeTheta != 5e5 || !strings.Contains(string(c.RopeScaling), `"llama3"`) {
		t.Errorf("rope_parameters with llama3: %v, %s, %v", c.RopeTheta, c.RopeScaling, err)
	}
	// An explicit head_dim wins over hidden_size / heads (Llama 3.2 style).
	c, err = ParseConfig(edit(t, map[string]any{"hidden_size": 900, "head_dim": 128}), "config.json")
	if err != nil || c.HeadDim != 128 {
		t.Errorf("explicit head_dim: %v, %v", c.HeadDim, err)
	}
}

// Qwen3Config's head_dim defaults to 128 and Gemma3TextConfig's to 256
// whatever hidden_size / heads is; Qwen2's stays hidden_size / heads.
func TestParseConfigQwen3HeadDim(t *testing.T) {
	for _, c := range []struct {
		arch string
		want int
	}{{"Qwen3ForCausalLM", 128}, {"Gemma3ForCausalLM", 256}, {"Qwen2ForCausalLM", 64}} {
		got, err := ParseConfig(edit(t, map[string]any{"architectures": []string{c.arch}}), "config.json")
		if err != nil || got.HeadDim != c.want {
			t.Errorf("%s without head_dim: %d, %v; want %d", c.arch, got.HeadDim, err, c.want)
		}
	}
}

// tie_word_embeddings defaults to true for Gemma 3 only, and an explicit
// value always wins.
func TestParseConfigTiedDefault(t *testing.T) {
	for _, c := range []struct {
		arch string
		tie  any // nil: absent
		want bool
	}{
		{"Gemma3ForCausalLM", nil, true},
		{"Gemma3ForCausalLM", false, false},
		{"Qwen2ForCausalLM", nil, false},
		{"LlamaForCausalLM", true, true},
	} {
		got, err := ParseConfig(edit(t, map[string]any{"architectures": []string{c.arch}, "tie_word_embeddings": c.tie}), "config.json")
		if err != nil || got.TieWordEmbeddings != c.want {
			t.Errorf("%s, tie_word_embeddings %v: tied %v, %v; want %v", c.arch, c.tie, got.TieWordEmbeddings, err, c.want)
		}
	}
}

// Absent rope_theta and max_position_embeddings take the config class's
// defaults: Gemma3TextConfig's differ from Qwen2's and Llama's.
func TestParseConfigGemma3Defaults(t *testing.T) {
	for _, c := range []struct {
		arch   string
		theta  float64
		maxPos int
	}{
		{"Gemma3ForCausalLM", 1e6, 131072},
		{"Qwen2ForCausalLM", DefaultRopeTheta, DefaultMaxPositionEmbeddings},
	} {
		got, err := ParseConfig(edit(t, map[string]any{"architectures": []string{c.arch}, "rope_theta": nil, "max_position_embeddings": nil}), "config.json")
		if err != nil || got.RopeTheta != c.theta || got.MaxPositionEmbeddings != c.maxPos {
			t.Errorf("%s: rope_theta %g, max_position_embeddings %d, %v; want %g, %d", c.arch, got.RopeTheta, got.MaxPositionEmbeddings, err, c.theta, c.maxPos)
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		changes map[string]any
		raw     string
		want    string
	}{
		{name: "malformed", raw: `{"hidden_size": `, want: "malformed JSON"},
		{name: "not an object", raw: `[1]`, want: "got a JSON array"},
		{name: "wrong type", changes: map[string]any{"hidden_size": "896"}, want: "hidden_size: got a JSON string, want int"},
		{name: "fractional int", changes: map[string]any{"vocab_size": 1.5}, want: "vocab_size: got a JSON number 1.5, want int"},
		{name: "no architectures", changes: map[string]any{"architectures": nil}, want: "architectures must have exactly one entry, got []"},
		{name: "two architectures", changes: map[string]any{"architectures": []string{"A", "B"}}, want: `architectures must have exactly one entry, got ["A" "B"]`},
		{name: "zero hidden", changes: map[string]any{"hidden_size": 0}, want: "hidden_size is missing (or 0)"},
		{name: "missing intermediate", changes: map[string]any{"intermediate_size": nil}, want: "intermediate_size is missing (or 0)"},
		{name: "negative layers", changes: map[string]any{"num_hidden_layers": -2}, want: "num_hidden_layers must be > 0, got -2"},
		{name: "zero heads", changes: map[string]any{"num_attention_heads": 0}, want: "num_attention_heads is missing (or 0)"},
		{name: "zero vocab", changes: map[string]any{"vocab_size": 0}, want: "vocab_size is missing (or 0)"},
		{name: "kv heads do not divide", changes: map[string]any{"num_key_value_heads": 3}, want: "num_key_value_heads = 3 must divide num_attention_heads = 14"},
		{name: "negative kv heads", changes: map[string]any{"num_key_value_heads": -1}, want: "num_key_value_heads must be > 0, got -1"},
		{name: "hidden not divisible", changes: map[string]any{"hidden_size": 900}, want: "hidden_size = 900 is not divisible by num_attention_heads = 14"},
		{name: "odd head_dim", changes: map[string]any{"head_dim": 63}, want: "head_dim = 63 must be even"},
		{name: "odd derived head_dim", changes: map[string]any{"hidden_size": 14 * 7}, want: "head_dim = 7 must be even"},
		{name: "negative head_dim", changes: map[string]any{"head_dim": -64}, want: "head_dim must be > 0, got -64"},
		{name: "zero eps", changes: map[string]any{"rms_norm_eps": 0}, want: "rms_norm_eps must be > 0, got 0"},
		{name: "negative theta", changes: map[string]any{"rope_theta": -1}, want: "rope_theta must be > 0, got -1"},
		{name: "zero max positions", changes: map[string]any{"max_position_embeddings": 0}, want: "max_position_embeddings must be > 0, got 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.raw)
			if tc.raw == "" {
				data = edit(t, tc.changes)
			}
			_, err := ParseConfig(data, "/m/config.json")
			if err == nil {
				t.Fatalf("no error, want %q", tc.want)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "checkpoint: /m/config.json: ") || !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q, want one line naming the file and containing %q", msg, tc.want)
			}
		})
	}
}

func TestParseGenerationConfig(t *testing.T) {
	for _, tc := range []struct {
		json string
		bos  int // -1: absent
		eos  []int
		err  string
	}{
		{json: `{"bos_token_id": 1, "eos_token_id": 2}`, bos: 1, eos: []int{2}},
		{json: `{"bos_token_id": 151643, "eos_token_id": [151645, 151643]}`, bos: 151643, eos: []int{151645, 151643}},
		{json: `{"eos_token_id": 7}`, bos: -1, eos: []int{7}},
		{json: `{"bos_token_id": null}`, bos: -1},
		{json: `{}`, bos: -1},
		{json: `{"eos_token_id": "2"}`, err: `eos_token_id must be an integer or a list of integers, got "2"`},
		{json: `{"eos_token_id": [1, 2.5]}`, err: "eos_token_id must be an integer or a list of integers"},
		{json: "{\"eos_token_id\": [\n1,\n-1\n]}", err: "eos_token_id must be non-negative, got [1,-1]"},
		{json: `{"eos_token_id": -1}`, err: "eos_token_id must be non-negative"},
		{json: `{"bos_token_id": [1]}`, err: "bos_token_id must be a non-negative integer, got [1]"},
		{json: `{"bos_token_id": `, err: "malformed JSON"},
	} {
		g, err := ParseGenerationConfig([]byte(tc.json), "gen.json")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), "gen.json: ") || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: error %v, want %q", tc.json, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.json, err)
			continue
		}
		if (tc.bos < 0) != (g.BOSTokenID == nil) || (g.BOSTokenID != nil && *g.BOSTokenID != tc.bos) {
			t.Errorf("%s: bos %v", tc.json, g.BOSTokenID)
		}
		if len(g.EOSTokenIDs) != len(tc.eos) || (len(tc.eos) > 0 && g.EOSTokenIDs[0] != tc.eos[0]) {
			t.Errorf("%s: eos %v, want %v", tc.json, g.EOSTokenIDs, tc.eos)
		}
	}
}

// Size fields are bounded before anything allocates by them: a config that
// claims a billion layers must be refused at once, naming the field, not
// after a loader has enumerated a billion layers' tensor names.
func TestParseConfigBounds(t *testing.T) {
	for _, tc := range []struct {
		field string
		value int
		want  string
		also  map[string]any // other changes, if any
	}{
		{"num_hidden_layers", 1_000_000_000, "num_hidden_layers 1000000000: more than 4096", nil},
		{"num_hidden_layers", 4097, "num_hidden_layers 4097: more than 4096", nil},
		{"hidden_size", 1 << 40, "hidden_size 1099511627776: more than 131072", nil},
		{"intermediate_size", 1 << 62, "intermediate_size 4611686018427387904: more than 1048576", nil},
		{"vocab_size", 1<<21 + 1, "vocab_size 2097153: more than 2097152", nil},
		{"num_attention_heads", 1 << 20, "num_attention_heads 1048576: more than 4096", nil},
		{"num_key_value_heads", 1 << 20, "num_key_value_heads 1048576: more than 4096", nil},
		{"head_dim", 1 << 20, "head_dim 1048576: more than 4096", nil},
		{"max_position_embeddings", 1 << 30, "max_position_embeddings 1073741824: more than 16777216", nil},
		{"max_position_embeddings", math.MaxInt64, "max_position_embeddings 9223372036854775807: more than 16777216", nil},
		{"hidden_size", 1 << 17, "head_dim 8192 (hidden_size / num_attention_heads): more than 4096",
			map[string]any{"num_attention_heads": 16, "num_key_value_heads": 16}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			changes := map[string]any{tc.field: tc.value}
			for k, v := range tc.also {
				changes[k] = v
			}
			_, err := ParseConfig(edit(t, changes), "/m/config.json")
			if err == nil || err.Error() != "checkpoint: /m/config.json: "+tc.want {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}

	// The bounds admit the largest real models of the supported families,
	// and the extremes the bounds were chosen for.
	for name, changes := range map[string]map[string]any{
		"Llama 3.1 405B": {"architectures": []string{"LlamaForCausalLM"}, "hidden_size": 16384, "intermediate_size": 53248,
			"num_hidden_layers": 126, "num_attention_heads": 128, "num_key_value_heads": 8, "vocab_size": 128256,
			"max_position_embeddings": 131072},
		"Qwen2.5 72B": {"hidden_size": 8192, "intermediate_size": 29568, "num_hidden_layers": 80, "num_attention_heads": 64,
			"num_key_value_heads": 8, "vocab_size": 152064, "max_position_embeddings": 131072},
		"10M context, 1M vocab": {"max_position_embeddings": 10_485_760, "vocab_size": 1 << 20},
		"every bound": {"num_hidden_layers": 4096, "hidden_size": 1 << 17, "intermediate_size": 1 << 20, "vocab_size": 1 << 21,
			"num_attention_heads": 4096, "num_key_value_heads": 4096, "head_dim": 4096, "max_position_embeddings": 1 << 24},
	} {
		if _, err := ParseConfig(edit(t, changes), "config.json"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
