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

const tinyConfig = `{"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":4,
"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":2,"vocab_size":3}`

var (
	embed = safetensors.Tensor{Name: "model.embed_tokens.weight", DType: safetensors.BF16, Shape: []int{3, 2},
		Data: safetensors.EncodeBF16([]float32{1, 2, 3, 4, 5, 6})}
	norm = safetensors.Tensor{Name: "model.norm.weight", DType: safetensors.F32, Shape: []int{2},
		Data: safetensors.EncodeF32([]float32{0.5, -1})}
	head = safetensors.Tensor{Name: "lm_head.weight", DType: safetensors.F16, Shape: []int{2, 1},
		Data: safetensors.EncodeF16([]float32{0.25, 8})}
	qweight = safetensors.Tensor{Name: "q.weight", DType: safetensors.I8, Shape: []int{2}, Data: []byte{1, 0xff}}
)

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// modelDir writes a model directory with one safetensors file per entry of
// shards and, when weightMap is non-nil, an index.
func modelDir(t testing.TB, dir string, shards map[string][]safetensors.Tensor, weightMap map[string]string) string {
	t.Helper()
	writeFile(t, filepath.Join(dir, "config.json"), tinyConfig)
	writeFile(t, filepath.Join(dir, "tokenizer.json"), `{}`)
	for name, tensors := range shards {
		if err := safetensors.WriteFile(filepath.Join(dir, name), tensors, nil); err != nil {
			t.Fatal(err)
		}
	}
	if weightMap != nil {
		b, err := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 42}, "weight_map": weightMap})
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "model.safetensors.index.json"), string(b))
	}
	return dir
}

func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", parts)
	}
	msg := err.Error()
	t.Log(msg)
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("error %q does not contain %q", msg, p)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("error spans lines: %q", msg)
	}
}

func TestOpenSingleFile(t *testing.T) {
	dir := modelDir(t, t.TempDir(), map[string][]safetensors.Tensor{
		"model.safetensors": {embed, norm, head, qweight},
	}, nil)
	writeFile(t, filepath.Join(dir, "generation_config.json"), `{"bos_token_id":1,"eos_token_id":[2,3]}`)
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Dir != dir || c.Config.Arch() != "LlamaForCausalLM" || c.Config.HeadDim != 2 {
		t.Errorf("Dir %q, config %+v", c.Dir, c.Config)
	}
	if c.Generation.BOSTokenID == nil || *c.Generation.BOSTokenID != 1 || !slices.Equal(c.Generation.EOSTokenIDs, []int{2, 3}) {
		t.Errorf("Generation = %+v", c.Generation)
	}
	want := []string{"lm_head.weight", "model.embed_tokens.weight", "model.norm.weight", "q.weight"}
	if got := c.Names(); !slices.Equal(got, want) {
		t.Errorf("Names = %v", got)
	}
	for _, tc := range []struct {
		t    safetensors.Tensor
		want []float32
	}{
		{embed, []float32{1, 2, 3, 4, 5, 6}},
		{norm, []float32{0.5, -1}},
		{head, []float32{0.25, 8}},
	} {
		v, shape, err := c.Float32(tc.t.Name)
		if err != nil || !slices.Equal(v, tc.want) || !slices.Equal(shape, tc.t.Shape) {
			t.Errorf("Float32(%q) = %v %v %v", tc.t.Name, v, shape, err)
		}
	}
	raw, info, err := c.Raw("q.weight")
	if err != nil || !slices.Equal(raw, []byte{1, 0xff}) || info.DType != safetensors.I8 {
		t.Errorf("Raw = %v %+v %v", raw, info, err)
	}
	if _, shard, ok := c.Info("q.weight"); !ok || shard != filepath.Join(dir, "model.safetensors") {
		t.Errorf("Info shard = %q, %v", shard, ok)
	}
	if _, _, ok := c.Info("nope"); ok {
		t.Error("Info(nope) found something")
	}
	_, _, err = c.Float32("q.weight")
	wantErr(t, err, "model.safetensors", `"q.weight" is I8`)
	_, _, err = c.Float32("nope")
	wantErr(t, err, dir, `no tensor "nope"`)
	if c.TokenizerPath() != filepath.Join(dir, "tokenizer.json") {
		t.Errorf("TokenizerPath = %q", c.TokenizerPath())
	}
}

