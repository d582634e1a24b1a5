package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/engine/ggufmodeltest"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/safetensors"
	"logitscope/internal/model/synth"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
)

// writeFolder writes preset's checkpoint into disk/name as a Hugging Face
// folder on the user's disk: its safetensors in shards files (more than
// one: model-0000i-of-0000n.safetensors and model.safetensors.index.json,
// as transformers saves a large model), its q4 variant (variants/q4) and,
// beside config.json, the q4 variant exported as GGUF (NAME-q4.gguf). It
// returns the folder and its checkpoint fingerprint.
func writeFolder(t *testing.T, disk, name, preset string, shards int) (string, string) {
	t.Helper()
	dir := filepath.Join(disk, name)
	if err := synth.Write(synth.Presets[preset], dir, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	if shards > 1 {
		shard(t, dir, shards)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if _, err := variant.Ensure(ck, quant.Q4, nil); err != nil {
		t.Fatal(err)
	}
	fp, err := ck.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	ggufmodeltest.Export(t, dir, "q4", name+"-q4.gguf")
	return dir, fp
}

// shard splits dir's model.safetensors into n files and an index, as
// transformers' save_pretrained lays out a model past its shard size.
func shard(t *testing.T, dir string, n int) {
	t.Helper()
	single := filepath.Join(dir, "model.safetensors")
	f, err := safetensors.Open(single)
	if err != nil {
		t.Fatal(err)
	}
	infos := f.Tensors()
	weightMap := map[string]string{}
	var total int64
	for i := range n {
		file := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, n)
		var ts []safetensors.Tensor
		for _, info := range infos[i*len(infos)/n : (i+1)*len(infos)/n] {
			raw, err := f.ReadRaw(info.Name)
			if err != nil {
				t.Fatal(err)
			}
			ts = append(ts, safetensors.Tensor{Name: info.Name, DType: info.DType, Shape: info.Shape, Data: raw})
			weightMap[info.Name] = file
			total += int64(len(raw))
		}
		if err := safetensors.WriteFile(filepath.Join(dir, file), ts, map[string]string{"format": "pt"}); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	index, err := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": total}, "weight_map": weightMap})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), index, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(single); err != nil {
		t.Fatal(err)
	}
}

// chooseFolder sets the page's model folder input to dir, as a user
// choosing it in the browser's folder picker: DOM.setFileInputFiles with
// the directory's path on a webkitdirectory input makes Chromium list the
// directory itself (recursively, each File's webkitRelativePath
// "NAME/path/inside", links left out), as its picker does.
func chooseFolder(ctx context.Context, dir string) error {
	return chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.CSS(`input[name="local-model"]`), []string{dir}))
}

