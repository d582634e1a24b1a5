package ggufmodel_test

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/ggml"
	"logitscope/internal/format/gguf"
	"logitscope/internal/format/safetensors"
	"logitscope/internal/model"
	"logitscope/internal/model/ggufmodel"
	"logitscope/internal/model/synth"
	"logitscope/internal/text/chat"
	"logitscope/internal/text/tokenizer"
	"logitscope/internal/text/tokenizer/oracletest"
)

// exportable are the presets Export writes: every tiny family but Gemma 3
// (whose tokenizer llama.cpp reads as SentencePiece), and small-llama3.
var exportable = []string{"tiny", "tiny-qwen3", "tiny-llama3", "tiny-llama-bias", "tiny-qwen3-moe", "tiny-qwen2-moe", "small-llama3"}

// texts are the tokenizer conformance strings and the synthetic corpus's
// lines: what derived tokenizers must encode as the originals do.
func texts(t testing.TB) []string {
	t.Helper()
	f, err := os.Open("../../text/tokenizer/testdata/conformance.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s string
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	corpus, err := os.ReadFile("../synth/corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	return append(out, strings.Split(string(corpus), "\n")...)
}

// sameEncoding checks that got encodes every text to want's ids, and
// that the two agree on which BOS a raw text starts with.
func sameEncoding(t *testing.T, want, got *tokenizer.Tokenizer, wantCfg, gotCfg chat.TemplateConfig, texts []string) {
	t.Helper()
	for _, s := range texts {
		if a, b := want.Encode(s), got.Encode(s); !slices.Equal(a, b) {
			t.Fatalf("%q: derived tokenizer gives %v, the original %v", s, b, a)
		}
	}
	if a, b := chat.RawPrefix(want, wantCfg), chat.RawPrefix(got, gotCfg); !slices.Equal(a, b) {
		t.Errorf("raw-text prefix %v, the original's %v", b, a)
	}
	if wantCfg.Template != gotCfg.Template {
		t.Errorf("chat template differs")
	}
}

// A synthetic checkpoint exported as GGUF opens as a model by itself with
// the checkpoint's very geometry, tokenizer and stop tokens, on its own
// f32 export and its q4 one; its fingerprint is the file's sha256.
func TestOpenModelRoundTrip(t *testing.T) {
	t.Setenv("LOGITSCOPE_CACHE", t.TempDir())
	strs := texts(t)
	for _, preset := range exportable {
		ck := checkpointOf(t, preset)
		want, err := model.GeometryOf(ck.Config)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := tokenizer.Load(ck.TokenizerPath())
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := chat.ConfigBeside(ck.TokenizerPath())
		if err != nil {
			t.Fatal(err)
		}
		for _, scheme := range []string{"f32", "q4"} {
			t.Run(preset+"/"+scheme, func(t *testing.T) {
				path, _, _ := export(t, ck, scheme)
				f, err := gguf.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				cfg, gen, err := ggufmodel.Config(f)
				if err != nil {
					t.Fatal(err)
				}
				g, err := model.GeometryOf(cfg)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(g, want) {
					t.Fatalf("geometry from the metadata\n%+v\nthe checkpoint's\n%+v", g, want)
				}
				for _, id := range ck.Generation.EOSTokenIDs {
					if !slices.Contains(gen.EOSTokenIDs, id) {
						t.Errorf("stops %v lack the checkpoint's %d", gen.EOSTokenIDs, id)
					}
				}
				m, err := ggufmodel.OpenModel(path)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(m.Config, cfg) || m.GGUF != path || len(m.Names()) != 0 {
					t.Fatalf("OpenModel: config %+v, GGUF %q, %d tensors", m.Config, m.GGUF, len(m.Names()))
				}
				fp, err := m.Fingerprint()
				if err != nil {
					t.Fatal(err)
				}
				if sum, _ := checkpoint.FileSHA256(path); fp != sum {
					t.Errorf("fingerprint %s, the file's sha256 %s", fp, sum)
				}
				got, err := tokenizer.Load(m.TokenizerPath())
				if err != nil {
					t.Fatal(err)
				}
				gotCfg, err := chat.ConfigBeside(m.TokenizerPath())
				if err != nil {
					t.Fatal(err)
				}
				sameEncoding(t, tok, got, tmpl, gotCfg, strs)
			})
		}
	}
}

// OpenModel derives the same files on every open, into one cache
// directory named by them: a second open, and a copy of the file under
// another name, reuse it.
func TestOpenModelCache(t *testing.T) {
	root := t.TempDir()
	t.Setenv("LOGITSCOPE_CACHE", root)
	path, _, _ := export(t, checkpointOf(t, "tiny"), "f32")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(t.TempDir(), "other.gguf")
	if err := os.WriteFile(other, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, p := range []string{path, path, other} {
		m, err := ggufmodel.OpenModel(p)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, m.Dir)
	}
	entries, err := os.ReadDir(filepath.Join(root, "gguf"))
	if err != nil {
		t.Fatal(err)
	}
	if dirs[0] != dirs[1] || dirs[1] != dirs[2] || len(entries) != 1 {
		t.Fatalf("directories %v; the cache holds %d entries", dirs, len(entries))
	}
	files, err := os.ReadDir(dirs[0])
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name())
	}
	if want := []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"}; !slices.Equal(names, want) {
		t.Fatalf("cache directory holds %v, want %v", names, want)
	}
}

