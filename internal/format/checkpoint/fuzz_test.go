package checkpoint

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/format/safetensors"
)

// oneLineNaming fails t unless err is one line that names the file.
func oneLineNaming(t *testing.T, err error, name string) {
	t.Helper()
	if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, name) {
		t.Fatalf("error %q is not one line naming %s", msg, name)
	}
}

// A config that parses is one a loader can size things by: every size
// positive and within its bound, heads grouped evenly, head_dim even.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(qwen))
	f.Add([]byte(tinyConfig))
	f.Add([]byte(`{"architectures":["A"],"hidden_size":8,"intermediate_size":8,"num_hidden_layers":1000000000,"num_attention_heads":2,"vocab_size":3}`))
	f.Add([]byte(`{"architectures":["A"],"hidden_size":131072,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":1,"vocab_size":3,"head_dim":-2}`))
	f.Add([]byte(`{"architectures":["A"],"hidden_size":8,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":2,"vocab_size":3,"max_position_embeddings":9223372036854775807,"rope_parameters":{"rope_theta":0}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data, "fuzz/config.json")
		if err != nil {
			oneLineNaming(t, err, "fuzz/config.json")
			return
		}
		for _, s := range []struct {
			v, limit int
		}{
			{c.HiddenSize, MaxHiddenSize}, {c.IntermediateSize, MaxIntermediateSize}, {c.NumHiddenLayers, MaxLayers},
			{c.NumAttentionHeads, MaxHeads}, {c.NumKeyValueHeads, MaxHeads}, {c.HeadDim, MaxHeadDim},
			{c.VocabSize, MaxVocabSize}, {c.MaxPositionEmbeddings, MaxPositionEmbedding},
		} {
			if s.v <= 0 || s.v > s.limit {
				t.Fatalf("accepted a size %d outside (0, %d]: %+v", s.v, s.limit, c)
			}
		}
		if c.NumAttentionHeads%c.NumKeyValueHeads != 0 || c.HeadDim%2 != 0 || c.RMSNormEps <= 0 || c.RopeTheta <= 0 || c.Arch() == "" {
			t.Fatalf("accepted an inconsistent config %+v", c)
		}
	})
}

// Generation ids that parse are usable as token ids.
func FuzzParseGenerationConfig(f *testing.F) {
	for _, s := range []string{`{"bos_token_id": 1, "eos_token_id": [151645, 151643]}`, `{"eos_token_id": 2}`, `{}`,
		`{"eos_token_id": [1, -1]}`, `{"bos_token_id": 9223372036854775808}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := ParseGenerationConfig(data, "fuzz/generation_config.json")
		if err != nil {
			oneLineNaming(t, err, "fuzz/generation_config.json")
			return
		}
		if (g.BOSTokenID != nil && *g.BOSTokenID < 0) || slices.ContainsFunc(g.EOSTokenIDs, func(id int) bool { return id < 0 }) {
			t.Fatalf("accepted a negative id: %+v", g)
		}
	})
}

// Whatever index opens serves each tensor from the shard it names, and no
// shard from outside the model directory.
func FuzzOpenIndexed(f *testing.F) {
	s1, s2 := "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	dir := modelDir(f, f.TempDir(), map[string][]safetensors.Tensor{s1: {embed, norm}, s2: {head}}, nil)
	// A shard outside dir that an escaping name could reach.
	if err := safetensors.WriteFile(filepath.Join(filepath.Dir(dir), "outside.safetensors"), []safetensors.Tensor{qweight}, nil); err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(`{"metadata":{"total_size":42},"weight_map":{"model.embed_tokens.weight":"` + s1 + `","model.norm.weight":"` + s1 + `","lm_head.weight":"` + s2 + `"}}`))
	f.Add([]byte(`{"weight_map":{"model.embed_tokens.weight":"` + s2 + `"}}`))
	f.Add([]byte(`{"weight_map":{"q.weight":"../outside.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"q.weight":"."}}`))
	f.Add([]byte(`{"weight_map":{}}`))
	f.Add([]byte(`{"weight_map":[]}`))
	index := filepath.Join(dir, indexName)
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(index, data, 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := Open(dir)
		if err != nil {
			oneLineNaming(t, err, dir)
			return
		}
		defer c.Close()
		for _, name := range c.Names() {
			_, shard, _ := c.Info(name)
			if filepath.Dir(shard) != dir {
				t.Fatalf("tensor %s served from %s, outside %s", name, shard, dir)
			}
		}
		var idx struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(data, &idx); err != nil || len(idx.WeightMap) == 0 {
			t.Fatalf("opened with an index that has no weight_map: %v", err)
		}
		for name, file := range idx.WeightMap {
			if _, shard, ok := c.Info(name); !ok || shard != filepath.Join(dir, file) {
				t.Fatalf("weight_map puts %s in %s, Open serves it from %q", name, file, shard)
			}
		}
	})
}

// Resolve picks a hub cache repo's snapshot only when there is exactly
// one; with several it names them all and picks none.
func FuzzResolveHubCache(f *testing.F) {
	f.Add("0123abcd", "")
	f.Add("aaaa1111\nbbbb2222", "bbbb2222\n")
	f.Add("", "main")
	f.Add("x\n\ny\nx", "   ")
	f.Fuzz(func(t *testing.T, snapshots, ref string) {
		repo := filepath.Join(t.TempDir(), "models--org--name")
		var names []string
		for _, n := range strings.Split(snapshots, "\n") {
			if n == "" || n == "." || n == ".." || strings.ContainsAny(n, "/\x00") || len(n) > 200 || slices.Contains(names, n) {
				continue // not a directory name, or one already made
			}
			if err := os.MkdirAll(filepath.Join(repo, "snapshots", n), 0o755); err != nil {
				t.Fatal(err)
			}
			names = append(names, n)
		}
		if err := os.MkdirAll(filepath.Join(repo, "snapshots"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(repo, "refs", "main"), ref)
		got, err := Resolve(repo)
		switch {
		case len(names) == 1:
			if want := filepath.Join(repo, "snapshots", names[0]); err != nil || got != want {
				t.Fatalf("Resolve = %q, %v; want %q", got, err, want)
			}
		case err == nil:
			t.Fatalf("Resolve picked %q among %d snapshots", got, len(names))
		default:
			for _, n := range names {
				if !strings.Contains(err.Error(), n) {
					t.Fatalf("error %q does not name snapshot %q", err, n)
				}
			}
		}
	})
}
