package main

import (
	"encoding/xml"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/routing"
)

// testDoc compares two 4-row × 6-vocab captures: row 0 agrees, row 1 is a
// near tie that flips (close), row 2 a strong preference that flips
// (clear), row 3 agrees.
func testDoc(t *testing.T) *snapshot.Doc {
	t.Helper()
	const vocab = 64
	rows := func(r [][]float32) *dump.Logits {
		l := &dump.Logits{Rows: len(r), Vocab: vocab, Data: make([]float32, len(r)*vocab)}
		for i, v := range r {
			copy(l.Data[i*vocab:], v)
		}
		return l
	}
	ref := rows([][]float32{{5, 1}, {2, 1.99}, {9}, {0, 0, 0, 4}})
	test := rows([][]float32{{5, 1.1}, {1.98, 2}, {0, 9}, {0, 0, 0, 4.2}})
	text := func(id int) string {
		if id < 6 {
			return []string{"a", " b", "\n", "", "<e>", "f"}[id]
		}
		return "x"
	}
	spec := snapshot.NewSpec()
	spec.Prompt = "hi"
	d, err := snapshot.Build(&spec,
		snapshot.Capture{Side: snapshot.Side{Label: "f32", Device: "cpu"}, Logits: ref, PromptIDs: []int{5, 4}, Output: []int{0, 0, 0, 3}},
		snapshot.Capture{Side: snapshot.Side{Label: "q4", Device: "webgpu", Adapter: "SwiftShader"}, Logits: test},
		nil, text)
	if err != nil {
		t.Fatal(err)
	}
	d.Timing.RefRun = 12.5
	return d
}

