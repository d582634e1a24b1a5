package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"logitscope/host"
	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/format/chain"
	"logitscope/internal/format/chain/chaintest"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/receipt"
	"logitscope/internal/gpu"
	"logitscope/internal/gpu/native"
	"logitscope/internal/run/session"
	"logitscope/internal/sys/prereq"
	"logitscope/internal/text/chat"
	"logitscope/internal/text/tokenizer"
	"logitscope/wasm/abi"
	"logitscope/web/request"
)

// pageLogits is window.logitscope.logits: both sides' rows as base64 of
// float32 LE, row-major.
type pageLogits struct {
	Vocab int    `json:"vocab"`
	Width int    `json:"width"` // float32 per row: the logits, then any routes
	Ref   string `json:"ref"`
	Test  string `json:"test"`
}

func decodeRows(t testing.TB, b64 string) []float32 {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw)%4 != 0 {
		t.Fatalf("logits: %d bytes of base64 rows: %v", len(raw), err)
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

// views are the parts of the page that show a document: they must read
// the same in the run and in its shared snapshot.
var views = []string{"#summary", "#tokens", "#inspector", "#charts"}

func viewTexts(b *Browser) map[string]string {
	out := map[string]string{}
	for _, sel := range views {
		out[sel] = Eval[string](b, `(document.querySelector(`+jsString(sel)+`) || {innerText: "(missing)"}).innerText`)
	}
	return out
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// pageDoc reads window.logitscope.result as the raw JSON the page holds.
func pageDoc(t testing.TB, b *Browser) (*snapshot.Doc, []byte) {
	t.Helper()
	raw := Eval[string](b, `JSON.stringify(window.logitscope.result)`)
	doc, err := snapshot.Parse([]byte(raw))
	if err != nil {
		t.Fatalf("window.logitscope.result: %v", err)
	}
	return doc, []byte(raw)
}

// TestUIRunShareReopen opens an autorun link for the demo model, f32
// against q4 on WebGPU (SwiftShader), checks both sides' logits against
// the same requests through engine.wasm under wazero (gogpu/wgpu on
// lavapipe), shares the snapshot, and reopens /r/<id> in a fresh browser:
// the same document and the same view, without a run.
func TestUIRunShareReopen(t *testing.T) {
	RequireUI(t)
	site := StartSite(t)
	b := NewBrowser(t)

	spec := snapshot.NewSpec()
	spec.Prompt, spec.MaxNew, spec.Device = "What is the capital of France?", 8, "gpu"
	q := spec.Query()
	q.Set("autorun", "1")
	link := site.URL + "/?" + q.Encode()
	if state := b.Open(link, 5*time.Minute); state != "done" {
		b.Screenshot("error")
		t.Fatalf("the run ended in %q: %s", state, Eval[string](b, `String(window.logitscope.error)`))
	}
	b.Screenshot("run")
	doc, raw := pageDoc(t, b)
	if doc.Spec == nil || !reflect.DeepEqual(*doc.Spec, spec) {
		t.Errorf("the document's spec %+v, the link's %+v", doc.Spec, spec)
	}
	if doc.Ref.Device != "webgpu" || doc.Test.Device != "webgpu" || doc.Ref.Adapter == "" {
		t.Errorf("sides ran on %q/%q (adapter %q), want webgpu", doc.Ref.Device, doc.Test.Device, doc.Ref.Adapter)
	}
	tm := doc.Timing
	t.Logf("timing: page load %.0f ms, open f32 %.0f ms, first token %.0f ms, f32 run %.0f ms, open q4 %.0f ms, q4 run %.0f ms, analysis %.0f ms",
		tm.PageLoad, tm.OpenRef, tm.FirstToken, tm.RefRun, tm.OpenTest, tm.TestRun, tm.Analysis)
	if tm.PageLoad <= 0 || tm.FirstToken <= 0 {
		t.Errorf("timings not measured: %+v", tm)
	}
	if u := Eval[string](b, `location.search`); !strings.Contains(u, "prompt=") {
		t.Errorf("the URL does not carry the spec: %s", u)
	}

	lg := Eval[pageLogits](b, `window.logitscope.logits`)
	compareWithWazero(t, Wazero(t, site), nativeDevice(t), site.DemoDir, doc, lg, relTol)

	// Share, then reopen in a fresh browser (a new profile: nothing cached).
	run := viewTexts(b)
	shared := shareLink(t, b)
	u, err := url.Parse(shared)
	if err != nil || !strings.HasPrefix(u.Path, "/r/") {
		t.Fatalf("share link %q", shared)
	}
	stored, err := os.ReadFile(filepath.Join(site.Data, "runs", strings.TrimPrefix(u.Path, "/r/")+".json"))
	if err != nil {
		t.Fatalf("the shared run is not on the server: %v", err)
	}
	// The stored snapshot is the document plus the view it was shared
	// with (TestUIShareKeepsView checks that view).
	if !jsonEqual(t, withoutView(t, stored), raw) {
		t.Errorf("the stored snapshot differs from window.logitscope.result")
	}

	b2 := NewBrowser(t)
	if state := b2.Open(site.URL+u.Path, 2*time.Minute); state != "done" {
		b2.Screenshot("error")
		t.Fatalf("the snapshot ended in %q: %s", state, Eval[string](b2, `String(window.logitscope.error)`))
	}
	b2.Screenshot("snapshot")
	_, reopened := pageDoc(t, b2)
	if !jsonEqual(t, withoutView(t, reopened), raw) {
		t.Errorf("the reopened document differs from the run's")
	}
	if Eval[bool](b2, `window.logitscope.logits !== undefined`) {
		t.Errorf("the snapshot page has logits: it ran something")
	}
	again := viewTexts(b2)
	for _, sel := range views {
		if again[sel] != run[sel] {
			t.Errorf("%s differs:\nrun:      %.300q\nsnapshot: %.300q", sel, run[sel], again[sel])
		}
	}
}

// nativeDevice opens the native WebGPU (gogpu/wgpu) that wazero's
// reference runs use, closed when the test ends. Without one the test is
// skipped, except in CI, where lavapipe is installed and its absence is a
// broken setup.
func nativeDevice(t *testing.T) gpu.Device {
	t.Helper()
	dev, err := native.Open()
	if err != nil {
		prereq.Missing(t, prereq.Vulkan, fmt.Sprintf("no native WebGPU for the wazero reference (apt-get install mesa-vulkan-drivers libvulkan1): %v", err))
	}
	t.Cleanup(func() { dev.Close() })
	return dev
}

// compareWithWazero runs the page's two requests through engine.wasm
// under wazero on dev (nil: engine.wasm's CPU path) with the model in dir
// (a local side's GGUF file among its files):
// the reference's greedy decode from the document's prompt ids, then the
// test side fed the reference's tokens. Tokens must be identical and
// logits within tol.
func compareWithWazero(t *testing.T, mod *host.Module, dev gpu.Device, dir string, doc *snapshot.Doc, lg pageLogits, tol float64) {
	t.Helper()
	refReq := abi.Request{Mode: "greedy", PromptIDs: doc.PromptIDs, MaxNew: doc.Spec.MaxNew, Stops: doc.Spec.Stops}
	// A local file's side runs the file of that name in dir.
	local := func(v string) string { return strings.TrimPrefix(v, snapshot.LocalPrefix) }
	refRows, refRes := wazeroRun(t, mod, dev, dir, local(doc.Spec.Ref), refReq)
	testReq := request.Test(refReq, refRes)
	testRows, testRes := wazeroRun(t, mod, dev, dir, local(doc.Spec.Test), testReq)

	for _, side := range []struct {
		name string
		b64  string
		want [][]float32
		res  abi.Result
	}{{"reference " + doc.Spec.Ref, lg.Ref, refRows, refRes}, {"test " + doc.Spec.Test, lg.Test, testRows, testRes}} {
		t.Run(side.name, func(t *testing.T) {
			// The document's tokens are what the page showed: the
			// reference's greedy output, which the test side was fed.
			got := browserRun{Output: doc.Tokens, Stopped: side.res.Stopped, Targets: side.res.Targets,
				Vocab: lg.Vocab, Width: lg.Width, Rows: decodeRows(t, side.b64)}
			compareRows(t, got, side.want, side.res, tol)
		})
	}
}

func wazeroRun(t *testing.T, mod *host.Module, dev gpu.Device, dir, variant string, req abi.Request) ([][]float32, abi.Result) {
	t.Helper()
	ctx := context.Background()
	e, err := mod.Open(ctx, dev, dir, variant, request.Capacity(req))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	rows, res, err := e.Run(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return rows, res
}

// shareLink clicks the page's Share and returns the link it shows.
func shareLink(t *testing.T, b *Browser) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Click(chromedp.CSS("#share")), chromedp.WaitVisible(chromedp.CSS("#share-link"))); err != nil {
		t.Fatalf("share: %v", err)
	}
	return Eval[string](b, `document.querySelector("#share-link").value`)
}

// reopenShared opens a share link in a fresh browser and checks that it
// shows the run's document (want), apart from the view the snapshot adds.
func reopenShared(t *testing.T, link string, want []byte) *Browser {
	t.Helper()
	b := NewBrowser(t)
	if state := b.Open(link, 2*time.Minute); state != "done" {
		t.Fatalf("the snapshot ended in %q", state)
	}
	if _, reopened := pageDoc(t, b); !jsonEqual(t, withoutView(t, reopened), want) {
		t.Error("the reopened document differs from the run's")
	}
	return b
}

// withoutView is a document's JSON without its shared view.
func withoutView(t *testing.T, doc []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "view")
	out, _ := json.Marshal(m)
	return out
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(x, y)
}

