package serve

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"logitscope/internal/engine/ggufmodeltest"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/gguf"
	"logitscope/internal/format/sidecar"
	"logitscope/internal/model/hubquant"
	"logitscope/internal/model/hubquant/hubquanttest"
	"logitscope/internal/model/synth"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
)

func TestModelList(t *testing.T) {
	f := newFixture(t)
	v, err := variant.Open(variant.DefaultDir(f.model, "q4"))
	if err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{"/models/", "/models"} {
		w := f.do(t, url, nil)
		if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s: status %d, Content-Type %q", url, w.Code, w.Header().Get("Content-Type"))
		}
		var got []Model
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 {
			t.Fatalf("%d models, want 1 (secret.json is no model): %s", len(got), w.Body)
		}
		m := got[0]
		if m.Name != "tiny" || m.Architecture != "Qwen2ForCausalLM" || m.Vocab != 512 {
			t.Errorf("model %+v", m)
		}
		if len(m.Variants) != 1 || m.Variants[0].Kind != KindVariant || m.Variants[0].Name != "q4" || m.Variants[0].Scheme != "q4" ||
			m.Variants[0].ManifestSHA256 != v.Manifest.Seal || m.Variants[0].Bytes <= 0 {
			t.Errorf("variants %+v, want q4 sealed %s", m.Variants, v.Manifest.Seal)
		}
	}
}

// GGUF files at the top of a model directory are listed as variants of
// kind gguf (name, bytes, sha256, tensors per ggml type) after the
// quantized variants, and their files are listed and served with ranges,
// when they are this checkpoint's: one of another model, one that is no
// GGUF, a hidden one and a symlink out of the directory are not.
func TestModelListGGUF(t *testing.T) {
	f := newFixture(t)
	other := filepath.Join(t.TempDir(), "tiny-qwen3")
	if err := synth.Write(synth.Presets["tiny-qwen3"], other, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	good := map[string]string{
		"tiny-q4.gguf":  ggufmodeltest.Export(t, f.model, "q4", "tiny-q4.gguf"),
		"tiny-f32.GGUF": ggufmodeltest.Export(t, f.model, "f32", "tiny-f32.GGUF"),
	}
	write(t, filepath.Join(f.model, "other.gguf"), string(read(t, ggufmodeltest.Export(t, other, "q4", "x.gguf"))))
	write(t, filepath.Join(f.model, "junk.gguf"), "not a GGUF file at all")
	write(t, filepath.Join(f.model, ".hidden.gguf"), string(read(t, good["tiny-q4.gguf"])))
	if err := os.Symlink(filepath.Join(f.root, "secret.txt"), filepath.Join(f.model, "leak.gguf")); err != nil {
		t.Fatal(err)
	}
	_, warned := f.reload(t)
	got, names, files := f.listed(t)
	if want := []string{"variant:q4", "gguf:tiny-f32.GGUF", "gguf:tiny-q4.gguf"}; !slices.Equal(names, want) {
		t.Fatalf("variants %v, want %v", names, want)
	}
	for _, v := range got.Variants[1:] {
		path := good[v.Name]
		data := read(t, path)
		sum := sha256.Sum256(data)
		if v.SHA256 != hex.EncodeToString(sum[:]) || v.Bytes != int64(len(data)) || v.Scheme != "" || v.ManifestSHA256 != "" {
			t.Errorf("%s: listed %+v; the file has %d bytes, sha256 %x", v.Name, v, len(data), sum)
		}
		gf, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]int{}
		for _, ti := range gf.Tensors {
			want[ti.Type.String()]++
		}
		if !maps.Equal(v.Types, want) {
			t.Errorf("%s: types %v, the file holds %v", v.Name, v.Types, want)
		}
		if fi, ok := files[v.Name]; !ok {
			t.Errorf("%s is not in the files list", v.Name)
		} else {
			checkListedFile(t, f, fi)
		}
		w := f.do(t, "/models/tiny/"+v.Name, map[string]string{"Range": "bytes=0-3"})
		if w.Code != 206 || w.Body.String() != "GGUF" || !strings.Contains(w.Header().Get("Cache-Control"), "immutable") {
			t.Errorf("%s, bytes 0-3: %d %q, Cache-Control %q", v.Name, w.Code, w.Body, w.Header().Get("Cache-Control"))
		}
	}
	for _, bad := range []string{"other.gguf", "junk.gguf", ".hidden.gguf", "leak.gguf"} {
		if _, ok := files[bad]; ok {
			t.Errorf("%s is listed", bad)
		}
	}
	for _, want := range []string{"other.gguf skipped", "general.architecture", "junk.gguf skipped"} {
		if !strings.Contains(strings.Join(warned, "\n"), want) {
			t.Errorf("no warning says %q: %q", want, warned)
		}
	}
}