// A file refused after its metadata was derived (a tensor of the wrong
// shape) leaves nothing in the cache.
func TestOpenModelRefusedLeavesNoCache(t *testing.T) {
	root := t.TempDir()
	t.Setenv("LOGITSCOPE_CACHE", root)
	path, _, _ := export(t, checkpointOf(t, "tiny"), "f32")
	bad := rewrite(t, path, editTensor("blk.0.attn_norm.weight", func(x *gguf.Tensor) {
		x.Dims, x.Data = []uint64{32}, x.Data[:32*4]
	}))
	if _, err := ggufmodel.OpenModel(bad); err == nil || !strings.Contains(err.Error(), "blk.0.attn_norm.weight") {
		t.Fatalf("got %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(root, "gguf")); len(entries) != 0 {
		t.Fatalf("the refused file left %d entries in the cache", len(entries))
	}
}

// writeGGUF writes kv and tensors as a GGUF file.
func writeGGUF(t *testing.T, kv []gguf.KV, tensors []gguf.Tensor) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := gguf.Write(f, kv, tensors, 0); err != nil {
		t.Fatal(err)
	}
	return path
}

// metadataFile writes a GGUF file of kv and no tensors, as a tokenizer's
// keys alone make one.
func metadataFile(t *testing.T, kv []gguf.KV) *gguf.File {
	t.Helper()
	g, err := gguf.Open(writeGGUF(t, kv, nil))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// derive writes tok's keys as Export does (pre overriding
// tokenizer.ggml.pre when set), derives the tokenizer files back and
// loads them.
func derive(t *testing.T, tok *tokenizer.Tokenizer, tmpl chat.TemplateConfig, pre string) (*tokenizer.Tokenizer, chat.TemplateConfig) {
	t.Helper()
	kv, err := ggufmodel.TokenizerKV(tok, tmpl, checkpoint.GenerationConfig{}, tok.VocabSize())
	if err != nil {
		t.Fatal(err)
	}
	for i := range kv {
		if kv[i].Key == "tokenizer.ggml.pre" && pre != "" {
			kv[i].Value = gguf.StringValue(pre)
		}
	}
	tj, cj, err := ggufmodel.TokenizerFiles(metadataFile(t, kv))
	if err != nil {
		t.Fatal(err)
	}
	got, err := tokenizer.Parse(tj, "derived")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := chat.ParseConfig(cj)
	if err != nil {
		t.Fatal(err)
	}
	return got, cfg
}

// The real Qwen3 and Llama 3.1 tokenizers (the oracle's npm copies), as
// GGUF keys, derive back to tokenizers that encode every text as they do:
// Qwen's NFC and single digits, Llama 3's digit triples and whole-word
// lookup (ignore_merges), the special and the plain added tokens, the
// BOS Llama 3 puts before raw text and Qwen does not.
func TestTokenizerRealRoundTrip(t *testing.T) {
	strs := texts(t)
	for _, name := range []string{"qwen3", "llama3_1"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "tokenizer.json")
			oracletest.Run(t, nil, "write-tokenizer", path, name)
			oracletest.Run(t, nil, "write-config", filepath.Join(dir, "tokenizer_config.json"), name)
			tok, err := tokenizer.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			tmpl, err := chat.ConfigBeside(path)
			if err != nil {
				t.Fatal(err)
			}
			got, cfg := derive(t, tok, tmpl, "")
			sameEncoding(t, tok, got, tmpl, cfg, strs)
		})
	}
}

