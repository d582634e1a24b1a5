package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/engine/ggufmodeltest"
	"logitscope/internal/format/gguf"
	"logitscope/internal/model/ggufmodel"
	"logitscope/internal/model/synth"
)

// ggufCase is a model served with a GGUF file beside its config.json.
type ggufCase struct {
	model string // the preset, served under its name
	file  string // the GGUF's name in the model dir
	dir   string
}

// ggufModels writes tiny with its q4 variant exported as GGUF (Q4_0, bit
// for bit), and, when the llama.cpp harness is installed, small-llama3
// with llama.cpp's own Q4_K_M of it (K-quants on every matrix: Q4_K and
// Q6_K decoded by ggml.wgsl in the browser). Both keep their q4 variant,
// for timing the page on the GGUF against it.
func ggufModels(t *testing.T) []ggufCase {
	t.Helper()
	tiny := familyModel(t, "tiny")
	cases := []ggufCase{{"tiny", "tiny-q4.gguf", tiny}}
	ggufmodeltest.Export(t, tiny, "q4", "tiny-q4.gguf")
	// A subtest, so that without the harness only it skips; the model
	// lives in the test's own temporary dir.
	outer := t
	t.Run("llama.cpp", func(t *testing.T) {
		dir := familyModel(outer, "small-llama3")
		ggufmodeltest.LlamaCpp(t, dir, "Q4_K_M", "small-llama3-Q4_K_M.gguf")
		cases = append(cases, ggufCase{"small-llama3", "small-llama3-Q4_K_M.gguf", dir})
	})
	return cases
}

// fileGGUF is what the document must say of a GGUF file on disk.
func fileGGUF(t *testing.T, p string, local bool) snapshot.GGUF {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]int{}
	for _, ti := range f.Tensors {
		types[ti.Type.String()]++
	}
	sum := sha256.Sum256(data)
	return snapshot.GGUF{Name: filepath.Base(p), SHA256: hex.EncodeToString(sum[:]), Bytes: int64(len(data)), Types: types, Local: local}
}

// checkGGUFSide checks the document's test side against the file, and
// that the page's header names it with its type mix.
func checkGGUFSide(t *testing.T, b *Browser, doc *snapshot.Doc, want snapshot.GGUF) {
	t.Helper()
	g := doc.Test.GGUF
	if g == nil || g.Name != want.Name || g.SHA256 != want.SHA256 || g.Bytes != want.Bytes || g.Local != want.Local || !maps.Equal(g.Types, want.Types) {
		t.Fatalf("the document's test side %+v (label %q), want %+v", g, doc.Test.Label, want)
	}
	if doc.Test.Label != want.Name || doc.Ref.GGUF != nil {
		t.Errorf("labels %q / %q, ref GGUF %+v", doc.Ref.Label, doc.Test.Label, doc.Ref.GGUF)
	}
	header := Eval[string](b, `(document.querySelector("#test-gguf") || {innerText: ""}).innerText`)
	mix := ggufmodel.Mix(want.Types)
	if !strings.Contains(header, mix) || strings.Contains(header, "local file") != want.Local {
		t.Errorf("the header says %q, want the type mix %q (local %v)", header, mix, want.Local)
	}
}