// Checkpoints under hub/ that a hub tool's layout quantized from this
// model are listed as variants of kind hub (name hub/DIR, its format, its
// files' bytes), after the GGUF files, and their files are listed and
// served; one of another model, a float one, a hidden one and a symlink
// out of the directory are not, and a GGUF file inside one is not served.
func TestModelListHub(t *testing.T) {
	f := newFixture(t)
	opt := hubquant.Options{Bits: 4, GroupSize: 32, Sym: true}
	hub := func(dir string) string { return filepath.Join(f.model, hubquant.Subdir, dir) }
	format := hubquanttest.Write(t, f.model, "gptq", opt, hub("gptq"))
	other := filepath.Join(t.TempDir(), "tiny-llama")
	if err := synth.Write(synth.Presets["tiny-llama"], other, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	hubquanttest.Write(t, other, "gptq", opt, hub("other"))
	hubquanttest.Write(t, f.model, "gptq", opt, hub(".hidden"))
	if err := os.CopyFS(hub("float"), os.DirFS(other)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, hub("leak")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(hub("gptq"), "stray.gguf"), "GGUF")
	_, warned := f.reload(t)
	got, names, files := f.listed(t)
	if want := []string{"variant:q4", "hub:hub/gptq"}; !slices.Equal(names, want) {
		t.Fatalf("variants %v, want %v", names, want)
	}
	v := got.Variants[1]
	var bytes int64
	for _, fi := range files {
		if strings.HasPrefix(fi.Path, "hub/gptq/") {
			bytes += fi.Size
			checkListedFile(t, f, fi)
		}
	}
	hck, err := checkpoint.Open(hub("gptq"))
	if err != nil {
		t.Fatal(err)
	}
	defer hck.Close()
	fp, err := hck.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	if v.Format != format.Name() || v.Bytes != bytes || v.SHA256 != fp {
		t.Errorf("listed %+v; want format %q, its files' %d bytes and its fingerprint %s", v, format.Name(), bytes, fp)
	}
	for _, want := range []string{"hub/gptq/config.json", "hub/gptq/model.safetensors", "hub/gptq/tokenizer.json"} {
		if _, ok := files[want]; !ok {
			t.Errorf("%s is not listed", want)
		}
	}
	for p := range files {
		if strings.HasPrefix(p, "hub/") && !strings.HasPrefix(p, "hub/gptq/") || strings.HasSuffix(p, ".gguf") {
			t.Errorf("%s is listed", p)
		}
	}
	if w := f.do(t, "/models/tiny/hub/gptq/stray.gguf", nil); w.Code != 404 {
		t.Errorf("a GGUF file inside a hub checkpoint: served with %d", w.Code)
	}
	for _, want := range []string{"hub/other skipped", "another model", "hub/float skipped", "no quantization_config"} {
		if !strings.Contains(strings.Join(warned, "\n"), want) {
			t.Errorf("no warning says %q: %q", want, warned)
		}
	}
}

// A variant written with a policy lists it as the quantize flags that
// made it, per-tensor rules included: the page shows it beside the scheme.
func TestModelListPolicy(t *testing.T) {
	f := newFixture(t)
	ck, err := checkpoint.Open(f.model)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	p := &variant.Policy{Keep: `embed_tokens`, Rules: []variant.Rule{{Match: `self_attn\.`, Scheme: "q8"}, {Match: `down_proj`, Scheme: "f32"}}}
	if err := variant.Write(ck, quant.Q4, variant.DefaultDir(f.model, "q4"), variant.Options{Policy: p}); err != nil {
		t.Fatal(err)
	}
	m, err := LoadModel("tiny", f.model, t.Errorf)
	if err != nil {
		t.Fatal(err)
	}
	const want = `--keep "embed_tokens" --as "self_attn\\.=q8" --as "down_proj=f32"`
	if len(m.Variants) != 1 || m.Variants[0].Policy != want {
		t.Fatalf("variants %+v, want q4 with policy %s", m.Variants, want)
	}
}

func TestHealthAndUnknownRoutes(t *testing.T) {
	f := newFixture(t)
	if w := f.do(t, "/healthz", nil); w.Code != 200 || w.Body.String() != "ok" {
		t.Errorf("/healthz: %d %q", w.Code, w.Body)
	}
	if c := f.do(t, "/", nil).Code; c != 404 {
		t.Errorf("/ without -static: %d", c)
	}
}

func TestStatic(t *testing.T) {
	f := newFixture(t)
	dir := t.TempDir()
	write(t, filepath.Join(dir, "index.html"), "<!doctype html>hi")
	write(t, filepath.Join(dir, "app.js"), "console.log(1)")
	srv, err := New(Options{Models: f.srv.list, Static: dir, Logf: f.logf})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	if w := f.do(t, "/", nil); w.Code != 200 || w.Body.String() != "<!doctype html>hi" {
		t.Errorf("/: %d %q", w.Code, w.Body)
	}
	if w := f.do(t, "/static/app.js", nil); w.Code != 200 || w.Header().Get("Cache-Control") != "no-cache" {
		t.Errorf("/static/app.js: %d %v", w.Code, w.Header())
	}
	if c := f.do(t, "/static/../models/secret.json", nil).Code; c != 404 {
		t.Errorf("static traversal: %d", c)
	}
}

// TestModelFiles checks the files list against the directory itself:
// every listed file is served with the listed size and sha256 (its ETag
// too), and what may not be served is not listed.
func TestModelFiles(t *testing.T) {
	f := newFixture(t)
	// More traps: a hidden shard, a stray file in a variant, a variant that
	// fails verification, and an alias inside the directory (served, so
	// listed).
	write(t, filepath.Join(f.model, "variants", "q4", ".partial.bin"), secret)
	write(t, filepath.Join(f.model, "variants", "q4", "README.md"), secret)
	if err := os.MkdirAll(filepath.Join(f.model, "variants", "q9"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(f.model, "variants", "q9", "manifest.json"), `{"s":"`+secret+`"}`)
	write(t, filepath.Join(f.model, "variants", "q9", "shard-00001.bin"), secret)
	if err := os.Symlink("config.json", filepath.Join(f.model, "alias.json")); err != nil {
		t.Fatal(err)
	}
	m, err := LoadModel("tiny", f.model, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Models: []*Model{m}, Logf: f.logf})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = srv
	var got []Model
	if err := json.Unmarshal(f.do(t, "/models/", nil).Body.Bytes(), &got); err != nil || len(got) != 1 {
		t.Fatalf("list: %v, %d models", err, len(got))
	}
	listed := map[string]bool{}
	for i, fi := range got[0].Files {
		listed[fi.Path] = true
		if i > 0 && got[0].Files[i-1].Path >= fi.Path {
			t.Errorf("not sorted: %s before %s", got[0].Files[i-1].Path, fi.Path)
		}
		checkListedFile(t, f, fi)
	}
	for _, want := range []string{"config.json", "tokenizer.json", "model.safetensors", "alias.json",
		"variants/q4/manifest.json", "variants/q4/shard-00001.bin"} {
		if !listed[want] {
			t.Errorf("%s not listed", want)
		}
	}
	for _, hidden := range []string{".hidden.json", "notes.md", "leak.json", "leak.safetensors",
		"variants/q4/shard-99999.bin", "variants/q4/.partial.bin", "variants/q4/README.md",
		"variants/q9/manifest.json", "variants/q9/shard-00001.bin"} {
		if listed[hidden] {
			t.Errorf("%s listed", hidden)
		}
	}
	checkAllListed(t, f.model, listed)
}

// checkListedFile compares one entry with the file on disk and with what
// the server sends for it.
func checkListedFile(t *testing.T, f *fixture, fi ModelFile) {
	t.Helper()
	data := read(t, filepath.Join(f.model, filepath.FromSlash(fi.Path)))
	sum := sha256.Sum256(data)
	if fi.Size != int64(len(data)) || fi.SHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("%s: listed size %d sha256 %s; the file has %d, %x", fi.Path, fi.Size, fi.SHA256, len(data), sum)
	}
	w := f.do(t, "/models/tiny/"+fi.Path, nil)
	if w.Code != 200 || w.Header().Get("ETag") != `"sha256-`+fi.SHA256+`"` {
		t.Errorf("%s: listed but served with %d, ETag %q", fi.Path, w.Code, w.Header().Get("ETag"))
	}
}