// The splits named gpt-2 and smollm derive GPT-2's ByteLevel regex and
// SmolLM's single digits before it: a tokenizer.json of each kind (the
// tiny vocabulary with that pre-tokenizer) goes through GGUF keys and
// back to the same ids.
func TestTokenizerSplits(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(synth.Presets["tiny"], dir, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	strs := texts(t)
	for _, pre := range []string{"gpt-2", "smollm"} {
		t.Run(pre, func(t *testing.T) {
			var doc map[string]any
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			doc["normalizer"], doc["pre_tokenizer"] = nil, ggufmodel.PreTokenizer(pre)
			b, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := tokenizer.Parse(b, pre)
			if err != nil {
				t.Fatal(err)
			}
			// tokenizerKV names only the splits Export writes: the tiny
			// tokenizer's own, Qwen2's; pre replaces it.
			orig, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(orig.Merges(), tok.Merges()) {
				t.Fatal("merges differ")
			}
			got, cfg := derive(t, orig, chat.TemplateConfig{}, pre)
			sameEncoding(t, tok, got, chat.TemplateConfig{}, cfg, strs)
		})
	}
}

// drop removes key.
func drop(key string) edit {
	return func(kv []gguf.KV, ts []gguf.Tensor) ([]gguf.KV, []gguf.Tensor) {
		return slices.DeleteFunc(kv, func(p gguf.KV) bool { return p.Key == key }), ts
	}
}

// OpenModel refuses what the metadata cannot tell or the engines do not
// run, naming the file and the key or tensor: every required key and
// type, architectures, tokenizers and splits other than those that open,
// a vocabulary whose tokens and embedding rows disagree, and what a
// forward pass here would compute otherwise than llama.cpp.
func TestOpenModelRefusals(t *testing.T) {
	t.Setenv("LOGITSCOPE_CACHE", t.TempDir())
	files := map[string]string{}
	for _, preset := range []string{"tiny", "tiny-llama3"} {
		files[preset], _, _ = export(t, checkpointOf(t, preset), "f32")
	}
	tokens := func(n int) edit {
		return func(kv []gguf.KV, ts []gguf.Tensor) ([]gguf.KV, []gguf.Tensor) {
			i := slices.IndexFunc(kv, func(p gguf.KV) bool { return p.Key == "tokenizer.ggml.tokens" })
			kv[i].Value = gguf.StringsValue(kv[i].Value.Any().([]string)[:n])
			return kv, ts
		}
	}
	ropeFreqs := func(scale float32) edit {
		return func(kv []gguf.KV, ts []gguf.Tensor) ([]gguf.KV, []gguf.Tensor) {
			i := slices.IndexFunc(ts, func(t gguf.Tensor) bool { return t.Name == "rope_freqs.weight" })
			x := make([]float32, len(ts[i].Data)/4)
			for j := range x {
				x[j] = math.Float32frombits(binary.LittleEndian.Uint32(ts[i].Data[4*j:]))
				if x[j] > 1 && x[j] < 8 {
					x[j] *= scale
				}
			}
			ts[i].Data = safetensors.EncodeF32(x)
			return kv, ts
		}
	}
	for _, c := range []struct {
		name, preset string
		edit         edit
		want         []string
	}{
		{"missing key", "tiny", drop("qwen2.block_count"), []string{`no key "qwen2.block_count"`}},
		{"missing rms epsilon", "tiny", drop("qwen2.attention.layer_norm_rms_epsilon"), []string{`"qwen2.attention.layer_norm_rms_epsilon"`}},
		{"wrong type", "tiny", setKV("qwen2.embedding_length", gguf.StringValue("64")), []string{`"qwen2.embedding_length" is STRING`}},
		{"zero", "tiny", setKV("qwen2.context_length", gguf.Uint32Value(0)), []string{"qwen2.context_length is 0"}},
		{"too large", "tiny", setKV("qwen2.block_count", gguf.Uint32Value(1<<20)), []string{"qwen2.block_count is 1048576, outside 1…4096"}},
		{"unknown architecture", "tiny", setKV("general.architecture", gguf.StringValue("phi3")), []string{`general.architecture "phi3" is not supported`}},
		{"SentencePiece", "tiny", setKV("tokenizer.ggml.model", gguf.StringValue("llama")), []string{`tokenizer.ggml.model "llama" is not supported`}},
		{"WordPiece", "tiny", setKV("tokenizer.ggml.model", gguf.StringValue("bert")), []string{`tokenizer.ggml.model "bert"`}},
		{"unknown split", "tiny", setKV("tokenizer.ggml.pre", gguf.StringValue("falcon3")), []string{`tokenizer.ggml.pre "falcon3" is not supported`, "qwen2"}},
		{"converter's fallback split", "tiny", setKV("tokenizer.ggml.pre", gguf.StringValue("default")), []string{`tokenizer.ggml.pre "default"`}},
		{"no split", "tiny", drop("tokenizer.ggml.pre"), []string{`no key "tokenizer.ggml.pre"`}},
		{"no token types", "tiny", drop("tokenizer.ggml.token_type"), []string{`no key "tokenizer.ggml.token_type"`}},
		{"no merges", "tiny", drop("tokenizer.ggml.merges"), []string{`no key "tokenizer.ggml.merges"`}},
		{"vocabulary", "tiny", tokens(100), []string{"tokenizer.ggml.tokens has 100 tokens but token_embd.weight has"}},
		{"vocab_size", "tiny", setKV("qwen2.vocab_size", gguf.Uint32Value(7)), []string{"qwen2.vocab_size is 7 but token_embd.weight has"}},
		{"token type", "tiny", func(kv []gguf.KV, ts []gguf.Tensor) ([]gguf.KV, []gguf.Tensor) {
			i := slices.IndexFunc(kv, func(p gguf.KV) bool { return p.Key == "tokenizer.ggml.token_type" })
			types := slices.Clone(kv[i].Value.Any().([]int32))
			types[0] = 6 // BYTE, SentencePiece's
			kv[i].Value = gguf.Int32sValue(types)
			return kv, ts
		}, []string{"tokenizer.ggml.token_type[0]", "is 6"}},
		{"token types' length", "tiny", setKV("tokenizer.ggml.token_type", gguf.Int32sValue([]int32{1})), []string{"tokenizer.ggml.token_type has 1 entries"}},
		{"special token spelled as a vocabulary token", "tiny", func(kv []gguf.KV, ts []gguf.Tensor) ([]gguf.KV, []gguf.Tensor) {
			for i := range kv {
				switch kv[i].Key {
				case "tokenizer.ggml.tokens":
					tokens := slices.Clone(kv[i].Value.Any().([]string))
					tokens[len(tokens)-1] = tokens[0]
					kv[i].Value = gguf.StringsValue(tokens)
				case "tokenizer.ggml.token_type":
					types := slices.Clone(kv[i].Value.Any().([]int32))
					types[len(types)-1] = 3 // CONTROL
					kv[i].Value = gguf.Int32sValue(types)
				}
			}
			return kv, ts
		}, []string{"its derived tokenizer.json", "has id 511, but model.vocab gives it 0"}},
		{"merge", "tiny", setKV("tokenizer.ggml.merges", gguf.StringsValue([]string{"Ġ"})), []string{"tokenizer.ggml.merges[0]"}},
		{"eos outside", "tiny", setKV("tokenizer.ggml.eos_token_id", gguf.Uint32Value(99999)), []string{"tokenizer.ggml.eos_token_id is 99999"}},
		{"YaRN", "tiny", setKV("qwen2.rope.scaling.type", gguf.StringValue("yarn")), []string{`qwen2.rope.scaling.type "yarn" is not supported`}},
		{"value length", "tiny", setKV("qwen2.attention.value_length", gguf.Uint32Value(32)), []string{"qwen2.attention.value_length is 32"}},
		{"partial RoPE", "tiny", setKV("qwen2.rope.dimension_count", gguf.Uint32Value(8)), []string{"qwen2.rope.dimension_count is 8"}},
		{"non-causal", "tiny", setKV("qwen2.attention.causal", gguf.BoolValue(false)), []string{"qwen2.attention.causal is false"}},
		{"softcapping", "tiny", setKV("qwen2.final_logit_softcapping", gguf.Float32Value(30)), []string{"qwen2.final_logit_softcapping is 30"}},
		{"experts on a dense architecture", "tiny", setKV("qwen2.expert_count", gguf.Uint32Value(8)), []string{"qwen2.expert_count is 8"}},
		{"shape", "tiny", setKV("qwen2.feed_forward_length", gguf.Uint32Value(96)), []string{"tensor blk.0.ffn_gate.weight has shape"}},
		{"rope_freqs elsewhere", "tiny", func(kv []gguf.KV, ts []gguf.Tensor) ([]gguf.KV, []gguf.Tensor) {
			return kv, append(ts, gguf.Tensor{Name: "rope_freqs.weight", Dims: []uint64{8}, Type: ggml.F32, Data: make([]byte, 32)})
		}, []string{"tensor rope_freqs.weight: llama.cpp's qwen2 does not read one"}},
		{"rope_freqs not Llama 3's", "tiny-llama3", ropeFreqs(1.01), []string{"tensor rope_freqs.weight: its factors are not Llama 3's RoPE scaling"}},
		{"rope_freqs beside a linear factor", "tiny-llama3", setKV("llama.rope.scaling.factor", gguf.Float32Value(2)), []string{"rope_freqs.weight beside llama.rope.scaling.factor"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := rewrite(t, files[c.preset], c.edit)
			_, err := ggufmodel.OpenModel(path)
			if err == nil {
				t.Fatal("opened")
			}
			t.Log(err)
			for _, w := range append(c.want, path) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// Gemma 3's metadata gives the geometry llama.cpp runs: the model's own
// but for what its GGUF does not hold and llama.cpp decides, the
// attention scale (key_length^-½ instead of query_pre_attn_scalar's,
// hidden/heads for the 62-layer 27B) and the embedding scale (√hidden
// in float32, not rounded to the checkpoint's bfloat16); without
// attention.sliding_window every layer is global. Its tokenizer is
// SentencePiece, so the file opens for its Config only.
func TestConfigGemma3(t *testing.T) {
	ck := checkpointOf(t, "tiny-gemma3")
	hf, err := model.GeometryOf(ck.Config)
	if err != nil {
		t.Fatal(err)
	}
	kv := []gguf.KV{{Key: "general.architecture", Value: gguf.StringValue("gemma3")}}
	u32 := func(k string, v int) {
		kv = append(kv, gguf.KV{Key: "gemma3." + k, Value: gguf.Uint32Value(uint32(v))})
	}
	f32 := func(k string, v float64) {
		kv = append(kv, gguf.KV{Key: "gemma3." + k, Value: gguf.Float32Value(float32(v))})
	}
	u32("context_length", hf.MaxPos)
	u32("embedding_length", hf.Dim)
	u32("feed_forward_length", hf.Intermediate)
	u32("attention.head_count", hf.Heads)
	u32("attention.head_count_kv", hf.KVHeads)
	u32("attention.key_length", hf.HeadDim)
	u32("attention.value_length", hf.HeadDim)
	f32("attention.layer_norm_rms_epsilon", float64(hf.NormEps))
	f32("rope.freq_base", hf.RopeTheta)
	kv = append(kv, gguf.KV{Key: "tokenizer.ggml.model", Value: gguf.StringValue("llama")},
		gguf.KV{Key: "tokenizer.ggml.tokens", Value: gguf.StringsValue(make([]string, hf.Vocab))})
	embed := gguf.Tensor{Name: "token_embd.weight", Dims: []uint64{uint64(hf.Dim), uint64(hf.Vocab)}, Type: ggml.F32, Data: make([]byte, 4*hf.Dim*hf.Vocab)}
	swa := func(kv []gguf.KV) []gguf.KV {
		return append(kv, gguf.KV{Key: "gemma3.attention.sliding_window", Value: gguf.Uint32Value(uint32(hf.Window[0]))},
			gguf.KV{Key: "gemma3.attention.sliding_window_pattern", Value: gguf.Uint32Value(3)},
			gguf.KV{Key: "gemma3.rope.freq_base_swa", Value: gguf.Float32Value(float32(hf.LocalRopeTheta))})
	}
	llamaCpp := hf
	llamaCpp.QueryPreAttnScalar = float64(hf.HeadDim)
	llamaCpp.EmbedScale = float32(math.Sqrt(float64(hf.Dim)))
	global := llamaCpp
	global.Window = []int{0, 0, 0}
	cut := llamaCpp
	cut.NumLayers, cut.QueryPreAttnScalar = 62, float64(hf.Dim/hf.Heads)
	cut.Window = make([]int, 62)
	for i := range cut.Window {
		if (i+1)%3 != 0 {
			cut.Window[i] = hf.Window[0]
		}
	}
	for _, c := range []struct {
		name   string
		layers int
		kv     []gguf.KV
		want   model.Geometry
	}{
		{"sliding", 3, swa(slices.Clone(kv)), llamaCpp},
		{"global", 3, slices.Clone(kv), global},
		{"27B's scale", 62, swa(slices.Clone(kv)), cut},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := gguf.Open(writeGGUF(t, append(c.kv, gguf.KV{Key: "gemma3.block_count", Value: gguf.Uint32Value(uint32(c.layers))}), []gguf.Tensor{embed}))
			if err != nil {
				t.Fatal(err)
			}
			cfg, _, err := ggufmodel.Config(f)
			if err != nil {
				t.Fatal(err)
			}
			g, err := model.GeometryOf(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, c.want) {
				t.Fatalf("geometry\n%+v\nwant\n%+v", g, c.want)
			}
		})
	}
	if llamaCpp.QueryPreAttnScalar == hf.QueryPreAttnScalar || llamaCpp.EmbedScale == hf.EmbedScale {
		t.Fatal("tiny-gemma3 no longer shows where llama.cpp's Gemma 3 differs")
	}
}

// llama3Scaling solves the stored factors back into the rope_scaling they
// were computed from, for Llama 3.1 and 3.2's real parameters and the
// tiny preset's, whether the factors were computed as Export computes
// them (float32 frequencies, ours) or as llama.cpp's converter does (the
// blend in float64), which differ in the last bits.
func TestLlama3Scaling(t *testing.T) {
	for _, c := range []struct {
		name   string
		theta  float64
		hd     int
		factor float64
		orig   int
	}{
		{"tiny-llama3", 5e5, 16, 8, 64},
		{"Llama 3.2 1B", 5e5, 64, 32, 8192},
		{"Llama 3.1 8B", 5e5, 128, 8, 8192},
	} {
		r := model.RopeScaling{Type: "llama3", Factor: c.factor, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPos: c.orig}
		ours := ggufmodel.RopeFreqs(model.Geometry{RopeTheta: c.theta, HeadDim: c.hd, Rope: r})
		// The converter's: the float32 frequencies, the blend in float64.
		var conv []float32
		for _, v := range (model.Geometry{RopeTheta: c.theta, HeadDim: c.hd}).InvFreq() {
			wavelen := 2 * math.Pi / float64(v)
			f := c.factor
			switch {
			case wavelen < float64(c.orig)/4:
				f = 1
			case wavelen <= float64(c.orig):
				smooth := (float64(c.orig)/wavelen - 1) / 3
				f = 1 / ((1-smooth)/c.factor + smooth)
			}
			conv = append(conv, float32(f))
		}
		diff := 0.0
		for i, f := range conv {
			o := math.Float32frombits(binary.LittleEndian.Uint32(ours.Data[4*i:]))
			diff = max(diff, math.Abs(float64(o)-float64(f))/float64(f))
		}
		t.Logf("%s: ours and the converter's factors differ by %.2g at most (relative)", c.name, diff)
		for name, data := range map[string][]byte{"ours": ours.Data, "converter's": safetensors.EncodeF32(conv)} {
			t.Run(c.name+"/"+name, func(t *testing.T) {
				path := writeGGUF(t, nil, []gguf.Tensor{{Name: "rope_freqs.weight", Dims: []uint64{uint64(c.hd / 2)}, Type: ggml.F32, Data: data}})
				f, err := gguf.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				s, err := ggufmodel.Llama3Scaling(f, c.theta, c.hd)
				if err != nil {
					t.Fatal(err)
				}
				want := map[string]any{"rope_type": "llama3", "factor": c.factor, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
					"original_max_position_embeddings": c.orig}
				if !reflect.DeepEqual(s, want) {
					t.Fatalf("%v, want %v", s, want)
				}
			})
		}
	}
}