// moeDoc is testDoc with routes (sparse layers 0 and 2, top-2 of 4
// experts): row 1 reorders at layer 2, row 2 routes to another expert at
// layer 0 and reorders at layer 2, row 3 routes to another at layer 2.
func moeDoc(t *testing.T) *snapshot.Doc {
	t.Helper()
	const vocab = 64
	rows := func(r [][]float32, ids ...int32) *dump.Logits {
		l := &dump.Logits{Rows: len(r), Vocab: vocab, Data: make([]float32, len(r)*vocab)}
		for i, v := range r {
			copy(l.Data[i*vocab:], v)
		}
		l.Routes = &routing.Routes{Layout: routing.Layout{Layers: []int{0, 2}, TopK: 2, Experts: 4}, Rows: len(r), IDs: ids}
		return l
	}
	ref := rows([][]float32{{5, 1}, {2, 1.99}, {9}, {0, 0, 0, 4}}, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3)
	test := rows([][]float32{{5, 1.1}, {1.98, 2}, {0, 9}, {0, 0, 0, 4.2}}, 0, 1, 2, 3, 0, 1, 3, 2, 3, 1, 3, 2, 0, 1, 2, 0)
	d, err := snapshot.Build(nil, snapshot.Capture{Logits: ref}, snapshot.Capture{Logits: test}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A mixture of experts' document adds the routing section, marks the
// strip, lays out each position's experts per layer, and its filters pick
// the flips or the routing changes.
func TestRoutingView(t *testing.T) {
	d := moeDoc(t)
	var sec *section
	for _, s := range summaryView(d) {
		if s.Title == "Expert routing" {
			sec = &s
		}
	}
	if sec == nil {
		t.Fatal("no Expert routing section")
	}
	all := map[string]kv{}
	for _, r := range sec.Rows {
		all[r.Label] = r
	}
	for label, want := range map[string]string{
		"Another expert set": "2 of 4 positions", "Only reordered": "1", "First routing change": "position 2",
		"Experts swapped": "2 of 16 choices", "Flips at a set change": "1 of 2", "Sparse layers": "layers 0,2: top-2 of 4 experts",
		"Layer 0": "1 set · 0 order · 1 swapped", "Layer 2": "1 set · 2 order · 1 swapped",
	} {
		if got := all[label].Value; got != want {
			t.Errorf("%s: %q, want %q", label, got, want)
		}
	}
	if r := all["First routing change"]; r.Pos != 2 || r.Note != "layers 0" {
		t.Errorf("first routing change %+v", r)
	}
	for _, s := range summaryView(testDoc(t)) {
		if s.Title == "Expert routing" {
			t.Error("a dense document has a routing section")
		}
	}

	strip := stripHTML(d)
	for _, want := range []string{`class="t agree" data-i="0"`, `class="t close ro" data-i="1"`, `class="t clear rs" data-i="2"`, `class="t agree rs" data-i="3"`,
		`another expert set at layers 0`} {
		if !strings.Contains(strip, want) {
			t.Errorf("strip lacks %s: %s", want, strip)
		}
	}
	if strings.Contains(stripHTML(testDoc(t)), " r") {
		t.Error("a dense document's strip has routing marks")
	}

	v := inspectorView(d, 2)
	want := []routeRow{
		{Layer: 0, Change: "set", Ref: []expert{{0, true}, {1, false}}, Test: []expert{{3, true}, {1, false}}},
		{Layer: 2, Change: "order", Ref: []expert{{2, false}, {3, false}}, Test: []expert{{3, false}, {2, false}}},
	}
	if v.Route != "set" || !reflect.DeepEqual(v.Routes, want) {
		t.Errorf("inspector routes %q %+v, want %+v", v.Route, v.Routes, want)
	}
	if v := inspectorView(testDoc(t), 2); v.Route != "" || v.Routes != nil {
		t.Errorf("a dense position has routes %q %v", v.Route, v.Routes)
	}

	for _, c := range []struct {
		filter   string
		from     int
		dir      int
		want     int
		nflagged int
	}{
		{snapshot.TabFlips, 0, 1, 1, 2}, {snapshot.TabFlips, 2, 1, -1, 2}, {snapshot.TabRoutes, 0, 1, 2, 2},
		{snapshot.TabRoutes, 2, 1, 3, 2}, {snapshot.TabRoutes, 2, -1, -1, 2}, {snapshot.TabAll, 3, -1, 2, 3},
	} {
		if got := nextFlagged(d, c.from, c.dir, c.filter); got != c.want {
			t.Errorf("nextFlagged(%d, %d, %s) = %d, want %d", c.from, c.dir, c.filter, got, c.want)
		}
		n := 0
		for i := range d.Report.Positions {
			if flagged(d, i, c.filter) {
				n++
			}
		}
		if n != c.nflagged {
			t.Errorf("%s flags %d positions, want %d", c.filter, n, c.nflagged)
		}
	}
	// A dense document flags its flips alone, whatever the filter.
	if nextFlagged(testDoc(t), 0, 1, snapshot.TabRoutes) != -1 || nextFlagged(testDoc(t), 0, 1, snapshot.TabAll) != 1 {
		t.Error("a dense document's flagged positions")
	}
}

func TestSummaryView(t *testing.T) {
	d := testDoc(t)
	secs := summaryView(d)
	var titles []string
	all := map[string]kv{}
	for _, s := range secs {
		titles = append(titles, s.Title)
		for _, r := range s.Rows {
			all[r.Label] = r
		}
	}
	if got := strings.Join(titles, ","); got != "KL divergence,Token probability,Argmax flips,Timing,Sides" {
		t.Errorf("sections %s (no PPL without targets)", got)
	}
	for _, l := range []string{"Mean KLD", "Maximum KLD", "99.9% KLD", "Median KLD", "0.1% KLD", "Minimum KLD",
		"Mean Δp", "75.0% Δp", "25.0% Δp", "RMS Δp", "Same top p", "Criterion"} {
		if _, ok := all[l]; !ok {
			t.Errorf("no %q row", l)
		}
	}
	if r := all["Flips"]; r.Value != "2 of 4 positions" {
		t.Errorf("flips %q", r.Value)
	}
	if r := all["Close calls"]; r.Value != "1" {
		t.Errorf("close %q", r.Value)
	}
	if r := all["Clear calls"]; r.Value != "1" {
		t.Errorf("clear %q", r.Value)
	}
	if r := all["First disagreement"]; r.Pos != 1 || !strings.Contains(r.Note, "close call") {
		t.Errorf("first disagreement %+v", r)
	}
	if r := all["Reference run"]; r.Value != "12 ms" && r.Value != "13 ms" {
		t.Errorf("timing %q", r.Value)
	}
	if _, ok := all["Open test"]; ok {
		t.Error("unmeasured timings are shown")
	}
	if r := all["Test"]; r.Value != "q4 · webgpu · SwiftShader · 4 rows" {
		t.Errorf("test side %q", r.Value)
	}
	if r := all["Same top p"]; r.Value != "50.000 ± 28.868%" {
		t.Errorf("same top p %q", r.Value)
	}
}

func TestSummaryHTML(t *testing.T) {
	s := summaryHTML(summaryView(testDoc(t)))
	dec := xml.NewDecoder(strings.NewReader("<div>" + s + "</div>"))
	tables := 0
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%v in %s", err, s)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "table" {
			tables++
		}
	}
	if tables != 5 {
		t.Errorf("%d tables, want 5", tables)
	}
	if !strings.Contains(s, `data-pos="1"`) || !strings.Contains(s, `<tr class="clear"><th>Clear calls</th>`) {
		t.Errorf("no link to the first disagreement or no class: %s", s)
	}
}