// checkAllListed walks the model directory: every file the server serves
// must be listed, so that the page never misses one.
func checkAllListed(t *testing.T, dir string, listed map[string]bool) {
	t.Helper()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if strings.HasPrefix(rel, "variants/q9/") { // refused by variant.Open
			return nil
		}
		if _, ok := modelFileKind(rel); ok && !listed[rel] {
			if f, _, err := openUnder(dir, rel); err == nil {
				f.Close()
				t.Errorf("%s is served but not listed", rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// LoadModel hashes each listed file into fileHashes, so that serving it
// later finds the hash instead of reading the file again.
func TestModelFilesHashedOnce(t *testing.T) {
	f := newFixture(t)
	for _, m := range f.srv.list {
		for _, fi := range m.Files {
			file, st, err := openUnder(m.dir, fi.Path)
			if err != nil {
				t.Fatal(err)
			}
			file.Close()
			fileHashes.mu.Lock()
			e := fileHashes.entries[etagKey{file.Name(), st.Size(), st.ModTime()}]
			fileHashes.mu.Unlock()
			if e == nil || e.sum != fi.SHA256 {
				t.Errorf("%s: not in the ETag cache after LoadModel", fi.Path)
			}
		}
	}
}

// TestStaticTypes: the page's files get fixed content types (a wasm file
// must be application/wasm for WebAssembly.instantiateStreaming) and text
// and wasm are gzipped for clients that take it, but never a range.
func TestStaticTypes(t *testing.T) {
	f := newFixture(t)
	f.withPage(t)
	files := map[string]string{"app.js": "console.log(1)", "ui.css": "p{}", "notes.txt": "hi",
		"k.wgsl": "fn main() {}", "logo.png": "\x89PNG\r\n\x1a\n"}
	for name, data := range files {
		write(t, filepath.Join(f.static, name), data)
	}
	files["engine.wasm"] = wasmBin
	gz := map[string]string{"Accept-Encoding": "gzip"}
	tests := []struct {
		label, name, ctype string
		header             map[string]string
		gzipped            bool
	}{
		{"wasm gzip", "engine.wasm", "application/wasm", gz, true},
		{"wasm plain", "engine.wasm", "application/wasm", nil, false},
		{"wasm range", "engine.wasm", "application/wasm", map[string]string{"Accept-Encoding": "gzip", "Range": "bytes=0-3"}, false},
		{"js", "app.js", "text/javascript; charset=utf-8", gz, true},
		{"css", "ui.css", "text/css; charset=utf-8", gz, true},
		{"txt", "notes.txt", "text/plain; charset=utf-8", gz, true},
		{"wgsl", "k.wgsl", "text/plain; charset=utf-8", gz, true},
		{"png", "logo.png", "image/png", gz, false},
	}
	for _, tc := range tests {
		t.Run(tc.label, func(t *testing.T) {
			w := f.do(t, "/static/"+tc.name, tc.header)
			if got := w.Header().Get("Content-Type"); got != tc.ctype {
				t.Errorf("Content-Type %q, want %q", got, tc.ctype)
			}
			want := files[tc.name]
			switch {
			case tc.gzipped:
				if got := gunzip(t, w); string(got) != want {
					t.Errorf("gzip body differs")
				}
			case w.Header().Get("Content-Encoding") != "":
				t.Errorf("Content-Encoding %q", w.Header().Get("Content-Encoding"))
			case w.Code == 206:
				if w.Body.String() != want[:4] {
					t.Errorf("range body %q", w.Body)
				}
			case w.Body.String() != want:
				t.Errorf("status %d, body differs", w.Code)
			}
		})
	}
}

// A compressed body is made once per content and kept; a file that
// changes gets a new tag and so a new body.
func TestGzipKept(t *testing.T) {
	f := newFixture(t)
	f.withPage(t)
	path := filepath.Join(f.static, "app.js")
	gz := map[string]string{"Accept-Encoding": "gzip"}
	for _, content := range []string{strings.Repeat("console.log(1);\n", 500), strings.Repeat("console.log(22);\n", 400)} {
		write(t, path, content)
		first := f.do(t, "/static/app.js", gz)
		again := f.do(t, "/static/app.js", gz)
		if first.Code != 200 || first.Header().Get("Content-Encoding") != "gzip" {
			t.Fatalf("%d %v", first.Code, first.Header())
		}
		a, b := first.Body.Bytes(), again.Body.Bytes()
		if !bytes.Equal(a, b) || first.Header().Get("Content-Length") != strconv.Itoa(len(a)) {
			t.Errorf("the second response differs or has the wrong length: %v", again.Header())
		}
		if got := string(gunzip(t, first)); got != content {
			t.Errorf("decompressed %d bytes, want the file's %d", len(got), len(content))
		}
	}
}

// The model list says what each model is from its sidecar: a synthetic
// checkpoint (synth.Write writes one) with its ready prompt and panel, a
// directory without one the user's, a broken one the user's with a
// warning. The sidecar itself is neither listed nor served.
func TestModelListSidecar(t *testing.T) {
	f := newFixture(t)
	root := filepath.Join(f.root, "models")
	for name, note := range map[string]string{"plain": "", "bad": `{"nature":"real"}`} {
		dir := filepath.Join(root, name)
		if err := synth.Write(synth.Presets["tiny"], dir, synth.Options{}); err != nil {
			t.Fatal(err)
		}
		os.Remove(filepath.Join(dir, sidecar.File))
		if note != "" {
			write(t, filepath.Join(dir, sidecar.File), note)
		}
	}
	var warned []string
	models, err := ScanModels(root, func(format string, args ...any) { warned = append(warned, fmt.Sprintf(format, args...)) })
	if err != nil {
		t.Fatal(err)
	}
	want := synth.Note(synth.Presets["tiny"], 0)
	got := map[string]*Model{}
	for _, m := range models {
		got[m.Name] = m
		for _, fi := range m.Files {
			if fi.Path == sidecar.File {
				t.Errorf("%s lists its sidecar among the files to fetch", m.Name)
			}
		}
	}
	for _, tc := range []struct {
		name                         string
		nature, about, prompt, panel string
	}{
		{"tiny", sidecar.Synthetic, want.About, want.Prompt, want.Panel},
		{"plain", sidecar.User, "", "", ""},
		{"bad", sidecar.User, "", "", ""},
	} {
		m := got[tc.name]
		if m == nil {
			t.Fatalf("no model %s", tc.name)
		}
		if m.Nature != tc.nature || m.About != tc.about || m.Prompt != tc.prompt || m.Panel != tc.panel {
			t.Errorf("%s: nature %q about %q prompt %q panel %.30q; want %q %q %q %.30q", tc.name,
				m.Nature, m.About, m.Prompt, m.Panel, tc.nature, tc.about, tc.prompt, tc.panel)
		}
	}
	if want.Prompt == "" || want.Panel == "" || !strings.Contains(want.About, "random weights") {
		t.Errorf("synth's note has no ready prompt, panel or word on its weights: %+v", want)
	}
	if len(warned) != 1 || !strings.Contains(warned[0], filepath.Join("bad", sidecar.File)) {
		t.Errorf("warnings %q, want one naming bad's sidecar", warned)
	}
	if w := f.do(t, "/models/tiny/"+sidecar.File, nil); w.Code != 404 {
		t.Errorf("the sidecar is served: %d", w.Code)
	}
}

// A FIFO where serve expects a file (a GGUF, the sidecar, config.json)
// is skipped or refused at once: opening one waits for a writer, which
// hung serve at startup, deaf to SIGTERM.
func TestLoadModelFIFO(t *testing.T) {
	for _, name := range []string{"m-Q4_K_M.gguf", "logitscope.json", "config.json"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "m")
			if err := synth.Write(synth.Presets["tiny"], dir, synth.Options{}); err != nil {
				t.Fatal(err)
			}
			os.Remove(filepath.Join(dir, name))
			if err := syscall.Mkfifo(filepath.Join(dir, name), 0o644); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				_, err := LoadModel("m", dir, t.Logf)
				done <- err
			}()
			select {
			case err := <-done:
				if name == "config.json" && (err == nil || !strings.Contains(err.Error(), "not a regular file")) {
					t.Fatalf("a FIFO config.json: %v", err)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("LoadModel still waits on the FIFO after 20 s")
			}
		})
	}
}
