package hub

import (
	"path"
	"slices"
	"strings"
	"testing"
)

func TestPick(t *testing.T) {
	checkpoint := []string{".gitattributes", "README.md", "config.json", "generation_config.json", "merges.txt", "model.safetensors",
		"tokenizer.json", "tokenizer_config.json", "vocab.json", "model-Q4_K_M.gguf"}
	for _, c := range []struct {
		name  string
		files []string
		file  string
		want  []string
		err   string
	}{
		{"checkpoint", checkpoint, "", []string{"config.json", "tokenizer.json", "generation_config.json", "tokenizer_config.json", "model.safetensors"}, ""},
		{"sharded, no optional files", []string{"config.json", "tokenizer.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}, "",
			[]string{"config.json", "tokenizer.json", "model.safetensors.index.json"}, ""},
		{"named GGUF beside a checkpoint", checkpoint, "model-Q4_K_M.gguf", []string{"model-Q4_K_M.gguf"}, ""},
		{"only GGUF", []string{"README.md", "m-Q8_0.gguf"}, "", []string{"m-Q8_0.gguf"}, ""},
		{"several GGUF", []string{"m-Q8_0.gguf", "m-Q4_0.gguf"}, "", nil, "holds 2 GGUF files and no safetensors checkpoint: name one: hf:o/m/FILE.gguf (its GGUF files: m-Q4_0.gguf, m-Q8_0.gguf)"},
		{"named file missing", []string{"m-Q8_0.gguf"}, "m-Q4_0.gguf", nil, "hf:o/m has no file m-Q4_0.gguf (its GGUF files: m-Q8_0.gguf)"},
		{"no tokenizer.json", []string{"config.json", "model.safetensors", "tokenizer.model"}, "", nil, "has no tokenizer.json"},
		{"nothing", []string{"config.json", "pytorch_model.bin"}, "", nil, "holds neither a checkpoint"},
	} {
		got, err := Pick("o/m", c.files, c.file)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: Pick = %v, %v; want an error saying %q", c.name, got, err, c.err)
		case c.err == "" && (err != nil || !slices.Equal(got, c.want)):
			t.Errorf("%s: Pick = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

func TestShards(t *testing.T) {
	got, err := Shards("o/m", []byte(`{"weight_map": {"a": "model-2.safetensors", "b": "model-1.safetensors", "c": "model-2.safetensors"}}`))
	if err != nil || !slices.Equal(got, []string{"model-1.safetensors", "model-2.safetensors"}) {
		t.Errorf("Shards = %v, %v", got, err)
	}
	if _, err := Shards("o/m", []byte(`{"weight_map": {"a": "../x.safetensors"}}`)); err == nil || !strings.Contains(err.Error(), "hf:o/m/model.safetensors.index.json") {
		t.Errorf("a shard outside the repo: %v", err)
	}
}

func TestCheck(t *testing.T) {
	data := []byte("hello\n")
	for _, c := range []struct {
		etag string
		size int64
		err  string
	}{
		{"5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03", 6, ""}, // sha256
		{"ce013625030ba8dba906f756967f9e9ca394464a", 6, ""},                         // git hash-object
		{"5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be04", 6, "f: sha256 of the download is 5891b5b5"},
		{"ce013625030ba8dba906f756967f9e9ca394464b", 6, "f: git blob sha1 of the download is ce01362"},
		{"5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03", 7, "f: downloaded 6 bytes, the hub says 7"},
		{"mirror-etag", 6, ""},
	} {
		chk := NewCheck("f", c.etag, c.size)
		chk.Write(data)
		err := chk.Verify()
		if c.err == "" && err != nil || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("etag %s size %d: %v; want %q", c.etag, c.size, err, c.err)
		}
	}
}

// Names from the hub are paths the cache writes and links: anything but
// a plain path inside the repo is refused, and shown quoted.
func TestCheckName(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"model.safetensors", true},
		{"sub/dir/m-Q4_K_M.gguf", true},
		{"../../tmp/x/PWNED.gguf", false},
		{"a/../../b.gguf", false},
		{"/etc/passwd.gguf", false},
		{`..\x.gguf`, false},
		{"./m.gguf", false},
		{"a//m.gguf", false},
		{"", false},
		{"\x1b[31mred\x1b[0m.gguf", false},
		{"m.gguf\r\nforged line", false},
		{"m\xff.gguf", false},
	} {
		if err := CheckName("o/m", c.name); (err == nil) != c.ok {
			t.Errorf("%q: %v", c.name, err)
		}
	}
	_, err := Pick("o/m", []string{"../../tmp/x/PWNED.gguf"}, "")
	if err == nil || !strings.Contains(err.Error(), `"../../tmp/x/PWNED.gguf": not a plain path`) {
		t.Errorf("a repo whose only GGUF climbs out of the cache: %v", err)
	}
	_, err = Pick("o/m", []string{"a.gguf", "\x1b[2Jb.gguf"}, "")
	if err == nil || strings.Contains(err.Error(), "\x1b") || !strings.Contains(err.Error(), `"\x1b[2Jb.gguf"`) {
		t.Errorf("a name with an escape, listed in an error: %v", err)
	}
	for _, index := range []string{
		`{"weight_map": {"a": "model.safetensors.index.json"}}`,
		`{"weight_map": {"a": "other.index.json", "b": "model-1.safetensors"}}`,
	} {
		if _, err := Shards("o/m", []byte(index)); err == nil || !strings.Contains(err.Error(), "not a .safetensors file") {
			t.Errorf("an index naming %s: %v", index, err)
		}
	}
}

// Whatever names and index the hub answers with, what Pick and Shards
// return are plain paths inside the repo: nothing the cache would write
// outside it, and no index among the shards.
func FuzzPickNames(f *testing.F) {
	f.Add("config.json\ntokenizer.json\nmodel.safetensors.index.json", `{"weight_map": {"a": "model-1.safetensors"}}`)
	f.Add("../../x/PWNED.gguf", `{"weight_map": {"a": "model.safetensors.index.json"}}`)
	f.Add("a.gguf\n\x1b[2Jb.gguf", `{"weight_map": {"a": "../m.safetensors"}}`)
	f.Fuzz(func(t *testing.T, names, index string) {
		check := func(what string, got []string) {
			for _, n := range got {
				if CheckName("o/m", n) != nil || strings.Contains(n, "..") && path.Clean(n) != n {
					t.Fatalf("%s returned %q", what, n)
				}
			}
		}
		if got, err := Pick("o/m", strings.Split(names, "\n"), ""); err == nil {
			check("Pick", got)
		}
		if got, err := Shards("o/m", []byte(index)); err == nil {
			check("Shards", got)
			for _, n := range got {
				if n == IndexFile || !strings.HasSuffix(n, ".safetensors") {
					t.Fatalf("Shards returned %q", n)
				}
			}
		}
	})
}