func TestSummaryViewPPL(t *testing.T) {
	d := testDoc(t)
	ref := &dump.Logits{Rows: 2, Vocab: 3, Data: []float32{1, 0, 0, 0, 2, 0}}
	test := &dump.Logits{Rows: 2, Vocab: 3, Data: []float32{1, 0.5, 0, 0, 1.5, 0}}
	d, err := snapshot.Build(nil, snapshot.Capture{Logits: ref, Targets: []int{0, 1}},
		snapshot.Capture{Logits: test}, []int{0, 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	secs := summaryView(d)
	if secs[0].Title != "Perplexity" || len(secs[0].Rows) != 6 || !strings.Contains(secs[0].Rows[0].Value, " ± ") {
		t.Errorf("perplexity section %+v", secs[0])
	}
	// A panel's token is the text's, which no side predicted: the
	// inspector calls it the target.
	if v := inspectorView(d, 1); v.TokenLabel != "target" || v.TokenID != 1 {
		t.Errorf("a panel position's token: %q #%d, want the target #1", v.TokenLabel, v.TokenID)
	}
}

func TestInspectorView(t *testing.T) {
	d := testDoc(t)
	v := inspectorView(d, 2)
	if v.Class != "clear" || v.Count != 4 || v.Index != 2 || v.TokenLabel != "reference chose" {
		t.Fatalf("view %+v", v)
	}
	if len(v.Ref) != snapshot.TopK {
		t.Errorf("%d ref rows", len(v.Ref))
	}
	if v.Ref[0].ID != 0 || v.Ref[0].Mark != "a" || v.Test[0].ID != 1 || v.Test[0].Mark != "b" {
		t.Errorf("marks: ref %+v test %+v", v.Ref[0], v.Test[0])
	}
	if want := []glyph{{"␣", "ws"}, {"b", ""}}; !reflect.DeepEqual(v.Test[0].Text, want) {
		t.Errorf("text %q, want %q: a visible space", v.Test[0].Text, want)
	}
	facts := map[string]kv{}
	for _, f := range v.Facts {
		facts[f.Label] = f
	}
	if f := facts["m = z_ref[a] − z_ref[b]"]; f.Value != "9.0000 logits" {
		t.Errorf("margin %+v", f)
	}
	if f := facts["Rank of a in test"]; f.Value != "2" {
		t.Errorf("rank %+v", f)
	}
	v = inspectorView(d, 0)
	if v.Ref[0].Mark != "ab" {
		t.Errorf("agreeing top-1 mark %q", v.Ref[0].Mark)
	}
	found := false
	for _, f := range v.Facts {
		found = found || f.Label == "m = z_ref[a] − z_ref[runner-up]"
	}
	if !found {
		t.Error("no runner-up margin on an agreeing position")
	}
}

func TestStripHTML(t *testing.T) {
	d := testDoc(t)
	s := stripHTML(d)
	// Well-formed once wrapped, one span per prompt token and position.
	dec := xml.NewDecoder(strings.NewReader("<div>" + s + "</div>"))
	spans := map[string]int{}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%v in %s", err, s)
		}
		if se, ok := tok.(xml.StartElement); ok && se.Name.Local == "span" {
			for _, a := range se.Attr {
				if a.Name.Local == "class" {
					spans[a.Value]++
				}
			}
		}
	}
	if spans["p"] != 2 || spans["t agree"] != 2 || spans["t close"] != 1 || spans["t clear"] != 1 {
		t.Errorf("spans %v", spans)
	}
	if !strings.Contains(s, "&lt;e&gt;") {
		t.Error("token text not escaped")
	}
	if !strings.Contains(s, `data-i="3"`) || strings.Contains(s, `data-i="4"`) {
		t.Error("positions not numbered 0..3")
	}
}

