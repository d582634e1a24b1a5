package e2e

import (
	"context"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/model/hub/hubtest"
)

// waitNote polls the text of sel until it contains want (or a minute
// passes) and returns it.
func waitNote(b *Browser, sel, want string) string {
	return Eval[string](b, `(async () => { let n = ""; for (let i = 0; i < 600; i++) {
  n = (document.querySelector(`+jsString(sel)+`) || {innerText: ""}).innerText;
  if (n.includes(`+jsString(want)+`)) return n;
  await new Promise((r) => setTimeout(r, 100)); } return n; })()`)
}

// TestUIHub opens a model by its hub id in the page: a hub on httptest
// (hubtest, on another origin than the page's server, so the browser's
// CORS checks apply) serves a sharded tiny checkpoint in huggingface.co's
// URL layout, the page points at it (hf_endpoint in the URL), the user
// types org/tiny and presses Download, and runs f32 against a GGUF file
// chosen from disk. The browser fetched the files from the hub itself:
// the page's server was asked for no model file, the hub for the API,
// the resolve URLs and the CDN's LFS objects. Both sides' tokens and
// logits equal engine.wasm's under wazero on the folder the hub serves,
// bit for bit (the CPU path), and the document carries the checkpoint
// fingerprint of that folder. The URL the run leaves reopens the hub
// model (hf=, autorun=1): a fresh page downloads it again and reruns it
// to the same logits. A corrupt file and a gated repo are refused in the
// hub field's note, naming the file or saying what to do.
func TestUIHub(t *testing.T) {
	RequireUI(t)
	srv := hubtest.New()
	defer srv.Close()
	// The page's server lets the page download from the hub HF_ENDPOINT
	// names (its Content-Security-Policy's connect-src).
	t.Setenv("HF_ENDPOINT", srv.URL)
	site := StartSite(t)
	mod := Wazero(t, site)
	dir, fp := writeFolder(t, t.TempDir(), "tiny", "tiny", 2)
	if _, err := srv.Add("org/tiny", "main", dir); err != nil {
		t.Fatal(err)
	}
	gguf := filepath.Join(dir, "tiny-q4.gguf")

	spec := snapshot.NewSpec()
	spec.Test, spec.Prompt, spec.MaxNew, spec.Device = snapshot.LocalPrefix+"tiny-q4.gguf", "Fetched from the hub.", 8, "cpu"
	q := spec.Query()
	q.Set("hf_endpoint", srv.URL)
	b := NewBrowser(t)
	ctx, cancel := context.WithTimeout(b.Ctx, 10*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/?"+q.Encode()), chromedp.WaitVisible(chromedp.CSS(`input[name="hub-id"]`))); err != nil {
		t.Fatal(err)
	}
	if got := Eval[string](b, `document.querySelector('input[name="hub-endpoint"]').value`); got != srv.URL {
		t.Errorf("the endpoint field says %q, want the URL's %q", got, srv.URL)
	}
	if err := chromedp.Do(ctx,
		chromedp.SetUploadFiles(chromedp.CSS(`input[name="local-test"]`), []string{gguf}),
		chromedp.SendKeys(chromedp.CSS(`input[name="hub-id"]`), "org/tiny"),
		chromedp.Click(chromedp.CSS(`button[name="hub-open"]`)),
	); err != nil {
		t.Fatal(err)
	}
	note := waitNote(b, "#local-model-note", "Qwen2ForCausalLM")
	if !strings.Contains(note, "tiny (hf:org/tiny@") || !strings.Contains(note, "from "+srv.URL) || !strings.Contains(note, "Qwen2ForCausalLM") {
		t.Fatalf("after the download, the folder note says %q; the hub note %q", note, Eval[string](b, `document.querySelector("#hub-note").innerText`))
	}
	Eval[bool](b, `(document.querySelector("#run").click(), true)`)
	if state, err := b.WaitState(3*time.Minute, "done", "error"); err != nil || state != "done" {
		b.Screenshot("error")
		t.Fatalf("the run: %q, %v: %s", state, err, Eval[string](b, `String(window.logitscope.error)`))
	}
	doc, _ := pageDoc(t, b)
	if doc.Spec.Model != snapshot.LocalPrefix+"tiny/" || doc.Spec.Fingerprint != fp {
		t.Errorf("the document's model %q, fingerprint %q; want local:tiny/, %q (checkpoint.Fingerprint of the served folder)", doc.Spec.Model, doc.Spec.Fingerprint, fp)
	}
	lg := Eval[pageLogits](b, `window.logitscope.logits`)
	compareWithWazero(t, mod, nil, dir, doc, lg, 0)

	// The files came from the hub, not through the page's server.
	for _, r := range site.Requests() {
		if strings.HasPrefix(r.Path, "/models/") && r.Path != "/models/" {
			t.Errorf("%s %s asks the page's server for a model's file", r.Method, r.Path)
		}
	}
	var api, resolve, cdn int
	for _, r := range srv.Requests() {
		switch {
		case strings.HasPrefix(r, "GET /api/models/org/tiny/revision/main"):
			api++
		case strings.HasPrefix(r, "GET /org/tiny/resolve/"):
			resolve++
		case strings.HasPrefix(r, "GET /cdn/"):
			cdn++
		}
	}
	// config, tokenizer, generation and tokenizer configs, the index, two
	// shards; the shards' bytes come from the CDN.
	if api != 1 || resolve != 7 || cdn != 2 {
		t.Errorf("the hub served %d API, %d resolve and %d CDN requests, want 1, 7, 2: %v", api, resolve, cdn, srv.Requests())
	}

	// The URL the run left reopens the hub model and reruns it.
	link := Eval[string](b, `location.href`)
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	if lq := u.Query(); lq.Get("hf") != "org/tiny" || lq.Get("hf_endpoint") != srv.URL || lq.Get("autorun") != "1" {
		t.Fatalf("the URL after the run: %s", link)
	}
	b2 := NewBrowser(t)
	ctx2, cancel2 := context.WithTimeout(b2.Ctx, 5*time.Minute)
	defer cancel2()
	if err := chromedp.Do(ctx2, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS(`input[name="local-test"]`)),
		chromedp.SetUploadFiles(chromedp.CSS(`input[name="local-test"]`), []string{gguf})); err != nil {
		t.Fatal(err)
	}
	if state, err := b2.WaitState(3*time.Minute, "done", "error"); err != nil || state != "done" {
		b2.Screenshot("error")
		t.Fatalf("the reopened link: %q, %v: %s", state, err, Eval[string](b2, `String(window.logitscope.error)`))
	}
	if lg2 := Eval[pageLogits](b2, `window.logitscope.logits`); lg2 != lg {
		t.Error("the reopened link's logits differ from the first run's")
	}

	// The hub then sends more than it announced, then a corrupt shard,
	// then wants a token: the first page downloads again and is refused.
	const shard = "model-00002-of-00002.safetensors"
	for _, c := range []struct {
		setup func()
		want  []string
	}{
		{func() { srv.Pad(shard, 1<<20) }, []string{"hf:org/tiny/" + shard + ": GET ", "bytes the hub's API announced: refused"}},
		{func() { srv.Pad(shard, 0); srv.Corrupt(shard) }, []string{"hf:org/tiny/" + shard + ": sha256 of the download is", srv.URL + "/org/tiny/resolve/"}},
		{func() { srv.RequireToken("hf_secret") }, []string{"hf:org/tiny: GET " + srv.URL + "/api/models/org/tiny/revision/main?blobs=true: HTTP 401 GatedRepo", "the CLI takes HF_TOKEN"}},
	} {
		c.setup()
		if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`button[name="hub-open"]`))); err != nil {
			t.Fatal(err)
		}
		got := waitNote(b, "#hub-note", c.want[0])
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("the hub note %q, want it to say %q", got, w)
			}
		}
	}
}