// A directory of derived files opens with the GGUF file as its weights:
// no tensors of its own, errors that say where the weights are, and the
// file's plain sha256 as the fingerprint.
func TestOpenDerived(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "config.json"), tinyConfig)
	writeFile(t, filepath.Join(dir, "generation_config.json"), `{"eos_token_id":2}`)
	gguf := filepath.Join(t.TempDir(), "m.gguf")
	writeFile(t, gguf, "GGUF bytes")
	c, err := OpenDerived(dir, gguf)
	if err != nil {
		t.Fatal(err)
	}
	if c.GGUF != gguf || c.Source() != gguf || len(c.Names()) != 0 || !slices.Equal(c.Generation.EOSTokenIDs, []int{2}) {
		t.Errorf("GGUF %q, Source %q, Names %v, Generation %+v", c.GGUF, c.Source(), c.Names(), c.Generation)
	}
	_, _, err = c.Float32("model.norm.weight")
	wantErr(t, err, gguf, `no safetensors tensor "model.norm.weight"`, "the GGUF file's")
	fp, err := c.Fingerprint()
	if want, _ := FileSHA256(gguf); err != nil || fp != want {
		t.Errorf("Fingerprint = %q, %v; want the file's sha256 %s", fp, err, want)
	}
	if _, err := OpenDerived(t.TempDir(), gguf); err == nil {
		t.Error("a directory without config.json opened")
	}
}

func TestOpenSharded(t *testing.T) {
	s1, s2 := "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	dir := modelDir(t, t.TempDir(), map[string][]safetensors.Tensor{
		s1: {embed, norm},
		s2: {head},
	}, map[string]string{embed.Name: s1, norm.Name: s1, head.Name: s2})
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if len(c.Names()) != 3 {
		t.Errorf("Names = %v", c.Names())
	}
	if _, shard, _ := c.Info(head.Name); shard != filepath.Join(dir, s2) {
		t.Errorf("Info(head) shard = %q", shard)
	}
	if v, _, err := c.Float32(head.Name); err != nil || !slices.Equal(v, []float32{0.25, 8}) {
		t.Errorf("Float32(head) = %v, %v", v, err)
	}
	if c.Generation.BOSTokenID != nil || c.Generation.EOSTokenIDs != nil {
		t.Errorf("absent generation_config gave %+v", c.Generation)
	}
	if err := c.Close(); err != nil {
		t.Error(err)
	}
}

func TestOpenShardErrors(t *testing.T) {
	s1, s2 := "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
	for _, tc := range []struct {
		name      string
		shards    map[string][]safetensors.Tensor
		weightMap map[string]string
		want      []string
	}{
		{"index names missing file",
			map[string][]safetensors.Tensor{s1: {embed}},
			map[string]string{embed.Name: s1, head.Name: s2},
			[]string{"model.safetensors.index.json", "weight_map names " + s2 + ", which does not exist"}},
		{"tensor in wrong shard",
			map[string][]safetensors.Tensor{s1: {embed, head}, s2: {norm}},
			map[string]string{embed.Name: s1, head.Name: s2, norm.Name: s2},
			[]string{`weight_map puts tensor "lm_head.weight" in ` + s2 + ", but it is in " + s1}},
		{"tensor missing from its shard",
			map[string][]safetensors.Tensor{s1: {embed}, s2: {norm}},
			map[string]string{embed.Name: s1, head.Name: s2, norm.Name: s2},
			[]string{`weight_map puts tensor "lm_head.weight" in ` + s2 + ", which does not contain it"}},
		{"duplicate tensor",
			map[string][]safetensors.Tensor{s1: {embed, norm}, s2: {norm, head}},
			map[string]string{embed.Name: s1, norm.Name: s1, head.Name: s2},
			[]string{`tensor "model.norm.weight" is in two shards`, s1, s2}},
		{"path escapes directory",
			map[string][]safetensors.Tensor{s1: {embed}},
			map[string]string{embed.Name: "../" + s1},
			[]string{`weight_map names "../` + s1 + `", which is not a file name`}},
		{"empty weight map",
			map[string][]safetensors.Tensor{s1: {embed}},
			map[string]string{},
			[]string{"model.safetensors.index.json: weight_map is missing or empty"}},
		{"no weights", nil, nil, []string{"no safetensors weights in "}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := modelDir(t, t.TempDir(), tc.shards, tc.weightMap)
			c, err := Open(dir)
			if err == nil {
				c.Close()
			}
			wantErr(t, err, tc.want...)
			if tc.weightMap == nil {
				wantErr(t, err, dir)
			}
		})
	}
}

func TestOpenBadFiles(t *testing.T) {
	dir := modelDir(t, t.TempDir(), map[string][]safetensors.Tensor{"model.safetensors": {norm}}, nil)
	writeFile(t, filepath.Join(dir, "generation_config.json"), `{"eos_token_id":"x"}`)
	_, err := Open(dir)
	wantErr(t, err, filepath.Join(dir, "generation_config.json"), "eos_token_id")

	os.Remove(filepath.Join(dir, "generation_config.json"))
	writeFile(t, filepath.Join(dir, "model.safetensors"), "\x02\x00\x00\x00\x00\x00\x00\x00[]")
	_, err = Open(dir)
	wantErr(t, err, filepath.Join(dir, "model.safetensors"), "not a JSON object")

	writeFile(t, filepath.Join(dir, "config.json"), `{"architectures":[]}`)
	_, err = Open(dir)
	wantErr(t, err, filepath.Join(dir, "config.json"), "architectures")

	os.Remove(filepath.Join(dir, "config.json"))
	_, err = Open(dir)
	wantErr(t, err, filepath.Join(dir, "config.json"))
}