// TestUIGGUF serves models with a GGUF file beside them and opens an
// autorun link f32 against the GGUF, greedy, on WebGPU (SwiftShader) and
// on the CPU path: the document names the file (sha256, type mix) and the
// header shows it, and both sides' tokens and logits match engine.wasm's
// under wazero on the same requests (within relTol on lavapipe, bit for
// bit on the CPU path). The same link with the q4 variant is timed
// beside it.
func TestUIGGUF(t *testing.T) {
	RequireUI(t)
	cases := ggufModels(t)
	var models []SiteModel
	for _, c := range cases {
		models = append(models, SiteModel{c.model, c.dir})
	}
	site := StartSite(t, models...)
	mod := Wazero(t, site)
	for _, c := range cases {
		t.Run(c.model, func(t *testing.T) {
			want := fileGGUF(t, filepath.Join(c.dir, c.file), false)
			b := NewBrowser(t)
			for _, device := range []string{"gpu", "cpu"} {
				t.Run(device, func(t *testing.T) {
					spec := snapshot.NewSpec()
					spec.Model, spec.Prompt, spec.MaxNew, spec.Device = c.model, "Which file is this?", 8, device
					var timing [2]snapshot.Timing
					for i, test := range []string{c.file, "q4"} {
						spec.Test = test
						q := spec.Query()
						q.Set("autorun", "1")
						if state := b.Open(site.URL+"/?"+q.Encode(), 3*time.Minute); state != "done" {
							b.Screenshot("error")
							t.Fatalf("%s: the run ended in %q: %s", test, state, Eval[string](b, `String(window.logitscope.error)`))
						}
						doc, _ := pageDoc(t, b)
						timing[i] = doc.Timing
						if i > 0 {
							break
						}
						b.Screenshot("gguf")
						checkGGUFSide(t, b, doc, want)
						lg := Eval[pageLogits](b, `window.logitscope.logits`)
						if device == "gpu" {
							compareWithWazero(t, mod, nativeDevice(t), c.dir, doc, lg, relTol)
						} else {
							compareWithWazero(t, mod, nil, c.dir, doc, lg, 0)
						}
					}
					t.Logf("%s on %s: open %.0f ms, run %.0f ms; q4 variant: open %.0f ms, run %.0f ms",
						c.file, device, timing[0].OpenTest, timing[0].TestRun, timing[1].OpenTest, timing[1].TestRun)
				})
			}
		})
	}
}

