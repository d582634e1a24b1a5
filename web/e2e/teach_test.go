package e2e

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/format/sidecar"
	"logitscope/internal/model/synth"
	"logitscope/internal/text/tokenizer"
)

// The page teaches itself: a bare link (what `make run` prints) and
// `/?autorun=1` alone both show a finished f32-vs-q4 comparison of the
// demo's ready panel, with readable text in the token strip, each panel
// window's context token marked, the model called the trained demo that
// its sidecar says it is and a line on close and clear calls; `/?autorun=0`
// opens on the same ready form without running.
func TestUIFirstScreen(t *testing.T) {
	RequireUI(t)
	site := StartSite(t)
	note, err := sidecar.Read(DemoDir(t))
	if err != nil || note.Nature != sidecar.TrainedDemo || note.Panel == "" || note.Prompt == "" {
		t.Fatalf("the demo's sidecar: %+v, %v; want a trained demo with a ready prompt and panel", note, err)
	}
	b := NewBrowser(t)
	for _, link := range []string{"/", "/?autorun=1"} {
		t.Run(link, func(t *testing.T) {
			start := time.Now()
			if state := b.Open(site.URL+link, 3*time.Minute); state != "done" {
				b.Screenshot("first-screen-error")
				t.Fatalf("%s ended in %q: %s", link, state, Eval[string](b, `String(window.logitscope.error)`))
			}
			// Logged, not asserted: the machine's load decides it (speed
			// targets live in benchmarks).
			t.Logf("%s: a finished comparison %.1f s after navigating", link, time.Since(start).Seconds())
			if link == "/" {
				b.Screenshot("first-screen")
			}
			doc, _ := pageDoc(t, b)
			if s := doc.Spec; s == nil || s.Model != "demo" || s.Ref != "f32" || s.Test != "q4" || s.Mode != snapshot.Panel || s.Panel != note.Panel {
				t.Fatalf("the first run's spec %+v, want the demo's ready panel, f32 against q4", doc.Spec)
			}
			if doc.Model == nil || doc.Model.Nature != sidecar.TrainedDemo {
				t.Errorf("the document's model %+v, want the trained demo", doc.Model)
			}
			strip := Eval[string](b, `document.querySelector("#strip").innerText`)
			// The whole text reads in the strip, window starts included:
			// the panel's first line, its line break marked.
			first := strings.SplitN(note.Panel, "\n", 2)[0] + "↵\n"
			if !strings.Contains(strip, first) {
				t.Errorf("the strip does not read %q:\n%.400s", first, strip)
			}
			if strings.Contains(strip, "\uFFFD") {
				t.Errorf("the strip shows U+FFFD: %.400s", strip)
			}
			for _, w := range doc.Windows {
				if bos := doc.Text(w.Token); w.Prefix && strings.Contains(strip, bos) {
					t.Errorf("the BOS %q before each window is drawn in the strip's text", bos)
					break
				}
			}
			starts := Eval[int](b, `document.querySelectorAll("#strip .w0").length`)
			if len(doc.Windows) < 2 || starts != len(doc.Windows) {
				t.Errorf("%d window starts marked, the document has %d windows (want at least 2)", starts, len(doc.Windows))
			}
			if !Eval[bool](b, `(() => { const w = document.querySelector("#strip .w0"), p = document.querySelector('#strip [data-i="0"]');
  return !!w && !!p && !!(w.compareDocumentPosition(p) & Node.DOCUMENT_POSITION_FOLLOWING); })()`) {
				t.Error("the first window's start is not drawn before position 0")
			}
			if got := Eval[string](b, `document.querySelector("#summary").innerText`); strings.Contains(got, "meaningless") {
				t.Errorf("the summary calls a trained model's perplexity meaningless: %.300q", got)
			}
			for sel, want := range map[string][]string{
				"#verdict":      {"predictions", "close call", "clear call", "not a defect", "worth a look"},
				"#model-nature": {"trained demo model", note.About},
				"#model-note":   {"trained demo model"},
			} {
				got := Eval[string](b, `(document.querySelector(`+jsString(sel)+`) || {innerText: "(missing)"}).innerText`)
				for _, w := range want {
					if !strings.Contains(got, w) {
						t.Errorf("%s lacks %q: %.300q", sel, w, got)
					}
				}
			}
		})
	}

	// autorun=0: the same ready form, nothing run.
	ctx, cancel := context.WithTimeout(b.Ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/?autorun=0")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WaitState(time.Minute, "idle"); err != nil {
		t.Fatal(err)
	}
	if got := Eval[string](b, `document.querySelector("textarea[name=panel]").value`); got != note.Panel {
		t.Errorf("autorun=0: the panel field holds %.60q, want the demo's ready panel", got)
	}
	Eval[bool](b, `(document.querySelector("[name=mode-greedy]").click(), true)`)
	if got := Eval[string](b, `(async () => { for (let i = 0; i < 100; i++) { const p = document.querySelector("textarea[name=prompt]");
  if (p) return p.value; await new Promise((r) => setTimeout(r, 20)); } return "(no prompt field)"; })()`); got != note.Prompt {
		t.Errorf("autorun=0: the prompt field holds %q, want the demo's ready prompt %q", got, note.Prompt)
	}
}