// TestUINoWebGPU opens an autorun link for a teacher-forced panel in a
// Chromium without WebGPU: the page says so, runs both sides on
// engine.wasm's CPU path, and its rows equal wazero's bit for bit (the same
// wasm code, IEEE float32 in V8 and in wazero).
func TestUINoWebGPU(t *testing.T) {
	RequireUI(t)
	site := StartSite(t)
	b := NewBrowser(t, chromedp.Flag("enable-unsafe-webgpu", false))
	spec := snapshot.NewSpec()
	spec.Mode, spec.Window = snapshot.Panel, 16
	spec.Panel = "The float reference runs in float32. It reads the checkpoint as it is stored, in bfloat16, and never rounds again."
	q := spec.Query()
	q.Set("autorun", "1")
	if state := b.Open(site.URL+"/?"+q.Encode(), 3*time.Minute); state != "done" {
		b.Screenshot("error")
		t.Fatalf("the run ended in %q: %s", state, Eval[string](b, `String(window.logitscope.error)`))
	}
	b.Screenshot("cpu")
	doc, _ := pageDoc(t, b)
	if doc.Ref.Device != "cpu" || doc.Test.Device != "cpu" {
		t.Errorf("sides ran on %q/%q, want cpu", doc.Ref.Device, doc.Test.Device)
	}
	if s := doc.Report.Summary; !s.TeacherForced || s.PPL == nil {
		t.Errorf("a panel's summary is not teacher-forced: %+v", s)
	}
	banner := Eval[string](b, `(document.querySelector("#no-webgpu") || {innerText: ""}).innerText`)
	if !strings.Contains(banner, "WebGPU") {
		t.Errorf("no banner saying WebGPU is missing: %q", banner)
	}
	tm := doc.Timing
	t.Logf("timing (CPU): page load %.0f ms, open f32 %.0f ms, first row %.0f ms, f32 run %.0f ms, q4 run %.0f ms",
		tm.PageLoad, tm.OpenRef, tm.FirstToken, tm.RefRun, tm.TestRun)

	tok, err := tokenizer.Load(filepath.Join(site.DemoDir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.ConfigBeside(filepath.Join(site.DemoDir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	req, err := request.Ref(spec, tok, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	lg := Eval[pageLogits](b, `window.logitscope.logits`)
	mod := Wazero(t, site)
	for _, side := range []struct{ variant, b64 string }{{spec.Ref, lg.Ref}, {spec.Test, lg.Test}} {
		t.Run(side.variant, func(t *testing.T) {
			rows, res := wazeroRun(t, mod, nil, site.DemoDir, side.variant, req)
			got := browserRun{Output: res.Output, Targets: doc.Tokens, Vocab: lg.Vocab, Width: lg.Width, Rows: decodeRows(t, side.b64)}
			compareRows(t, got, rows, res, 0)
		})
	}
}

// TestUIOfflineCompare drops two dumps on the page (the reference with its
// receipt, from a panel through engine.wasm under wazero) and checks the
// page's document against snapshot.Offline run natively on the same
// bytes: the same positions, classes, texts and statistics (within float
// rounding: the page's maths is Go in wasm, whose math.Exp may differ from
// amd64's in the last bit).
func TestUIOfflineCompare(t *testing.T) {
	RequireUI(t)
	site := StartSite(t)
	mod := Wazero(t, site)
	tok, err := tokenizer.Load(filepath.Join(site.DemoDir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	windows := session.Windows(tok.Encode("Quantization maps each weight to a small integer and a shared scale. "+
		"Most of the time the largest logit stays the largest; sometimes the reference was unsure."), 16, nil)

	dir := t.TempDir()
	var drops []snapshot.Dropped
	for _, variant := range []string{"f32", "q4"} {
		rows, res := wazeroRun(t, mod, nil, site.DemoDir, variant, abi.Request{Mode: "panel", Windows: windows})
		l := &dump.Logits{Rows: len(rows), Vocab: len(rows[0])}
		for _, r := range rows {
			l.Data = append(l.Data, r...)
		}
		var buf bytes.Buffer
		if err := dump.Write(&buf, l); err != nil {
			t.Fatal(err)
		}
		data := buf.Bytes()
		d := snapshot.Dropped{Name: variant + ".dump", File: bytes.NewReader(data), Size: int64(len(data))}
		if variant == "f32" {
			// The receipt binds a panel whose windows have domains and
			// roles: the page breaks the statistics down as report does.
			panel := &chain.Panel{}
			for i, w := range windows {
				panel.Windows = append(panel.Windows, chain.PanelWindow{WindowID: strconv.Itoa(i), Domain: []string{"code", "prose"}[i%2], Role: "eval",
					Tokens: len(w), TokenIDsSHA256: chain.IntsSHA256(w), AttentionMaskSHA256: chain.IntsSHA256(slices.Repeat([]int{1}, len(w))), PredictionPositions: len(w) - 1})
			}
			ch := chaintest.Chain(t, panel)
			sum := sha256.Sum256(data)
			d.Receipt, err = receipt.Marshal(&receipt.Receipt{Variant: variant, Device: "wasm+cpu", Model: ch.Checkpoint.Model, Chain: ch,
				Request: receipt.Request{Mode: "panel", Windows: len(windows), PanelReceipt: panel.Seal}, Targets: res.Targets,
				Dump: receipt.Dump{SHA256: hex.EncodeToString(sum[:]), Rows: l.Rows, Vocab: l.Vocab}})
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, d.Name+".receipt.json"), d.Receipt, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, d.Name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		drops = append(drops, d)
	}
	want, err := snapshot.Offline(drops[0], drops[1], func(int) func(int) string {
		return tok.Piece
	})
	if err != nil {
		t.Fatal(err)
	}

	b := NewBrowser(t)
	ctx0, cancel0 := context.WithTimeout(b.Ctx, time.Minute)
	defer cancel0()
	if err := chromedp.Do(ctx0, chromedp.Navigate(site.URL+"/?autorun=0")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WaitState(time.Minute, "idle"); err != nil {
		t.Fatal(err)
	}
	files := []string{filepath.Join(dir, "f32.dump"), filepath.Join(dir, "f32.dump.receipt.json"), filepath.Join(dir, "q4.dump")}
	ctx, cancel := context.WithTimeout(b.Ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.CSS("#file-input"), files)); err != nil {
		t.Fatal(err)
	}
	if state, err := b.WaitState(time.Minute, "done", "error"); err != nil || state != "done" {
		b.Screenshot("error")
		t.Fatalf("offline comparison: state %q, %v: %s", state, err, Eval[string](b, `String(window.logitscope.error)`))
	}
	b.Screenshot("offline")
	_, got := pageDoc(t, b)
	wantJSON, _ := json.Marshal(want)
	var g, w map[string]any
	json.Unmarshal(got, &g)
	json.Unmarshal(wantJSON, &w)
	delete(g, "timing")
	delete(g, "created")
	delete(w, "timing")
	if err := approxEqual(g, w, "doc"); err != nil {
		t.Error(err)
	}
	if want.Breakdown["domain"]["code"] == nil || want.Breakdown["domain"]["prose"] == nil {
		t.Errorf("no breakdown by domain: %+v", want.Breakdown)
	}
	if text := Eval[string](b, `document.querySelector('#summary').innerText`); !strings.Contains(text, "By domain") || !strings.Contains(text, "By role") {
		t.Errorf("the page's summary has no breakdown:\n%s", text)
	}
	s := want.Report.Summary
	t.Logf("offline: %d positions, mean KLD %.4g, %d flips (%d close, %d clear)", s.Positions, s.KLD.Value, s.Flips, s.CloseFlips, s.ClearFlips)
}

// approxEqual compares decoded JSON, numbers within 1e-9 relative.
func approxEqual(got, want any, path string) error {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: got %.200v, want %.200v", path, got, want)
		}
		for k := range w {
			if err := approxEqual(g[k], w[k], path+"."+k); err != nil {
				return err
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: got %.200v, want %.200v", path, got, want)
		}
		for i := range w {
			if err := approxEqual(g[i], w[i], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case float64:
		g, ok := got.(float64)
		if !ok || math.Abs(g-w) > 1e-9*math.Max(1, math.Abs(w)) {
			return fmt.Errorf("%s: got %v, want %v", path, got, w)
		}
	default:
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("%s: got %v, want %v", path, got, want)
		}
	}
	return nil
}

// A link to a model the server does not have says so, naming the ones
// it has, rather than failing on a missing tokenizer.json.
func TestUIUnknownModel(t *testing.T) {
	RequireUI(t)
	site := StartSite(t)
	b := NewBrowser(t)
	if state := b.Open(site.URL+"/?model=nosuch&autorun=1", time.Minute); state != "error" {
		t.Fatalf("state %q", state)
	}
	if msg := Eval[string](b, `String(window.logitscope.error)`); !strings.Contains(msg, `model "nosuch": this server has no such model (it serves demo)`) {
		t.Fatalf("error %q", msg)
	}
}

// A Run that fails shows its error where the user looks: the error sits
// at the top of the page, and Run below it, out of a short window's view.
func TestUIErrorScrolledIntoView(t *testing.T) {
	RequireUI(t)
	site := StartSite(t)
	b := NewBrowser(t, chromedp.WindowSize(1280, 420))
	spec := snapshot.NewSpec()
	spec.Test = snapshot.LocalPrefix + "model-Q4_K_M.gguf" // no file chosen for it
	q := spec.Query()
	q.Set("autorun", "0")
	ctx, cancel := context.WithTimeout(b.Ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/?"+q.Encode())); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WaitState(time.Minute, "idle"); err != nil {
		t.Fatal(err)
	}
	Eval[bool](b, `(() => { document.querySelector("#run").scrollIntoView(); document.querySelector("#run").click(); return true; })()`)
	if state, err := b.WaitState(time.Minute, "error"); err != nil {
		t.Fatalf("%q, %v", state, err)
	}
	top := Eval[float64](b, `new Promise((r) => setTimeout(() => r(document.querySelector("#error").getBoundingClientRect().top), 300))`)
	if h := Eval[float64](b, `window.innerHeight`); top < 0 || top >= h {
		t.Fatalf("the error is at %.0f px, outside the %.0f px window", top, h)
	}
}

// On the first screen, the form's Run is in view whatever the window's
// height (it stays at the window's foot while the form is taller), the
// side selects say their full text in a title, and a chosen GGUF file's
// name shows in the note, not the browser's "No file chosen".
func TestUIRunInView(t *testing.T) {
	RequireUI(t)
	site := StartSite(t)
	for _, h := range []int{870, 600} {
		b := NewBrowser(t, chromedp.WindowSize(1400, h))
		ctx, cancel := context.WithTimeout(b.Ctx, time.Minute)
		if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/?autorun=0")); err != nil {
			t.Fatal(err)
		}
		cancel()
		if _, err := b.WaitState(time.Minute, "idle"); err != nil {
			t.Fatal(err)
		}
		r := Eval[[]float64](b, `(() => { const r = document.querySelector("#run").getBoundingClientRect(); return [r.top, r.bottom, window.innerHeight]; })()`)
		if r[0] < 0 || r[1] > r[2] {
			t.Errorf("%d px window: Run spans %.0f–%.0f px, outside the %.0f px view", h, r[0], r[1], r[2])
		}
		if got := Eval[string](b, `document.querySelector("select[name=test]").title`); !strings.HasPrefix(got, "q4 (") {
			t.Errorf("the Test select's title %q, want its option's full text", got)
		}
		if got := Eval[string](b, `(() => { const i = document.createElement("input"); i.type = "file"; const d = document.createElement("div"); d.className = "localfile"; d.append(i); document.body.append(d); return getComputedStyle(i).color; })()`); got != "rgba(0, 0, 0, 0)" {
			t.Errorf("a file input's own text is drawn (%s): it says \"No file chosen\" beside the note that names the file", got)
		}
	}
}