// A GGUF side fetches config, generation config, tokenizer files and the
// GGUF: not the safetensors (several times a quantized file's size), not
// a variant's shards, not another GGUF. Checked on a fresh profile
// (nothing in Cache Storage) through the bridge, opening only that side.
func TestUIGGUFFetchesItsFiles(t *testing.T) {
	RequireUI(t)
	dir := familyModel(t, "tiny")
	ggufmodeltest.Export(t, dir, "q4", "tiny-q4.gguf")
	ggufmodeltest.Export(t, dir, "f32", "tiny-f32.gguf")
	site := StartSite(t, SiteModel{"m", dir})
	b := NewBrowser(t)
	ctx, cancel := context.WithTimeout(b.Ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/?autorun=0"), chromedp.WaitVisible(chromedp.CSS("#run-form"))); err != nil {
		t.Fatal(err)
	}
	before := len(site.Requests())
	got := Eval[map[string]any](b, `(async () => {
  const br = new LogitscopeBridge();
  const o = await br.open({model: "m", variant: "tiny-q4.gguf", capacity: 16, device: "cpu"});
  const r = await br.run({mode: "greedy", prompt_ids: [1, 2, 3], max_new: 2, stops: []});
  br.terminate();
  return {bytes: o.bytes, rows: r.result.rows};
})()`)
	var fetched []string
	for _, r := range site.Requests()[before:] {
		if name, ok := strings.CutPrefix(r.Path, "/models/m/"); ok {
			fetched = append(fetched, name)
		}
	}
	slices.Sort(fetched)
	want := []string{"config.json", "generation_config.json", "tiny-q4.gguf", "tokenizer.json", "tokenizer_config.json"}
	if !slices.Equal(fetched, want) {
		t.Errorf("opening the GGUF fetched %v, want %v", fetched, want)
	}
	var size int64
	for _, f := range want {
		st, err := os.Stat(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		size += st.Size()
	}
	if int64(got["bytes"].(float64)) != size || got["rows"].(float64) != 2 {
		t.Errorf("open held %v bytes (want %d, the files above), run gave %v rows", got["bytes"], size, got["rows"])
	}
}

// TestUILocalGGUF runs a GGUF file from "this computer": the model is
// served without it, the user chooses it in the form's file input, and
// the worker reads it where it lies. A link naming a local file cannot
// carry it: opened with autorun, the page asks for the file and runs once
// it is chosen. The document names the file (sha256, type mix, local),
// its logits match engine.wasm's under wazero with the file beside the
// model (on WebGPU within relTol, where gpu.js uploads the tensors from
// the File; on the CPU path bit for bit), no request carries the file's
// bytes or names it, and the shared snapshot reopens without the file (it
// holds the logits, not the file).
func TestUILocalGGUF(t *testing.T) {
	RequireUI(t)
	dir := familyModel(t, "tiny")
	site := StartSite(t, SiteModel{"m", dir})
	mod := Wazero(t, site)
	disk := t.TempDir() // the user's disk
	file := filepath.Join(disk, "tiny-q4.gguf")
	if err := os.Rename(ggufmodeltest.Export(t, dir, "q4", "tiny-q4.gguf"), file); err != nil {
		t.Fatal(err)
	}
	// The reference: the model with the file among its files.
	wazeroDir := filepath.Join(t.TempDir(), "m")
	if err := os.CopyFS(wazeroDir, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(file, filepath.Join(wazeroDir, "tiny-q4.gguf")); err != nil {
		t.Fatal(err)
	}
	want := fileGGUF(t, file, true)

	spec := snapshot.NewSpec()
	spec.Model, spec.Test, spec.Prompt, spec.MaxNew = "m", snapshot.LocalPrefix+"tiny-q4.gguf", "Read me from disk.", 8
	b := NewBrowser(t)
	ctx, cancel := context.WithTimeout(b.Ctx, 5*time.Minute)
	defer cancel()
	// run opens the link on device, which asks for the file; once it is
	// chosen the run starts.
	run := func(t *testing.T, device string) (*snapshot.Doc, []byte) {
		t.Helper()
		spec.Device = device
		q := spec.Query()
		q.Set("autorun", "1")
		if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/?"+q.Encode()), chromedp.WaitVisible(chromedp.CSS("#local-test-note"))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // autorun would have started by now
		note := Eval[string](b, `document.querySelector("#local-test-note").innerText`)
		if state := Eval[string](b, `String(document.body.dataset.state)`); state != "idle" || !strings.Contains(note, "choose your copy") {
			t.Fatalf("a link naming a local file: state %q, note %q; want idle and a request for the file", state, note)
		}
		b.Screenshot("asks-for-file")
		if err := chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.CSS(`input[name="local-test"]`), []string{file})); err != nil {
			t.Fatal(err)
		}
		state, err := b.WaitState(3*time.Minute, "done", "error")
		if err != nil || state != "done" {
			b.Screenshot("error")
			t.Fatalf("after choosing the file: %q, %v: %s", state, err, Eval[string](b, `String(window.logitscope.error)`))
		}
		b.Screenshot("local-" + device)
		doc, raw := pageDoc(t, b)
		checkGGUFSide(t, b, doc, want)
		if u := Eval[string](b, `location.search`); !strings.Contains(u, "test=local%3Atiny-q4.gguf") {
			t.Errorf("the URL does not name the local file: %s", u)
		}
		return doc, raw
	}
	t.Run("gpu", func(t *testing.T) {
		doc, _ := run(t, "gpu")
		compareWithWazero(t, mod, nativeDevice(t), wazeroDir, doc, Eval[pageLogits](b, `window.logitscope.logits`), relTol)
	})
	var raw []byte
	t.Run("cpu", func(t *testing.T) {
		var doc *snapshot.Doc
		doc, raw = run(t, "cpu")
		compareWithWazero(t, mod, nil, wazeroDir, doc, Eval[pageLogits](b, `window.logitscope.logits`), 0)
	})
	if raw == nil {
		return // the share below starts from the CPU run
	}

	// Share: the snapshot holds the logits, so it reopens without the file.
	shared := shareLink(t, b)
	b2 := reopenShared(t, shared, raw)
	if h := Eval[string](b2, `document.querySelector("#test-gguf").innerText`); !strings.Contains(h, "local file, not uploaded") {
		t.Errorf("the reopened header says %q", h)
	}
	// Rerunning it needs the file: the form asks for it.
	if n := Eval[string](b2, `(document.querySelector("#local-test-note") || {innerText: ""}).innerText`); !strings.Contains(n, "choose your copy") {
		t.Errorf("the reopened form's local file note: %q", n)
	}

	// Nothing of the file reached the server: no request names it, and no
	// request body (the shared snapshot is the only one) holds any of 64
	// windows of its bytes.
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var uploads int
	for _, r := range site.Requests() {
		if strings.Contains(r.Path, ".gguf") {
			t.Errorf("%s %s names a GGUF file", r.Method, r.Path)
		}
		if len(r.Body) == 0 {
			continue
		}
		uploads++
		if r.Method != "POST" || r.Path != "/api/runs" {
			t.Errorf("%s %s sent %d bytes", r.Method, r.Path, len(r.Body))
		}
		for i := range 64 {
			at := i * (len(data) - 32) / 63
			if bytes.Contains(r.Body, data[at:at+32]) {
				t.Fatalf("%s %s carries the file's bytes at offset %d", r.Method, path.Clean(r.Path), at)
			}
		}
	}
	if uploads != 1 {
		t.Errorf("%d requests with a body, want 1 (the shared snapshot)", uploads)
	}
}