func TestCharts(t *testing.T) {
	d := testDoc(t)
	for name, s := range map[string]string{"kld": kldChart(d, 1, span{}), "margin": marginChart(d, -1, span{})} {
		if !strings.HasPrefix(s, "<svg") || !strings.HasSuffix(s, "</svg>") {
			t.Errorf("%s: %.80s…", name, s)
		}
	}
	if !strings.Contains(marginChart(d, 0, span{}), `class="boundary"`) {
		t.Error("no k·σ boundary in the margin chart")
	}
	d.Report.Criterion = margins.Criterion{Mode: "abs", AbsMargin: 1}
	if !strings.Contains(marginChart(d, 0, span{}), `<line class="boundary"`) {
		t.Error("no fixed threshold line")
	}
}

func TestFormat(t *testing.T) {
	e := 0.5
	for got, want := range map[string]string{
		est(&margins.Estimate{Value: 0.25, Err: &e}, 100, 3, "%"): "25.000 ± 50.000%",
		est(&margins.Estimate{Value: 1}, 1, 2, ""):                "1.00 ± n/a",
		est(nil, 1, 2, ""):        "n/a",
		ms(0):                     "—",
		ms(3.25):                  "3.2 ms",
		ms(840):                   "840 ms",
		ms(12400):                 "12.4 s",
		size(512):                 "512 B",
		size(1.5e6):               "1.50 MB",
		size(23.4e9):              "23.4 GB",
		visible(" a\n\t\x0f"):     "␣a↵⇥<0x0F>",
		visible(""):               "∅",
		short("0123456789abcdef"): "0123456789ab…",
		ggufNote(&snapshot.GGUF{Name: "m.gguf", Types: map[string]int{"F32": 113, "Q4_K": 169, "Q6_K": 29}}):                               "GGUF · Q4_K 169, F32 113, Q6_K 29",
		ggufNote(&snapshot.GGUF{Name: "m.gguf", SHA256: "0123456789abcdef", Bytes: 4.92e9, Types: map[string]int{"Q4_0": 7}, Local: true}): "GGUF · Q4_0 7 · 4.92 GB · sha256 0123456789ab… · local file, not uploaded",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}

func TestModelNames(t *testing.T) {
	fp := strings.Repeat("ab", 32)
	for _, c := range []struct {
		spec       snapshot.Spec
		name, note string
	}{
		{snapshot.Spec{Model: "demo"}, "demo", ""},
		{snapshot.Spec{Model: "local:"}, "a model folder from this computer…", ""},
		{snapshot.Spec{Model: "local:Qwen3-0.6B/"}, "folder Qwen3-0.6B (from this computer)", "model folder Qwen3-0.6B · local files, not uploaded"},
		{snapshot.Spec{Model: "local:tiny/", Fingerprint: fp}, "folder tiny (from this computer)",
			"model folder tiny · local files, not uploaded · checkpoint fingerprint abababababab…"},
	} {
		if got := modelName(c.spec.Model); got != c.name {
			t.Errorf("modelName(%q) = %q, want %q", c.spec.Model, got, c.name)
		}
		if got := localModelNote(&c.spec); got != c.note {
			t.Errorf("localModelNote(%+v) = %q, want %q", c.spec, got, c.note)
		}
	}
}

func TestSnapID(t *testing.T) {
	id := "0123456789abcdef0123456789abcdef"
	for path, want := range map[string]string{
		"/r/" + id: id, "/": "", "/r/": "", "/r/" + id + "/": "", "/r/" + strings.ToUpper(id): "",
		"/r/" + id[:31] + "g": "", "/x/" + id: "",
	} {
		if got := snapID(path); got != want {
			t.Errorf("snapID(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestSoftwareAdapter(t *testing.T) {
	for name, want := range map[string]bool{
		"google swiftshader":   true,
		"mesa llvmpipe":        true,
		"Mesa lavapipe (LLVM)": true,
		"nvidia ada-lovelace":  false,
		"apple metal-3":        false,
		"":                     false,
	} {
		if got := softwareAdapter(name); got != want {
			t.Errorf("softwareAdapter(%q) = %v, want %v", name, got, want)
		}
	}
}

// A document of dumps whose receipts bind a panel with domains and roles
// shows a section per key after the flips, a row per label with report's
// columns; one without shows none (TestSummaryView).
func TestSummaryBreakdown(t *testing.T) {
	d := testDoc(t)
	var err error
	d.Breakdown, err = d.Report.BreakdownOf([]margins.Group{
		{Positions: 2, Labels: map[string]string{"domain": "prose", "role": "eval"}},
		{Positions: 2, Labels: map[string]string{"domain": "code", "role": "eval"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	secs := summaryView(d)
	var titles []string
	rows := map[string]kv{}
	for _, s := range secs {
		titles = append(titles, s.Title)
		if strings.HasPrefix(s.Title, "By ") {
			for _, r := range s.Rows {
				rows[s.Title+"/"+r.Label] = r
			}
		}
	}
	if got := strings.Join(titles, ","); got != "KL divergence,Token probability,Argmax flips,By domain,By role,Timing,Sides" {
		t.Errorf("sections %s", got)
	}
	prose, code := d.Breakdown["domain"]["prose"], d.Breakdown["domain"]["code"]
	if prose.Flips+code.Flips != d.Report.Summary.Flips || prose.Positions != 2 {
		t.Fatalf("prose %+v, code %+v", prose, code)
	}
	want := "2 positions · KLD " + fixed(code.KLD.Value, 6) + " · 99% " + fixed(code.KLDQuant.P99, 6) + " · same top " + pct(code.SameTop.Value, 2) +
		" · " + strconv.Itoa(code.Flips) + " flips, " + strconv.Itoa(code.ClearFlips) + " clear"
	if r := rows["By domain/code"]; r.Value != want {
		t.Errorf("code: %q, want %q", r.Value, want)
	}
	if r := rows["By role/eval"]; !strings.HasPrefix(r.Value, "4 positions · ") {
		t.Errorf("eval: %q", r.Value)
	}
}

// A conform snapshot opens on its case and the thresholds it failed, each
// worded as the JUnit failure words it; a passing case says so.
func TestConformSection(t *testing.T) {
	tests := []struct {
		name string
		c    snapshot.Conform
		want []string // label: value, in order
	}{
		{"failed", snapshot.Conform{Suite: "tiny", Case: "q4-panel", Pair: 1, Pairs: 1, Failures: []string{"mean_kld 0.3 > max 0.1", "clear_flips 4 > max 0"}},
			[]string{"Case: q4-panel", "Suite: tiny", "Failed: mean_kld 0.3 > max 0.1", "Failed: clear_flips 4 > max 0"}},
		{"second of three prompts", snapshot.Conform{Case: "greedy", Pair: 2, Pairs: 3, Failures: []string{"same_top1 0.5000 < min 0.9"}},
			[]string{"Case: greedy", "Capture: 2 of 3", "Failed: same_top1 0.5000 < min 0.9"}},
		{"passed", snapshot.Conform{Suite: "s", Case: "ok", Pair: 1, Pairs: 1}, []string{"Case: ok", "Suite: s", "Result: pass"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := testDoc(t)
			d.Conform = &tc.c
			secs := summaryView(d)
			if secs[0].Title != "Conformance case" {
				t.Fatalf("first section %q", secs[0].Title)
			}
			var got []string
			for _, r := range secs[0].Rows {
				got = append(got, r.Label+": "+r.Value)
				if r.Label == "Failed" && r.Class != "clear" {
					t.Errorf("failure row class %q", r.Class)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("rows %q, want %q", got, tc.want)
			}
		})
	}
}
