package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/format/dump"
)

// Markup that runs script if it ever reaches the DOM as markup: each sets
// window.__xss (and the title) to say which one ran.
const (
	imgXSS    = `"><img src=x onerror="window.__xss='img';document.title='xss'">`
	scriptXSS = `<script>window.__xss='script'</script>`
)

// hostileDoc is a valid 3-position comparison whose token texts, side
// labels and GGUF name are markup.
func hostileDoc(t *testing.T) *snapshot.Doc {
	t.Helper()
	const vocab = 8
	ref := &dump.Logits{Rows: 3, Vocab: vocab, Data: make([]float32, 3*vocab)}
	test := &dump.Logits{Rows: 3, Vocab: vocab, Data: make([]float32, 3*vocab)}
	for i := range 3 {
		ref.Data[i*vocab+i] = 4
		test.Data[i*vocab+(i+i%2)] = 4 // position 1 flips
	}
	d, err := snapshot.Build(nil,
		snapshot.Capture{Side: snapshot.Side{Label: "ref " + imgXSS}, Logits: ref, PromptIDs: []int{5, 6}},
		snapshot.Capture{Side: snapshot.Side{Label: "test " + scriptXSS, Device: imgXSS}, Logits: test},
		nil, func(id int) string {
			if id%2 == 0 {
				return "tok" + imgXSS
			}
			return "tok" + scriptXSS
		})
	if err != nil {
		t.Fatal(err)
	}
	// A GGUF file's name may be markup too (it is a plain file name).
	d.Ref.GGUF = &snapshot.GGUF{Name: imgXSS + ".gguf", Types: map[string]int{"Q4_K": 3}}
	return d
}

func postRun(t *testing.T, site *Site, body []byte) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(site.URL+"/api/runs", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rep struct{ ID, URL string }
	json.NewDecoder(resp.Body).Decode(&rep)
	return resp, rep.URL
}

// TestSharedRunMarkupIsText: a shared run whose texts are markup shows
// them as text on /r/<id>: no element from them, no script run, and the
// page is served under a Content-Security-Policy.
func TestSharedRunMarkupIsText(t *testing.T) {
	RequireUI(t)
	site := StartSite(t)
	body, err := json.Marshal(hostileDoc(t))
	if err != nil {
		t.Fatal(err)
	}
	resp, link := postRun(t, site, body)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST: %d", resp.StatusCode)
	}
	page, err := http.Get(site.URL + link)
	if err != nil {
		t.Fatal(err)
	}
	page.Body.Close()
	csp := page.Header.Get("Content-Security-Policy")
	script := ""
	for _, d := range strings.Split(csp, ";") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(d), "script-src "); ok {
			script = v
		}
	}
	if !strings.Contains(script, "'self'") || strings.Contains(script, "'unsafe-inline'") {
		t.Errorf("%s: Content-Security-Policy %q", link, csp)
	}

	b := NewBrowser(t)
	if state := b.Open(site.URL+link, 2*time.Minute); state != "done" {
		b.Screenshot("error")
		t.Fatalf("the snapshot ended in %q: %s", state, Eval[string](b, `String(window.logitscope.error)`))
	}
	// Select the flipped position, so the inspector shows its top-k texts.
	Eval[bool](b, `(document.querySelector('#tokens [data-i="1"]').click(), true)`)
	time.Sleep(500 * time.Millisecond)
	b.Screenshot("hostile")
	if ran := Eval[string](b, `String(window.__xss)`); ran != "undefined" {
		t.Errorf("markup from the document ran script: window.__xss = %q", ran)
	}
	if title := Eval[string](b, `document.title`); title != "logitscope" {
		t.Errorf("document.title = %q", title)
	}
	if n := Eval[int](b, `document.querySelectorAll("img, #root script").length`); n != 0 {
		t.Errorf("%d img or script elements in the page", n)
	}
	texts := viewTexts(b)
	// The inspector shows a token's spaces as ␣.
	for sel, img := range map[string]string{"#tokens": imgXSS, "#inspector": strings.ReplaceAll(imgXSS, " ", "␣")} {
		if !strings.Contains(texts[sel], img) || !strings.Contains(texts[sel], scriptXSS) {
			t.Errorf("%s does not show the markup as text: %.300q", sel, texts[sel])
		}
	}
	if header := Eval[string](b, `document.querySelector("#root").innerText`); !strings.Contains(header, "ref "+imgXSS) {
		t.Errorf("the side label is not shown as text: %.300q", header)
	}
	if g := Eval[string](b, `document.querySelector("#ref-gguf").innerText`); !strings.Contains(g, "GGUF · Q4_K 3") {
		t.Errorf("the GGUF side is not shown: %q", g)
	}
}

// TestSharedRunHostileClass: a stored run whose class is markup (the
// server refuses to store one; this one was put on disk by hand, as an
// older server could have) is refused by the page, and runs nothing.
func TestSharedRunHostileClass(t *testing.T) {
	RequireUI(t)
	site := StartSite(t)
	good, err := json.Marshal(hostileDoc(t))
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(good, []byte(`"class":"agree"`), []byte(`"class":"agree\"><img src=x onerror=\"window.__xss='class'\">"`), 1)
	if bytes.Equal(bad, good) {
		t.Fatal("no agreeing position in the document")
	}
	if resp, _ := postRun(t, site, bad); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("POST of a hostile class: %d, want 400", resp.StatusCode)
	}
	const id = "0123456789abcdef0123456789abcdef"
	if err := os.WriteFile(filepath.Join(site.Data, "runs", id+".json"), bad, 0o644); err != nil {
		t.Fatal(err)
	}
	b := NewBrowser(t)
	if state := b.Open(site.URL+"/r/"+id, 2*time.Minute); state != "error" {
		t.Errorf("the page shows a document with a hostile class (state %q)", state)
	}
	if msg := Eval[string](b, `String(window.logitscope.error)`); !strings.Contains(msg, "class") {
		t.Errorf("the error %q does not name the class", msg)
	}
	if ran := Eval[string](b, `String(window.__xss)`); ran != "undefined" {
		t.Errorf("window.__xss = %q", ran)
	}
}