// A local file that cannot run says why, in words: one that is no GGUF in
// the form, and an autorun link does not start (Run then fails naming
// the side); another model's GGUF when the engine opens it.
func TestUILocalGGUFRefused(t *testing.T) {
	RequireUI(t)
	dir := familyModel(t, "tiny")
	site := StartSite(t, SiteModel{"m", dir})
	disk := t.TempDir()
	junk := filepath.Join(disk, "junk.gguf")
	if err := os.WriteFile(junk, []byte("this is not a GGUF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(disk, "tiny-qwen3")
	if err := synth.Write(synth.Presets["tiny-qwen3"], other, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	qwen3 := ggufmodeltest.Export(t, other, "q4", "qwen3.gguf")
	for _, c := range []struct {
		name, file, note, err string
	}{
		{"no GGUF", junk, "junk.gguf: not a GGUF file", "test side: gguf: junk.gguf: not a GGUF file"},
		{"another model", qwen3, "Q4_0", `general.architecture is "qwen3"; the checkpoint is Qwen2ForCausalLM`},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec := snapshot.NewSpec()
			spec.Model, spec.Test, spec.Prompt, spec.MaxNew, spec.Device = "m", snapshot.LocalPrefix+filepath.Base(c.file), "Hi", 2, "cpu"
			q := spec.Query()
			q.Set("autorun", "1")
			b := NewBrowser(t)
			ctx, cancel := context.WithTimeout(b.Ctx, 3*time.Minute)
			defer cancel()
			if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/?"+q.Encode()), chromedp.WaitVisible(chromedp.CSS(`input[name="local-test"]`)),
				chromedp.SetUploadFiles(chromedp.CSS(`input[name="local-test"]`), []string{c.file})); err != nil {
				t.Fatal(err)
			}
			// The header is read in the background: wait for its note.
			note := Eval[string](b, `(async () => { for (let i = 0; i < 300; i++) {
  const n = document.querySelector("#local-test-note").innerText;
  if (/gguf:|Q4_0/.test(n)) return n;
  await new Promise((r) => setTimeout(r, 20)); } return "(no note)"; })()`)
			if !strings.Contains(note, c.note) {
				t.Errorf("the form's note %q, want it to say %q", note, c.note)
			}
			if c.name == "no GGUF" {
				Eval[bool](b, `(document.querySelector("#run").click(), true)`)
			}
			state, err := b.WaitState(2*time.Minute, "error", "done")
			if err != nil || state != "error" {
				t.Fatalf("state %q, %v; want error", state, err)
			}
			msg := Eval[string](b, `String(window.logitscope.error)`)
			t.Logf("note %q; error %q", note, msg)
			if !strings.Contains(msg, c.err) || strings.Contains(msg, "\n") {
				t.Errorf("the error %q, want one line saying %q", msg, c.err)
			}
		})
	}
}