// TestUILocalFolder runs Hugging Face folders from "this computer": the
// server serves only the demo, and the user chooses the model's folder in
// the form's folder input; the worker reads its Files where they lie and
// the page reads its config, tokenizer, chat template, manifests and GGUF
// headers from them. Each run opens an autorun link naming the folder,
// which asks for it and runs once it is chosen, f32 against the q4
// variant in the folder, against the GGUF beside config.json, and against
// a GGUF file chosen by itself (the link names it too), on WebGPU and on
// the CPU path: both sides' tokens and logits match
// engine.wasm's under wazero on the folder (within relTol on lavapipe, bit
// for bit on the CPU path), the document names the folder with its
// checkpoint fingerprint (equal to checkpoint.Fingerprint's: taken from
// the verified manifest when a side is q4, hashed in the page otherwise)
// and the GGUF with its sha256 and type mix, and a rerun follows the URL
// the run left (model=local:NAME/ and fp=…). A second folder has its
// safetensors in two shards with an index. Nothing of either folder
// reaches the server: no request names a model file, and the only body
// sent, the shared snapshot, holds none of their weights' bytes; the
// snapshot reopens without the folder, whose form then asks for it.
func TestUILocalFolder(t *testing.T) {
	RequireUI(t)
	site := StartSite(t)
	mod := Wazero(t, site)
	disk := t.TempDir() // the user's disk
	tiny, tinyFP := writeFolder(t, disk, "tiny", "tiny", 1)
	sharded, shardedFP := writeFolder(t, disk, "tiny-llama-sharded", "tiny-llama", 2)

	// A GGUF file chosen by itself beside the folder (tiny's f32 export,
	// elsewhere on the disk), and the folder as wazero sees it with that
	// file inside.
	elsewhere := filepath.Join(t.TempDir(), "tiny-f32.gguf")
	if err := os.Rename(ggufmodeltest.Export(t, tiny, "f32", "tiny-f32.gguf"), elsewhere); err != nil {
		t.Fatal(err)
	}
	tinyAndFile := filepath.Join(t.TempDir(), "tiny")
	if err := os.CopyFS(tinyAndFile, os.DirFS(tiny)); err != nil {
		t.Fatal(err)
	}
	if err := copyFile(elsewhere, filepath.Join(tinyAndFile, "tiny-f32.gguf")); err != nil {
		t.Fatal(err)
	}

	b := NewBrowser(t)
	ctx, cancel := context.WithTimeout(b.Ctx, 10*time.Minute)
	defer cancel()
	// run opens link, which names a folder (and a GGUF file, when file is
	// set): the page asks for them, and runs once they are chosen.
	run := func(t *testing.T, link, dir, file string) (*snapshot.Doc, []byte) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#local-model-note"))); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // autorun would have started by now
		note := Eval[string](b, `document.querySelector("#local-model-note").innerText`)
		if state := Eval[string](b, `String(document.body.dataset.state)`); state != "idle" || !strings.Contains(note, "choose your copy of the folder") {
			t.Fatalf("a link naming a local folder: state %q, note %q; want idle and a request for the folder", state, note)
		}
		if err := chooseFolder(ctx, dir); err != nil {
			t.Fatal(err)
		}
		if file != "" {
			time.Sleep(time.Second) // the folder is read: the run still waits for the file
			if state := Eval[string](b, `String(document.body.dataset.state)`); state != "idle" {
				t.Fatalf("with the folder chosen but not the file: state %q, want idle", state)
			}
			if err := chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.CSS(`input[name="local-test"]`), []string{file})); err != nil {
				t.Fatal(err)
			}
		}
		state, err := b.WaitState(3*time.Minute, "done", "error")
		if err != nil || state != "done" {
			b.Screenshot("error")
			t.Fatalf("after choosing the folder: %q, %v: %s", state, err, Eval[string](b, `String(window.logitscope.error)`))
		}
		return pageDoc(t, b)
	}
	var shared []byte   // the last run's document, shared below
	var sharedFP string // and its fingerprint
	for _, c := range []struct {
		dir, fp, test string
		file          string // a GGUF chosen by itself, the test side
		wazero        string // the folder as wazero opens it
		devices       []string
	}{
		{tiny, tinyFP, "q4", "", tiny, []string{"gpu", "cpu"}},
		{tiny, tinyFP, "tiny-q4.gguf", "", tiny, []string{"gpu", "cpu"}},
		{tiny, tinyFP, snapshot.LocalPrefix + "tiny-f32.gguf", elsewhere, tinyAndFile, []string{"cpu"}},
		{sharded, shardedFP, "q4", "", sharded, []string{"cpu"}},
		{sharded, shardedFP, "tiny-llama-sharded-q4.gguf", "", sharded, []string{"gpu"}},
	} {
		name := filepath.Base(c.dir)
		t.Run(name+"/"+c.test, func(t *testing.T) {
			spec := snapshot.NewSpec()
			spec.Model, spec.Test, spec.Prompt, spec.MaxNew = snapshot.LocalPrefix+name+"/", c.test, "Read me from my disk.", 8
			q := spec.Query()
			q.Set("autorun", "1")
			link := site.URL + "/?" + q.Encode()
			for _, device := range c.devices {
				t.Run(device, func(t *testing.T) {
					// The first link is written by hand; the next is the
					// one the last run left in the address bar, with
					// the fingerprint it measured.
					u, err := url.Parse(link)
					if err != nil {
						t.Fatal(err)
					}
					q := u.Query()
					q.Set("device", device)
					u.RawQuery = q.Encode()
					doc, raw := run(t, u.String(), c.dir, c.file)
					b.Screenshot(device)
					if doc.Spec.Model != spec.Model || doc.Spec.Fingerprint != c.fp {
						t.Errorf("the document's model %q, fingerprint %q; want %q, %q (checkpoint.Fingerprint)", doc.Spec.Model, doc.Spec.Fingerprint, spec.Model, c.fp)
					}
					if h := Eval[string](b, `(document.querySelector("#model-local") || {innerText: ""}).innerText`); !strings.Contains(h, "model folder "+name+" · local files, not uploaded · checkpoint fingerprint "+c.fp[:12]) {
						t.Errorf("the header says %q", h)
					}
					switch {
					case c.file != "":
						checkGGUFSide(t, b, doc, fileGGUF(t, c.file, true))
					case strings.HasSuffix(c.test, ".gguf"):
						checkGGUFSide(t, b, doc, fileGGUF(t, filepath.Join(c.dir, c.test), true))
					case doc.Test.GGUF != nil || doc.Ref.GGUF != nil:
						t.Errorf("GGUF sides %+v, %+v", doc.Ref.GGUF, doc.Test.GGUF)
					}
					link = Eval[string](b, `location.href`)
					if !strings.Contains(link, "model=local%3A"+url.QueryEscape(name)+"%2F") || !strings.Contains(link, "fp="+c.fp) || !strings.Contains(link, "autorun=1") {
						t.Errorf("the URL after the run: %s", link)
					}
					lg := Eval[pageLogits](b, `window.logitscope.logits`)
					if device == "gpu" {
						compareWithWazero(t, mod, nativeDevice(t), c.wazero, doc, lg, relTol)
					} else {
						compareWithWazero(t, mod, nil, c.wazero, doc, lg, 0)
					}
					shared, sharedFP = raw, c.fp
				})
			}
		})
	}
	if shared == nil {
		return
	}

	// Share the last run: the snapshot holds the logits, so it reopens
	// without the folder; rerunning it needs the folder, and the form asks.
	link := shareLink(t, b)
	b2 := reopenShared(t, link, shared)
	if h := Eval[string](b2, `document.querySelector("#model-local").innerText`); !strings.Contains(h, "local files, not uploaded") {
		t.Errorf("the reopened header says %q", h)
	}
	if n := Eval[string](b2, `(document.querySelector("#local-model-note") || {innerText: ""}).innerText`); !strings.Contains(n, "choose your copy of the folder") || !strings.Contains(n, sharedFP[:12]) {
		t.Errorf("the reopened form's folder note: %q", n)
	}

	// Nothing of the folders reached the server: no request asks for a
	// model's file (the page lists the served models, GET /models/, and
	// nothing more), and the only request with a body, the shared
	// snapshot, holds none of 64 windows of any weights file's bytes.
	weights := []string{elsewhere}
	for _, dir := range []string{tiny, sharded} {
		for _, pat := range []string{"*.safetensors", "*.gguf", "variants/q4/*.bin"} {
			m, _ := filepath.Glob(filepath.Join(dir, pat))
			weights = append(weights, m...)
		}
	}
	if len(weights) != 8 {
		t.Fatalf("weights files %v, want 8", weights)
	}
	var uploads int
	for _, r := range site.Requests() {
		if strings.HasPrefix(r.Path, "/models/") && r.Path != "/models/" {
			t.Errorf("%s %s asks for a model's file", r.Method, r.Path)
		}
		if len(r.Body) == 0 {
			continue
		}
		uploads++
		if r.Method != "POST" || r.Path != "/api/runs" {
			t.Errorf("%s %s sent %d bytes", r.Method, r.Path, len(r.Body))
		}
		for _, w := range weights {
			data, err := os.ReadFile(w)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 64 {
				at := i * (len(data) - 32) / 63
				if bytes.Contains(r.Body, data[at:at+32]) {
					t.Errorf("%s %s carries %s's bytes at offset %d", r.Method, r.Path, w, at)
				}
			}
		}
	}
	if uploads != 1 {
		t.Errorf("%d requests with a body, want 1 (the shared snapshot)", uploads)
	}
}

