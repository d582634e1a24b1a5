package ggufmodel

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"logitscope/chat"
	"logitscope/checkpoint"
	"logitscope/gguf"
	"logitscope/model"
	"logitscope/synth"
	"logitscope/tokenizer"
	"logitscope/tokenizer/oracletest"
)

// exportable are the presets Export writes: every tiny family but Gemma 3
// (whose tokenizer llama.cpp reads as SentencePiece), and small-llama3.
var exportable = []string{"tiny", "tiny-qwen3", "tiny-llama3", "tiny-llama-bias", "tiny-qwen3-moe", "tiny-qwen2-moe", "small-llama3"}

// texts are the tokenizer conformance strings and the synthetic corpus's
// lines: what derived tokenizers must encode as the originals do.
func texts(t testing.TB) []string {
	t.Helper()
	f, err := os.Open("../tokenizer/testdata/conformance.jsonl")
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
				cfg, gen, err := Config(f)
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
				m, err := OpenModel(path)
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
		m, err := OpenModel(p)
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

// metadataFile writes a GGUF file of kv and no tensors, as a tokenizer's
// keys alone make one.
func metadataFile(t *testing.T, kv []gguf.KV) *gguf.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokenizer.gguf")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := gguf.Write(f, kv, nil, 0); err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Open(path)
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
	kv, err := tokenizerKV(tok, tmpl, checkpoint.GenerationConfig{}, tok.VocabSize())
	if err != nil {
		t.Fatal(err)
	}
	for i := range kv {
		if kv[i].Key == "tokenizer.ggml.pre" && pre != "" {
			kv[i].Value = gguf.StringValue(pre)
		}
	}
	tj, cj, err := TokenizerFiles(metadataFile(t, kv))
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
	for pre, split := range map[string]preSplit{"gpt-2": preSplits["gpt-2"], "smollm": preSplits["smollm"]} {
		t.Run(pre, func(t *testing.T) {
			var doc map[string]any
			if err := json.Unmarshal(data, &doc); err != nil {
				t.Fatal(err)
			}
			doc["normalizer"], doc["pre_tokenizer"] = nil, split.pre
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
