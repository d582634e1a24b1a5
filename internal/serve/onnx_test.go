package serve

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/engine/onnxmodeltest"
	"logitscope/internal/model/synth"
)

// TestModelListONNX lists the exports under onnx/ that compute the model
// (kind onnx, their sha256, size, length and variant) and serves them;
// another model's export, a file that is no export, a hidden one and a
// link out of the directory are neither listed nor served, the first two
// with a warning naming them.
func TestModelListONNX(t *testing.T) {
	f := newFixture(t)
	dir := filepath.Join(f.model, ONNXDir)
	onnxmodeltest.Export(t, f.model, "q4", filepath.Join(dir, "q4.onnx"), 40)
	onnxmodeltest.Export(t, f.model, "f32", filepath.Join(dir, "f32.onnx"), 24)
	other := filepath.Join(t.TempDir(), "tiny-llama")
	if err := synth.Write(synth.Presets["tiny-llama"], other, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	onnxmodeltest.Export(t, other, "f32", filepath.Join(dir, "other.onnx"), 16)
	write(t, filepath.Join(dir, "junk.onnx"), "not an ONNX model")
	write(t, filepath.Join(dir, ".hidden.onnx"), string(read(t, filepath.Join(dir, "q4.onnx"))))
	if err := os.Symlink(filepath.Join(f.root, "secret.txt"), filepath.Join(dir, "leak.onnx")); err != nil {
		t.Fatal(err)
	}
	_, warned := f.reload(t)
	got, names, files := f.listed(t)
	if want := []string{"variant:q4", "onnx:onnx/f32.onnx", "onnx:onnx/q4.onnx"}; !slices.Equal(names, want) {
		t.Fatalf("variants %v, want %v", names, want)
	}
	for _, c := range []struct {
		name, scheme string
		maxLen       int
	}{{"onnx/f32.onnx", "f32", 24}, {"onnx/q4.onnx", "q4", 40}} {
		i := slices.IndexFunc(got.Variants, func(v VariantInfo) bool { return v.Name == c.name })
		v := got.Variants[i]
		data := read(t, filepath.Join(f.model, c.name))
		sum := sha256.Sum256(data)
		if v.SHA256 != hex.EncodeToString(sum[:]) || v.Bytes != int64(len(data)) || v.Scheme != c.scheme || v.MaxLen != c.maxLen {
			t.Errorf("%s: listed %+v; want %d bytes, sha256 %x, scheme %s, max_len %d", c.name, v, len(data), sum, c.scheme, c.maxLen)
		}
		if fi, ok := files[c.name]; !ok {
			t.Errorf("%s is not in the files list", c.name)
		} else {
			checkListedFile(t, f, fi)
		}
		w := f.do(t, "/models/tiny/"+c.name, nil)
		if w.Code != 200 || w.Body.Len() != len(data) || !strings.Contains(w.Header().Get("Cache-Control"), "immutable") {
			t.Errorf("GET %s: %d, %d bytes, Cache-Control %q", c.name, w.Code, w.Body.Len(), w.Header().Get("Cache-Control"))
		}
	}
	for _, bad := range []string{"other.onnx", "junk.onnx", ".hidden.onnx", "leak.onnx"} {
		if _, ok := files[ONNXDir+"/"+bad]; ok {
			t.Errorf("%s is listed", bad)
		}
		if w := f.do(t, "/models/tiny/onnx/"+bad, nil); bad != "other.onnx" && bad != "junk.onnx" && w.Code != 404 {
			t.Errorf("GET onnx/%s: %d, want 404", bad, w.Code)
		}
	}
	for _, want := range []string{"onnx/other.onnx skipped: exported from a LlamaForCausalLM", "onnx/junk.onnx skipped", "not an ONNX model"} {
		if !strings.Contains(strings.Join(warned, "\n"), want) {
			t.Errorf("no warning says %q: %q", want, warned)
		}
	}
}

// TestModelListONNXStale refuses an export of an older variant's
// checkpoint: its fingerprint is not the one the model's variants name.
func TestModelListONNXStale(t *testing.T) {
	f := newFixture(t)
	stale := filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(synth.Presets["tiny"], stale, synth.Options{Seed: 7}); err != nil {
		t.Fatal(err)
	}
	onnxmodeltest.Export(t, stale, "f32", filepath.Join(f.model, ONNXDir, "f32.onnx"), 16)
	m, warned := f.reload(t)
	if slices.ContainsFunc(m.Variants, func(v VariantInfo) bool { return v.Kind == KindONNX }) {
		t.Errorf("the stale export is listed: %+v", m.Variants)
	}
	if !strings.Contains(strings.Join(warned, "\n"), "onnx/f32.onnx skipped: exported from checkpoint") {
		t.Errorf("warnings %q", warned)
	}
}

// TestORTFiles serves onnxruntime-web's scripts and wasm under /ort/ from
// Options.ORT with the types a module import and instantiateStreaming
// need, and nothing else of its directory; without ORT, /ort/ is a 404.
func TestORTFiles(t *testing.T) {
	f := newFixture(t)
	dist := filepath.Join(f.root, "dist")
	os.Mkdir(dist, 0o755)
	os.Mkdir(filepath.Join(dist, "sub"), 0o755)
	write(t, filepath.Join(dist, "ort.min.js"), "var ort={};")
	write(t, filepath.Join(dist, "ort-wasm.mjs"), "export default 1;")
	write(t, filepath.Join(dist, "ort-wasm.wasm"), wasmBin)
	write(t, filepath.Join(dist, "README.md"), secret)
	write(t, filepath.Join(dist, "sub", "x.js"), secret)
	if err := os.Symlink(filepath.Join(f.root, "secret.txt"), filepath.Join(dist, "leak.js")); err != nil {
		t.Fatal(err)
	}
	for _, ort := range []string{"", dist} {
		srv, err := New(Options{Models: f.srv.list, Logf: f.logf, ORT: ort})
		if err != nil {
			t.Fatal(err)
		}
		f.srv = srv
		for _, c := range []struct{ path, ctype string }{
			{"/ort/ort.min.js", "text/javascript; charset=utf-8"},
			{"/ort/ort-wasm.mjs", "text/javascript; charset=utf-8"},
			{"/ort/ort-wasm.wasm", "application/wasm"},
			{"/ort/README.md", ""}, {"/ort/sub/x.js", ""}, {"/ort/leak.js", ""}, {"/ort/../secret.txt", ""},
		} {
			w := f.do(t, c.path, nil)
			if ok := c.ctype != "" && ort != ""; ok != (w.Code == 200) || ok && w.Header().Get("Content-Type") != c.ctype {
				t.Errorf("ORT %q: GET %s: %d %q", ort, c.path, w.Code, w.Header().Get("Content-Type"))
			}
		}
	}
	if _, err := New(Options{ORT: filepath.Join(f.root, "nowhere")}); err == nil || !strings.Contains(err.Error(), "onnxruntime-web") {
		t.Errorf("a missing ORT directory: %v", err)
	}
}