// A model folder that cannot run says why, in one line naming the
// folder and the file: one without config.json, one whose architecture
// the engine does not run, and one of links only, as a Hugging Face
// cache's snapshot folder is (Chromium leaves links out of a folder it
// lists) (all three in the form as soon as the folder is read, and an
// autorun link does not start); one whose variant shard
// fails its manifest's sha256 (engine.wasm's check, said with the folder's
// name for its mount); one whose files exceed the page's memory budget
// (a sparse 2 GiB safetensors: refused before any byte is read); and a
// link whose fingerprint names other weights than the folder chosen
// under its name (Run then runs the folder as it is).
func TestUILocalFolderRefused(t *testing.T) {
	RequireUI(t)
	site := StartSite(t)
	disk := t.TempDir()
	src, tinyFP := writeFolder(t, t.TempDir(), "src", "tiny", 1)
	copyModel := func(name string, skip ...string) string {
		dir := filepath.Join(disk, name)
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		for _, f := range skip {
			if err := os.RemoveAll(filepath.Join(dir, f)); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	noConfig := copyModel("no-config", "config.json")

	mixtral := copyModel("mixtral")
	cfgPath := filepath.Join(mixtral, "config.json")
	var cfg map[string]any
	data, err := os.ReadFile(cfgPath)
	if err == nil {
		err = json.Unmarshal(data, &cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg["architectures"] = []string{"MixtralForCausalLM"}
	if data, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, data, 0o644); err != nil {
		t.Fatal(err)
	}

	corrupt := copyModel("corrupt")
	shards, _ := filepath.Glob(filepath.Join(corrupt, "variants", "q4", "*.bin"))
	if len(shards) == 0 {
		t.Fatal("the q4 variant has no shard")
	}
	flip, err := os.ReadFile(shards[0])
	if err != nil {
		t.Fatal(err)
	}
	flip[len(flip)/2] ^= 0x10
	if err := os.WriteFile(shards[0], flip, 0o644); err != nil {
		t.Fatal(err)
	}

	big := copyModel("big", "model.safetensors", "variants", "src-q4.gguf")
	sparse, err := os.Create(filepath.Join(big, "model.safetensors"))
	if err == nil {
		err = sparse.Truncate(2 << 30) // sparse: no disk used
		sparse.Close()
	}
	if err != nil {
		t.Fatal(err)
	}

	// A Hugging Face cache's snapshot folder: every file a link into
	// blobs/, which browsers do not follow.
	links := filepath.Join(disk, "links")
	blobs := filepath.Join(disk, "blobs")
	for _, d := range []string{links, blobs} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"config.json", "tokenizer.json", "model.safetensors"} {
		if err := copyFile(filepath.Join(src, f), filepath.Join(blobs, f)); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..", "blobs", f), filepath.Join(links, f)); err != nil {
			t.Fatal(err)
		}
	}

	// The name the link ran, other weights inside.
	other, otherFP := writeFolder(t, filepath.Join(disk, "other"), "tiny", "tiny-llama", 1)

	for _, c := range []struct {
		name, dir, test, fp string
		note                string // the form's folder note says it ("" if it runs)
		err                 string
	}{
		{"no config.json", noConfig, "q4", "", "folder no-config has no config.json",
			"model: folder no-config has no config.json: choose the model's own folder"},
		{"unsupported architecture", mixtral, "q4", "", `mixtral/config.json: architecture "MixtralForCausalLM" is not supported`,
			`model: mixtral/config.json: architecture "MixtralForCausalLM" is not supported (supported: `},
		// Chromium lists no file of it, so not even its name is known.
		{"links only", links, "f32", "", "the chosen folder holds none of a model's files",
			"model: the chosen folder holds none of a model's files (config.json, *.safetensors, tokenizer.json): choose the folder that holds them. Browsers do not follow links"},
		{"shard fails its sha256", corrupt, "q4", "", "",
			"open local:corrupt/ q4: ls_open: corrupt/variants/q4/" + filepath.Base(shards[0]) + ": sha256 "},
		{"over the memory budget", big, "f32", "", "",
			"open local:big/ f32: folder big (f32): its files take 2.00 GiB, more than this page's memory budget of 1.00 GiB"},
		{"another checkpoint than the link's", other, "q4", tinyFP, "",
			"model: folder tiny holds another checkpoint than the link ran (fingerprint "},
	} {
		t.Run(c.name, func(t *testing.T) {
			name := filepath.Base(c.dir)
			spec := snapshot.NewSpec()
			spec.Model, spec.Fingerprint, spec.Test, spec.Prompt, spec.MaxNew, spec.Device = snapshot.LocalPrefix+name+"/", c.fp, c.test, "Hi", 2, "cpu"
			q := spec.Query()
			q.Set("autorun", "1")
			b := NewBrowser(t)
			ctx, cancel := context.WithTimeout(b.Ctx, 3*time.Minute)
			defer cancel()
			if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/?"+q.Encode()), chromedp.WaitVisible(chromedp.CSS(`input[name="local-model"]`))); err != nil {
				t.Fatal(err)
			}
			if err := chooseFolder(ctx, c.dir); err != nil {
				t.Fatal(err)
			}
			if c.note != "" {
				// The folder is read in the background: wait for its note.
				note := Eval[string](b, `(async () => { for (let i = 0; i < 300; i++) {
  const n = document.querySelector("#local-model-note").innerText;
  if (!/reading…|choose your copy/.test(n)) return n;
  await new Promise((r) => setTimeout(r, 20)); } return "(no note)"; })()`)
				if !strings.Contains(note, c.note) {
					t.Errorf("the form's note %q, want it to say %q", note, c.note)
				}
				time.Sleep(500 * time.Millisecond)
				if state := Eval[string](b, `String(document.body.dataset.state)`); state != "idle" {
					t.Errorf("the autorun link started a run that cannot run: state %q", state)
				}
				Eval[bool](b, `(document.querySelector("#run").click(), true)`)
			}
			state, err := b.WaitState(2*time.Minute, "error", "done")
			if err != nil || state != "error" {
				t.Fatalf("state %q, %v; want error", state, err)
			}
			msg := Eval[string](b, `String(window.logitscope.error)`)
			t.Logf("error %q", msg)
			if !strings.Contains(msg, c.err) || strings.Contains(msg, "\n") {
				t.Errorf("the error %q, want one line saying %q", msg, c.err)
			}
			if c.fp == "" {
				return
			}
			// Told once: Run now runs the folder as it is. (Choosing the
			// same folder again would not do: Chromium fires no change
			// event for the same selection.)
			Eval[bool](b, `(document.querySelector("#run").click(), true)`)
			// Only "done": the page shows the last error until the run starts.
			if _, err := b.WaitState(2*time.Minute, "done"); err != nil {
				t.Fatalf("Run after the error: %v: %s", err, Eval[string](b, `String(window.logitscope.error)`))
			}
			if doc, _ := pageDoc(t, b); doc.Spec.Fingerprint != otherFP {
				t.Errorf("the rerun's fingerprint %q, want the folder's %q", doc.Spec.Fingerprint, otherFP)
			}
		})
	}
}
