package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/routing"
	"logitscope/internal/model/synth"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/internal/text/chat"
	"logitscope/internal/text/tokenizer"
	"logitscope/wasm/abi"
	"logitscope/web/request"
)

// panelIn opens an autorun link for spec in b with the page's panel mode
// forced to mode (window.LOGITSCOPE_PANEL, set before the page's scripts
// run), and waits for the run.
func panelIn(t testing.TB, b *Browser, url, mode string, timeout time.Duration) {
	t.Helper()
	if _, err := chromedp.Call(b.Ctx, page.AddScriptToEvaluateOnNewDocument,
		page.AddScriptToEvaluateOnNewDocumentParams{Source: `window.LOGITSCOPE_PANEL = "` + mode + `";`}); err != nil {
		t.Fatal(err)
	}
	if state := b.Open(url, timeout); state != "done" {
		b.Screenshot("error")
		t.Fatalf("the run ended in %q: %s", state, Eval[string](b, `String(window.logitscope.error)`))
	}
}

// spooled lists what the page left in its origin's private file system.
const spooled = `(async () => { const d = await navigator.storage.getDirectory(); const n = []; for await (const k of d.keys()) n.push(k); return n; })()`

// A panel runs window by window and its analysis reads both sides a
// block at a time, the reference's rows either from its model kept open
// beside the test's (alternate) or from the origin private file system
// (opfs). Either way, on a mixture of experts (routes ride after the
// logits), the rows are engine.wasm's under wazero bit for bit, the
// document's report is the whole-capture analysis of those rows, routing
// included, exactly, and no spool file is left behind.
func TestUILongPanel(t *testing.T) {
	RequireUI(t)
	const name = "tiny-qwen3-moe"
	dir := familyModel(t, name)
	site := StartSite(t, SiteModel{name, dir})
	spec := snapshot.NewSpec()
	spec.Model, spec.Device, spec.Mode, spec.Window = name, "cpu", snapshot.Panel, 16
	corpus, err := os.ReadFile("../../internal/model/synth/corpus.txt")
	if err != nil {
		t.Fatal(err)
	}
	spec.Panel = string(corpus[:600])
	q := spec.Query()
	q.Set("autorun", "1")
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.ConfigBeside(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	req, err := request.Ref(spec, tok, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	if len(req.Windows) < 4 {
		t.Fatalf("the panel has %d windows: too few to run window by window", len(req.Windows))
	}
	mod := Wazero(t, site)
	want := map[string][][]float32{}
	var res abi.Result
	for _, v := range []string{spec.Ref, spec.Test} {
		want[v], res = wazeroRun(t, mod, nil, dir, v, req)
	}
	for _, mode := range []string{"alternate", "opfs"} {
		t.Run(mode, func(t *testing.T) {
			b := NewBrowser(t)
			panelIn(t, b, site.URL+"/?"+q.Encode(), mode, 3*time.Minute)
			doc, _ := pageDoc(t, b)
			lg := Eval[pageLogits](b, `window.logitscope.logits`)
			sides := map[string]*dump.Logits{}
			for _, side := range []struct{ variant, b64 string }{{spec.Ref, lg.Ref}, {spec.Test, lg.Test}} {
				rows := decodeRows(t, side.b64)
				compareRows(t, browserRun{Targets: doc.Tokens, Vocab: lg.Vocab, Width: lg.Width, Rows: rows}, want[side.variant], res, 0)
				sides[side.variant] = splitRows(t, res, rows, lg.Width)
			}
			native, err := margins.Compare(sides[spec.Ref], sides[spec.Test], doc.Tokens, margins.Options{TopK: snapshot.TopK})
			if err != nil {
				t.Fatal(err)
			}
			// Probabilities may differ in their last bit: math.Exp is
			// assembly on amd64 and Go in ui.wasm.
			for _, part := range []struct {
				name       string
				page, want any
			}{{"summary", doc.Report.Summary, native.Summary}, {"positions", doc.Report.Positions, native.Positions}, {"routing", doc.Report.Routing, native.Routing}} {
				if where := jsonDiff(t, part.page, part.want, 1e-12); where != "" {
					t.Errorf("the page's %s differs from the whole capture's at %s", part.name, where)
				}
			}
			if doc.Report.Routing == nil || doc.Report.Rows != len(want[spec.Ref]) {
				t.Errorf("%d rows (want %d), routing %v", doc.Report.Rows, len(want[spec.Ref]), doc.Report.Routing != nil)
			}
			if left := Eval[[]string](b, spooled); len(left) != 0 {
				t.Errorf("the run left %v in the origin private file system", left)
			}
			t.Logf("%s: %d windows, %d positions: ref run %.0f ms, test run %.0f ms, analysis %.0f ms",
				mode, len(req.Windows), doc.Report.Rows, doc.Timing.RefRun, doc.Timing.TestRun, doc.Timing.Analysis)
		})
	}
}

// splitRows is a run's rows, as the page keeps them (width float32 a row:
// the logits, then the route ids), as a capture.
func splitRows(t testing.TB, res abi.Result, rows []float32, width int) *dump.Logits {
	t.Helper()
	n := len(rows) / width
	l := &dump.Logits{Rows: n, Vocab: res.Vocab}
	if res.Routes != nil {
		l.Routes = &routing.Routes{Layout: *res.Routes, Rows: n}
	}
	for i := range n {
		logits, ids, err := res.SplitRow(rows[i*width : (i+1)*width])
		if err != nil {
			t.Fatal(err)
		}
		l.Data = append(l.Data, logits...)
		if l.Routes != nil {
			l.Routes.IDs = append(l.Routes.IDs, ids...)
		}
	}
	return l
}

// jsonDiff is where a and b, as JSON, differ by more than a relative tol
// in a number or at all elsewhere ("" when they do not).
func jsonDiff(t testing.TB, a, b any, tol float64) string {
	t.Helper()
	var x, y any
	for _, v := range []struct {
		in  any
		out *any
	}{{a, &x}, {b, &y}} {
		raw, err := json.Marshal(v.in)
		if err == nil {
			err = json.Unmarshal(raw, v.out)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var diff func(path string, x, y any) string
	diff = func(path string, x, y any) string {
		switch x := x.(type) {
		case map[string]any:
			y, ok := y.(map[string]any)
			if !ok || len(x) != len(y) {
				return path
			}
			for k, v := range x {
				if d := diff(path+"."+k, v, y[k]); d != "" {
					return d
				}
			}
		case []any:
			y, ok := y.([]any)
			if !ok || len(x) != len(y) {
				return path
			}
			for i := range x {
				if d := diff(fmt.Sprintf("%s[%d]", path, i), x[i], y[i]); d != "" {
					return d
				}
			}
		case float64:
			y, ok := y.(float64)
			if !ok || math.Abs(x-y) > tol*math.Max(math.Abs(x), math.Abs(y)) {
				return fmt.Sprintf("%s (%v, %v)", path, x, y)
			}
		default:
			if x != y {
				return fmt.Sprintf("%s (%v, %v)", path, x, y)
			}
		}
		return ""
	}
	return diff("", x, y)
}

// BenchmarkLongPanel runs a 10,000-position panel of a model with Qwen's
// vocabulary (151,936 logits a row, tiny-qwen3's layers: the rows, not
// the weights, are what is large) in a fresh Chromium per mode, f32
// against q4 on engine.wasm's CPU path, windows of 128: both sides' rows
// are 12 GB, which no page could hold. It reports the positions, the wall
// time, the page's own timings and the browser's peak resident set
// (the largest VmHWM among its processes: the page's, with its workers).
func BenchmarkLongPanel(b *testing.B) {
	RequireUI(b)
	p := synth.Presets["tiny-qwen3"]
	p.Name, p.Vocab, p.SpecialBase = "wide-qwen3", 151936, 151643
	dir := b.TempDir()
	if err := synth.Write(p, dir, synth.Options{}); err != nil {
		b.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := variant.Ensure(ck, quant.Q4, nil); err != nil {
		b.Fatal(err)
	}
	ck.Close()
	site := StartSite(b, SiteModel{p.Name, dir})
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		b.Fatal(err)
	}
	corpus, err := os.ReadFile("../../internal/model/synth/corpus.txt")
	if err != nil {
		b.Fatal(err)
	}
	const positions, window = 10000, 128
	// Whole windows of the corpus, repeated, until the panel has the
	// positions (each window of n tokens predicts n−1).
	var text string
	for len(tok.Encode(text)) < positions*window/(window-1)+window {
		text += string(corpus)
	}
	spec := snapshot.NewSpec()
	spec.Model, spec.Device, spec.Mode, spec.Window = p.Name, "cpu", snapshot.Panel, window
	spec.Panel = text
	q := spec.Query()
	q.Set("autorun", "1")
	for _, mode := range []string{"alternate", "opfs"} {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				br := NewBrowser(b)
				t0 := time.Now()
				panelIn(b, br, site.URL+"/?"+q.Encode(), mode, 60*time.Minute)
				wall := time.Since(t0)
				rss := chromiumPeakRSS(b, br)
				rows := Eval[int](br, `window.logitscope.result.report.rows`)
				tm := Eval[snapshot.Timing](br, `window.logitscope.result.timing`)
				if rows < positions {
					b.Fatalf("the panel has %d positions, want at least %d", rows, positions)
				}
				if lg := Eval[bool](br, `!!window.logitscope.logits`); lg {
					b.Errorf("the page kept the rows of %d positions for window.logitscope.logits", rows)
				}
				b.ReportMetric(float64(rows), "positions")
				b.ReportMetric(wall.Seconds(), "wall-s")
				b.ReportMetric(float64(rss)/1e6, "peakRSS-MB")
				b.ReportMetric(tm.RefRun, "ref-run-ms")
				b.ReportMetric(tm.TestRun, "test-run-ms")
				b.ReportMetric(tm.Analysis, "analysis-ms")
			}
		})
	}
}
