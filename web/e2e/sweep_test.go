package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"logitscope/internal/analysis/attribution"
	"logitscope/internal/analysis/margins"
	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/run/sensitivity"
	"logitscope/internal/run/session"
	"logitscope/internal/text/tokenizer"
)

// demoSweep sweeps the demo's q4 variant by tensor over a short panel,
// with every flip clear (a clear call needs a margin over 10⁻⁴ logits),
// and writes it as the CLI would: dir/sweep.json. It also writes a
// recipe from it (q4 or f32 per tensor, within 5 bits per weight):
// dir/recipe.json.
func demoSweep(t *testing.T, demo, dir string) (*attribution.Result, string, string) {
	t.Helper()
	ck, err := checkpoint.Open(demo)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	v, err := engine.OpenVariant(ck, "q4")
	if err != nil {
		t.Fatal(err)
	}
	x, err := engine.OpenMix(ck, engine.Options{Variant: v})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	tok, err := tokenizer.Load(filepath.Join(demo, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	bos, _ := tok.BOS()
	windows := session.Windows(tok.Encode("And the LORD spake unto Moses, saying, Speak unto the children of Israel, and say unto them, "+
		"When any man of you bring an offering unto the LORD, ye shall bring your offering of the cattle."), 24, []int{bos})
	units, err := sensitivity.Units(x.Changed(), x.Geometry().NumLayers, attribution.ByTensor)
	if err != nil {
		t.Fatal(err)
	}
	res, err := sensitivity.Sweep(x, windows, units, sensitivity.Options{Unit: attribution.ByTensor, Controls: true, Margins: margins.Options{AbsMargin: 1e-4}})
	if err != nil {
		t.Fatal(err)
	}
	res.Model, res.Test = "demo", "q4"
	if len(res.Calls) == 0 {
		t.Fatal("the sweep has no clear call to attribute")
	}
	data, err := res.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	sweep := filepath.Join(dir, "sweep.json")
	if err := os.WriteFile(sweep, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var params, bytes int64
	for _, u := range res.Units {
		params, bytes = params+u.Params, bytes+u.Bytes
	}
	r, err := attribution.Plan([]*attribution.Result{res}, params*5/8)
	if err != nil {
		t.Fatal(err)
	}
	r.Model = "demo"
	r.Measure([]attribution.Measured{{Name: "q4", Bytes: bytes, Effect: res.Whole}}, attribution.Effect{MeanKLD: r.Predicted})
	if data, err = r.Marshal(); err != nil {
		t.Fatal(err)
	}
	recipe := filepath.Join(dir, "recipe.json")
	if err := os.WriteFile(recipe, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return res, sweep, recipe
}

// A sweep dropped on the page: a heatmap cell per unit, a cell's click
// opens its report, a clear call's "what caused this?" lists its
// culprits as the sweep found them, the measure changes the heatmap, and
// the shared link reopens the same view in another browser. A recipe
// dropped draws its frontier.
func TestUISweep(t *testing.T) {
	RequireUI(t)
	site := StartSite(t)
	res, sweep, recipe := demoSweep(t, site.DemoDir, t.TempDir())

	b := NewBrowser(t)
	ctx, cancel := context.WithTimeout(b.Ctx, 2*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(site.URL+"/?autorun=0")); err != nil {
		t.Fatal(err)
	}
	if _, err := b.WaitState(time.Minute, "idle"); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.CSS("#file-input"), []string{sweep})); err != nil {
		t.Fatal(err)
	}
	if state, err := b.WaitState(time.Minute, "done", "error"); err != nil || state != "done" {
		b.Screenshot("error")
		t.Fatalf("the dropped sweep: state %q, %v: %s", state, err, Eval[string](b, `String(window.logitscope.error)`))
	}
	if kind := Eval[string](b, `window.logitscope.result.kind`); kind != attribution.Kind {
		t.Errorf("window.logitscope.result.kind %q", kind)
	}
	if n := Eval[int](b, `document.querySelectorAll("#heatmap td.cell").length`); n != len(res.Units) {
		t.Errorf("%d heatmap cells, want %d units", n, len(res.Units))
	}
	top := res.Units[0].Name
	call := res.Calls[0]
	// Clicked in the page (element.click(): the events the page
	// delegates from #sweep-body, wherever the layout puts the cell).
	click := func(sel, then string) {
		t.Helper()
		Eval[bool](b, `(() => { document.querySelector(`+"`"+sel+"`"+`).click(); return true })()`)
		if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(then))); err != nil {
			b.Screenshot("sweep")
			t.Fatalf("clicking %s: no %s: %v", sel, then, err)
		}
	}
	click(`#heatmap td[data-unit="0"]`, "#unit-report")
	click(`button.why[data-call="0"]`, "table.culprits")
	if h := Eval[string](b, `document.querySelector("#unit-report h3").textContent`); !strings.Contains(h, top) {
		t.Errorf("the report of the first cell is %q, want %s", h, top)
	}
	culprits := Eval[[]string](b, `[...document.querySelectorAll("table.culprits th")].map(th => th.textContent)`)
	if len(culprits) != len(call.Culprits) || culprits[0] != call.Culprits[0].Unit {
		t.Errorf("the clear call's culprits %v, the sweep's %+v", culprits, call.Culprits)
	}
	// The measure: the select's change redraws the heatmap with its values.
	Eval[bool](b, `(() => { const s = document.querySelector("#sweep-measure"); s.value = "clear"; s.dispatchEvent(new Event("change", {bubbles: true})); return true })()`)
	if err := chromedp.Do(ctx, chromedp.WaitReady(chromedp.CSS(`#sweep-measure option[value="clear"][selected]`))); err != nil {
		t.Fatal(err)
	}
	b.Screenshot("sweep")

	link := shareLink(t, b)
	for _, want := range []string{"measure=clear", "unit=1", "call=1"} {
		if !strings.Contains(link, want) {
			t.Errorf("the link %s has no %s", link, want)
		}
	}
	b2 := NewBrowser(t)
	if state := b2.Open(link, time.Minute); state != "done" {
		t.Fatalf("the shared sweep ended in %q: %s", state, Eval[string](b2, `String(window.logitscope.error)`))
	}
	if h := Eval[string](b2, `document.querySelector("#unit-report h3").textContent`); !strings.Contains(h, top) {
		t.Errorf("the reopened link's report is %q", h)
	}
	if n := Eval[int](b2, `document.querySelectorAll("table.culprits th").length`); n != len(call.Culprits) {
		t.Errorf("the reopened link lists %d culprits", n)
	}

	// A recipe: its frontier and its dots.
	if err := chromedp.Do(ctx, chromedp.SetUploadFiles(chromedp.CSS("#file-input"), []string{recipe})); err != nil {
		t.Fatal(err)
	}
	if state, err := b.WaitState(time.Minute, "done", "error"); err != nil || state != "done" {
		t.Fatalf("the dropped recipe: state %q, %v", state, err)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("#frontier svg polyline"))); err != nil {
		b.Screenshot("recipe")
		t.Fatal(err)
	}
	if n := Eval[int](b, `document.querySelectorAll("#frontier circle.mark").length`); n != 2 {
		t.Errorf("%d dots on the frontier, want q4 and the recipe", n)
	}
	b.Screenshot("recipe")
}