// hubRepo lays out a hub cache repo: files live in blobs/, each snapshot
// holds relative symlinks into it, as huggingface_hub creates them.
func hubRepo(t *testing.T, snapshots ...string) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "models--org--tiny")
	src := modelDir(t, t.TempDir(), map[string][]safetensors.Tensor{"model.safetensors": {embed, norm}}, nil)
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range entries {
		blob := filepath.Join(repo, "blobs", "blob"+string(rune('a'+i)))
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, blob, string(data))
		for _, snap := range snapshots {
			link := filepath.Join(repo, "snapshots", snap, e.Name())
			if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join("..", "..", "blobs", filepath.Base(blob)), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	writeFile(t, filepath.Join(repo, "refs", "main"), snapshots[len(snapshots)-1])
	return repo
}

func TestHubCache(t *testing.T) {
	repo := hubRepo(t, "0123abcd")
	snap := filepath.Join(repo, "snapshots", "0123abcd")
	for _, path := range []string{repo, repo + "/", filepath.Join(repo, "snapshots"), filepath.Join(repo, "snapshots") + "/"} {
		got, err := Resolve(path)
		if err != nil || got != snap {
			t.Errorf("Resolve(%q) = %q, %v; want %q", path, got, err, snap)
		}
	}
	if got, err := Resolve(snap); err != nil || got != snap {
		t.Errorf("Resolve(snapshot) = %q, %v", got, err)
	}
	c, err := Open(repo + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Dir != snap || c.TokenizerPath() != filepath.Join(snap, "tokenizer.json") {
		t.Errorf("Dir = %q", c.Dir)
	}
	if v, _, err := c.Float32(embed.Name); err != nil || !slices.Equal(v, []float32{1, 2, 3, 4, 5, 6}) {
		t.Errorf("Float32 through symlink = %v, %v", v, err)
	}
}

func TestHubCacheErrors(t *testing.T) {
	repo := hubRepo(t, "aaaa1111", "bbbb2222")
	_, err := Resolve(repo)
	wantErr(t, err, repo, "2 snapshots", "aaaa1111", "bbbb2222", "refs/main is bbbb2222")
	_, err = Open(repo)
	wantErr(t, err, "aaaa1111, bbbb2222")

	empty := filepath.Join(t.TempDir(), "models--org--empty")
	if err := os.MkdirAll(filepath.Join(empty, "snapshots"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err = Resolve(empty)
	wantErr(t, err, empty, "no snapshot")

	// A blob that never finished downloading leaves a dangling symlink.
	broken := hubRepo(t, "cccc3333")
	weights := filepath.Join(broken, "snapshots", "cccc3333", "model.safetensors")
	blob, err := filepath.EvalSymlinks(weights)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(blob); err != nil {
		t.Fatal(err)
	}
	_, err = Open(broken)
	wantErr(t, err, weights)

	missing := filepath.Join(t.TempDir(), "nope")
	_, err = Resolve(missing)
	wantErr(t, err, missing)
	_, err = Open(missing)
	wantErr(t, err, missing)

	plain := t.TempDir()
	if got, err := Resolve(plain); err != nil || got != plain {
		t.Errorf("Resolve(plain) = %q, %v", got, err)
	}
	writeFile(t, filepath.Join(plain, "f"), "x")
	_, err = Resolve(filepath.Join(plain, "f"))
	wantErr(t, err, filepath.Join(plain, "f"), "not a directory")
}

// OpenWithoutWeights reads the configs of a directory with or without its
// safetensors (a GGUF brings the weights), holds no tensor, and has no
// fingerprint to give.
func TestOpenWithoutWeights(t *testing.T) {
	withShard := modelDir(t, t.TempDir(), map[string][]safetensors.Tensor{"model.safetensors": {embed, norm, head}}, nil)
	configOnly := modelDir(t, t.TempDir(), nil, nil)
	writeFile(t, filepath.Join(configOnly, "generation_config.json"), `{"eos_token_id":2}`)
	for _, tc := range []struct {
		name, dir string
		eos       []int
	}{
		{"with safetensors", withShard, nil},
		{"config only", configOnly, []int{2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := OpenWithoutWeights(tc.dir)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if c.Config.Arch() != "LlamaForCausalLM" || !slices.Equal(c.Generation.EOSTokenIDs, tc.eos) {
				t.Errorf("config %+v, generation %+v", c.Config, c.Generation)
			}
			if n := c.Names(); len(n) != 0 {
				t.Errorf("Names = %v, want none", n)
			}
			if _, _, ok := c.Info(embed.Name); ok {
				t.Error("Info found a tensor")
			}
			_, err = c.Fingerprint()
			wantErr(t, err, tc.dir, "without its weights")
		})
	}
	_, err := OpenWithoutWeights(t.TempDir())
	wantErr(t, err, "config.json")
}