// Byte tokens read as <0xNN> and control characters by their byte (styled
// apart), alike in the strip and the inspector, and different bytes stay apart:
// a panel of text the demo's byte-level tokenizer cuts inside characters.
func TestUIByteTokens(t *testing.T) {
	RequireUI(t)
	site := StartSite(t)
	tok, err := tokenizer.Load(filepath.Join(site.DemoDir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	spec := snapshot.NewSpec()
	spec.Mode, spec.Window, spec.Device = snapshot.Panel, 32, "cpu"
	spec.Panel = "Größe 日本語 한국어 🙂🚀 bell\x07 shift\x0f end"
	q := spec.Query()
	q.Set("autorun", "1")
	b := NewBrowser(t)
	if state := b.Open(site.URL+"/?"+q.Encode(), 3*time.Minute); state != "done" {
		b.Screenshot("error")
		t.Fatalf("the run ended in %q: %s", state, Eval[string](b, `String(window.logitscope.error)`))
	}
	b.Screenshot("byte-tokens")
	doc, _ := pageDoc(t, b)
	byteName := regexp.MustCompile(`^(<0x[0-9A-F]{2}>)+$`)
	var bytePos []int
	texts := map[string]int{}
	for i, id := range doc.Tokens {
		if want := tok.Piece(id); doc.Text(id) != want {
			t.Errorf("token %d: text %q, want tokenizer.Piece's %q", id, doc.Text(id), want)
		}
		if byteName.MatchString(doc.Text(id)) {
			bytePos = append(bytePos, i)
			texts[doc.Text(id)] = id
		}
	}
	if len(texts) < 2 {
		t.Fatalf("fewer than two distinct byte tokens in %v: the test text does not exercise them", doc.Tokens)
	}
	strip := Eval[string](b, `document.querySelector("#strip").innerText`)
	if strings.Contains(strip, "\uFFFD") {
		t.Errorf("the strip shows U+FFFD: %q", strip)
	}
	ctl := Eval[[]string](b, `[...document.querySelectorAll("#strip .g-ctl")].map((e) => e.textContent)`)
	for _, want := range []string{"<0x07>", "<0x0F>"} {
		if !slices.Contains(ctl, want) {
			t.Errorf("the strip does not mark the control %s (control marks: %v)", want, ctl)
		}
	}
	marks := Eval[[]string](b, `[...document.querySelectorAll("#strip .g-byte")].map((e) => e.textContent)`)
	for name := range texts {
		for _, one := range regexp.MustCompile(`<0x[0-9A-F]{2}>`).FindAllString(name, -1) {
			if !slices.Contains(marks, one) {
				t.Errorf("%s is not drawn as a byte in the strip (byte marks: %v)", one, marks)
			}
		}
	}
	// The inspector draws the position's token with the same marks.
	p := bytePos[0]
	Eval[bool](b, `(document.querySelector('#strip [data-i="`+itoa(p)+`"]').click(), true)`)
	got := Eval[string](b, `(async () => { for (let i = 0; i < 200; i++) {
    if (document.querySelector("#sel-pos").textContent === "`+itoa(p)+`") {
      const c = document.querySelector("#inspector .tok code .g-byte"); return c ? c.textContent : "(no byte mark)"; }
    await new Promise((r) => setTimeout(r, 10)); } return "(not selected)"; })()`)
	if !strings.HasPrefix(doc.Text(doc.Tokens[p]), got) {
		t.Errorf("the inspector draws position %d's token %q with byte mark %q", p, doc.Text(doc.Tokens[p]), got)
	}
}

// Sharing keeps the view: the selected position, the strip's tab and the
// charts' zoom go into the link and into the stored snapshot, and a
// teammate who opens either the link or the bare /r/<id> sees that view.
func TestUIShareKeepsView(t *testing.T) {
	RequireUI(t)
	site := StartSite(t)
	b := NewBrowser(t)
	if state := b.Open(site.URL+"/", 3*time.Minute); state != "done" {
		t.Fatalf("the first screen ended in %q: %s", state, Eval[string](b, `String(window.logitscope.error)`))
	}
	doc, _ := pageDoc(t, b)
	n := len(doc.Report.Positions)
	pos := n / 2
	if pos == doc.Report.Summary.FirstDisagreement {
		pos++ // not where a fresh page would open anyway
	}
	// Select, switch the tab, zoom in twice; then share.
	Eval[bool](b, `(() => { document.querySelector('#strip [data-i="`+itoa(pos)+`"]').click();
  document.querySelector("#strip-tabs [name=tab-flips]").click(); return true; })()`)
	waitFor(t, b, `document.querySelector("#sel-pos").textContent === "`+itoa(pos)+`" && document.querySelector("#strip").classList.contains("only-flips")`)
	Eval[bool](b, `(document.querySelector("#zoom-in").click(), true)`)
	waitFor(t, b, `document.querySelector("#zoom-range").textContent.startsWith("positions ")`)
	Eval[bool](b, `(document.querySelector("#zoom-in").click(), true)`)
	zoom := Eval[string](b, `(async () => { const first = document.querySelector("#zoom-range").textContent;
  for (let i = 0; i < 200; i++) { const z = document.querySelector("#zoom-range").textContent; if (z !== first) return z;
    await new Promise((r) => setTimeout(r, 10)); } return document.querySelector("#zoom-range").textContent; })()`)
	if !strings.HasPrefix(zoom, "positions ") {
		t.Fatalf("after zooming in: %q", zoom)
	}
	link := shareLink(t, b)
	b.Screenshot("shared-view")
	u, err := url.Parse(link)
	if err != nil || !strings.HasPrefix(u.Path, "/r/") {
		t.Fatalf("share link %q", link)
	}
	want, ok := snapshot.ViewQuery(u.Query())
	if !ok || want.Pos != pos || want.Tab != snapshot.TabFlips || want.To == 0 || !(want.From <= pos && pos < want.To) {
		t.Fatalf("the link's view %+v (%q), want position %d, tab flips and a zoom around it", want, u.RawQuery, pos)
	}
	if zoom != "positions "+itoa(want.From)+"–"+itoa(want.To-1)+" of "+itoa(n) {
		t.Errorf("the page shows %q, the link zoom=%d-%d", zoom, want.From, want.To)
	}
	stored, err := os.ReadFile(filepath.Join(site.Data, "runs", strings.TrimPrefix(u.Path, "/r/")+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var st snapshot.Doc
	if err := json.Unmarshal(stored, &st); err != nil || st.View == nil || *st.View != want {
		t.Fatalf("the stored snapshot's view %+v (%v), want %+v", st.View, err, want)
	}

	// Reopen in a fresh browser, bare and with the link's query.
	b2 := NewBrowser(t)
	for _, open := range []string{u.Path, u.Path + "?" + u.RawQuery} {
		if state := b2.Open(site.URL+open, 2*time.Minute); state != "done" {
			t.Fatalf("%s ended in %q: %s", open, state, Eval[string](b2, `String(window.logitscope.error)`))
		}
		got := Eval[map[string]any](b2, `({pos: document.querySelector("#sel-pos").textContent,
  flips: document.querySelector("#strip").classList.contains("only-flips"),
  tab: (document.querySelector("#strip-tabs .tab.on") || {textContent: ""}).textContent,
  zoom: document.querySelector("#zoom-range").textContent,
  url: location.search})`)
		if got["pos"] != itoa(pos) || got["flips"] != true || got["tab"] != "argmax flips" || got["zoom"] != zoom {
			t.Errorf("%s reopened on %v, want position %d, the flips tab and %q", open, got, pos, zoom)
		}
		if v, _ := snapshot.ViewQuery(mustQuery(t, got["url"].(string))); v != want {
			t.Errorf("%s: the address bar's view %+v, want %+v", open, v, want)
		}
	}
	b2.Screenshot("reopened-view")
}

// A model without variants offers only what it has, says how to make a
// variant, and a link that asks for q4 anyway fails at once, before any of
// the model's files is fetched, naming a command with --model.
func TestUIModelWithoutVariants(t *testing.T) {
	RequireUI(t)
	dir := t.TempDir()
	if err := synth.Write(synth.Presets["tiny"], dir, synth.Options{}); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, sidecar.File)) // the user's model
	site := StartSite(t, SiteModel{"bare", dir})
	b := NewBrowser(t)
	ctx, cancel := context.WithTimeout(b.Ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/?model=bare")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WaitState(time.Minute, "idle"); err != nil {
		t.Fatal(err)
	}
	opts := Eval[[]string](b, `[...document.querySelectorAll("select[name=test] option")].map((o) => o.value)`)
	if !slices.Equal(opts, []string{"f32", snapshot.LocalPrefix}) {
		t.Errorf("the test side offers %v, want f32 and a file from this computer", opts)
	}
	hint := Eval[string](b, `(document.querySelector("#variant-hint") || {innerText: ""}).innerText`)
	if !strings.Contains(hint, "quantize --model MODELS/bare --scheme q4") {
		t.Errorf("the form's hint %q names no quantize command with --model", hint)
	}
	if note := Eval[string](b, `(document.querySelector("#model-note") || {innerText: ""}).innerText`); note != "your model" {
		t.Errorf("a model without a sidecar is called %q, want your model", note)
	}

	before := len(site.Requests())
	start := time.Now()
	if state := b.Open(site.URL+"/?model=bare&test=q4&mode=greedy&prompt=Hi&autorun=1", time.Minute); state != "error" {
		t.Fatalf("asking for the missing q4 ended in %q", state)
	}
	msg := Eval[string](b, `String(window.logitscope.error)`)
	if !strings.Contains(msg, "model bare has no q4 variant") || !strings.Contains(msg, "go run ./cmd/logitscope quantize --model MODELS/bare --scheme q4") {
		t.Errorf("error %q", msg)
	}
	for _, r := range site.Requests()[before:] {
		if strings.HasPrefix(r.Path, "/models/bare/") {
			t.Errorf("the page fetched %s before refusing", r.Path)
		}
	}
	t.Logf("refused %.1f s after navigating", time.Since(start).Seconds())
	b.Screenshot("no-variant")
}

// waitFor polls a JS condition for up to ten seconds.
func waitFor(t *testing.T, b *Browser, cond string) {
	t.Helper()
	if !Eval[bool](b, `(async () => { for (let i = 0; i < 1000; i++) { if (`+cond+`) return true;
  await new Promise((r) => setTimeout(r, 10)); } return false; })()`) {
		t.Fatalf("not within 10 s: %s", cond)
	}
}

func mustQuery(t *testing.T, search string) url.Values {
	t.Helper()
	q, err := url.ParseQuery(strings.TrimPrefix(search, "?"))
	if err != nil {
		t.Fatal(err)
	}
	return q
}
