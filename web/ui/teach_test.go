package main

import (
	"reflect"
	"strings"
	"testing"

	"logitscope/internal/analysis/snapshot"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/sidecar"
)

// Every token text is drawn with the same glyphs in the strip, the top-k
// tables and the inspector: byte tokens by their <0xNN> name, controls by
// their byte too (in another class), whitespace made visible (the strip keeps a
// space a space and breaks the line after ↵).
func TestGlyphs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		text  string
		strip bool
		want  []glyph
	}{
		{"word", "Paris", false, []glyph{{"Paris", ""}}},
		{"empty", "", false, []glyph{{"∅", "empty"}}},
		{"byte", "<0xF1>", false, []glyph{{"<0xF1>", "byte"}}},
		{"space and bytes", " <0xE2><0x80>", false, []glyph{{"␣", "ws"}, {"<0xE2>", "byte"}, {"<0x80>", "byte"}}},
		{"space and bytes in the strip", " <0xE2><0x80>", true, []glyph{{" ", ""}, {"<0xE2>", "byte"}, {"<0x80>", "byte"}}},
		{"not a byte name", "<0xg1><0x1>", false, []glyph{{"<0xg1><0x1>", ""}}},
		{"control", "\x0f", false, []glyph{{"<0x0F>", "ctl"}}},
		{"NUL and DEL", "\x00\x7f", false, []glyph{{"<0x00>", "ctl"}, {"<0x7F>", "ctl"}}},
		{"C1 control", "\u0085", false, []glyph{{"U+0085", "ctl"}}},
		{"newline", "a\nb", false, []glyph{{"a", ""}, {"↵", "ws"}, {"b", ""}}},
		{"newline in the strip", "a\nb", true, []glyph{{"a", ""}, {"↵", "ws"}, {"\nb", ""}}},
		{"tab and return", "\t\r", true, []glyph{{"⇥", "ws"}, {"<0x0D>", "ctl"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := glyphs(tc.text, tc.strip); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("glyphs(%q, %v) = %q, want %q", tc.text, tc.strip, got, tc.want)
			}
		})
	}
}

// panelDoc is a panel of two windows over testDoc's rows (the first opens
// with token 4, the second with the byte token 6 at position 2), from a
// synthetic model.
func panelDoc(t *testing.T) *snapshot.Doc {
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
	text := func(id int) string { return []string{"a", " b", "\n", "c", "The", "d", "<0xF1>"}[min(id, 6)] }
	targets := []int{0, 1, 0, 3}
	d, err := snapshot.Build(nil, snapshot.Capture{Logits: ref, Targets: targets, Windows: [][]int{{4, 0, 1}, {6, 0, 3}}},
		snapshot.Capture{Logits: test}, targets, text)
	if err != nil {
		t.Fatal(err)
	}
	d.Model = &snapshot.Model{Nature: sidecar.Synthetic, About: "random weights"}
	return d
}

// The strip draws each window's first token, which no row predicts,
// marked as a window start before the window's first position: the whole
// text shows, and where each window begins.
func TestStripWindows(t *testing.T) {
	s := stripHTML(panelDoc(t))
	first := strings.Index(s, `class="w0" data-w="0"`)
	second := strings.Index(s, `class="w0" data-w="1"`)
	p0, p2 := strings.Index(s, `data-i="0"`), strings.Index(s, `data-i="2"`)
	if first < 0 || second < 0 || !(first < p0 && p0 < second && second < p2) {
		t.Fatalf("window starts not before positions 0 and 2: %s", s)
	}
	if !strings.Contains(s[second:p2], `<span class="g-byte">&lt;0xF1&gt;</span>`) {
		t.Errorf("the second window's byte token is not drawn as a byte: %s", s[second:p2])
	}
	if !strings.Contains(s[first:p0], "window 1 of 2 starts") || !strings.Contains(s[first:p0], "no row predicts it") {
		t.Errorf("the window start says nothing of what it is: %s", s[first:p0])
	}
	if strings.Contains(stripHTML(testDoc(t)), `class="w0"`) {
		t.Error("a greedy run's strip marks windows")
	}
	// Windows that start with the model's BOS: a bar marks each start,
	// and the BOS's text is not drawn in the middle of the text.
	d := panelDoc(t)
	for i := range d.Windows {
		d.Windows[i].Prefix = true
	}
	s = stripHTML(d)
	bar := `<span class="w0 pre" data-w="1" title="window 2 of 2 starts · &lt;0xF1&gt; (6), the model&#39;s BOS put before each window, is context: no row predicts it"></span>`
	if !strings.Contains(s, bar) || strings.Contains(s, "g-byte") {
		t.Errorf("a BOS window start is not an empty bar: %s", s)
	}
}

// The page says what it shows: how many predictions differ and what close
// and clear calls are, what the model is, and that a random model's
// perplexity means nothing.
func TestTeachingLines(t *testing.T) {
	d := panelDoc(t)
	v := verdict(d)
	for _, want := range []string{"2 of 4 predictions differ", "1 close call (", "1 clear call (", "not a defect", "worth a look"} {
		if !strings.Contains(v, want) {
			t.Errorf("verdict %q lacks %q", v, want)
		}
	}
	if n := natureLine(d.Model); !strings.HasPrefix(n, "synthetic model, random weights") || !strings.HasSuffix(n, "· random weights") {
		t.Errorf("nature line %q", n)
	}
	secs := summaryView(d)
	if secs[0].Title != "Perplexity" || secs[0].Rows[0].Value != "synthetic random weights: perplexity is meaningless here" {
		t.Errorf("a synthetic model's perplexity has no word: %+v", secs[0].Rows[0])
	}
	for _, tc := range []struct {
		model *snapshot.Model
		want  string
	}{
		{nil, ""},
		{&snapshot.Model{Nature: sidecar.User}, "your model"},
		{&snapshot.Model{Nature: sidecar.TrainedDemo, About: "2 layers trained on TinyStories"}, "trained demo model · 2 layers trained on TinyStories"},
	} {
		d.Model = tc.model
		if got := natureLine(d.Model); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.model, got, tc.want)
		}
	}
	if secs := summaryView(d); secs[0].Rows[0].Label == "Note" {
		t.Error("a trained model's perplexity is called meaningless")
	}
	if v := verdict(testDoc(t)); !strings.HasPrefix(v, "2 of 4 predictions differ") {
		t.Errorf("verdict %q", v)
	}
}

// Zooming halves or doubles the charts' window around the selection,
// keeps it inside the document and never below minZoom positions.
func TestZoom(t *testing.T) {
	for _, tc := range []struct {
		name     string
		z        span
		factor   float64
		sel, n   int
		want     span
		from, to int
	}{
		{"in from all", span{}, 0.5, 100, 400, span{0, 200}, 0, 200},
		{"in again", span{0, 200}, 0.5, 150, 400, span{100, 200}, 100, 200},
		{"in at the end", span{}, 0.5, 399, 400, span{200, 400}, 200, 400},
		{"no smaller than minZoom", span{100, 120}, 0.5, 110, 400, span{102, 118}, 102, 118},
		{"out to all", span{100, 300}, 2, 200, 400, span{}, 0, 400},
		{"short document", span{}, 0.5, 3, 10, span{}, 0, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.z.zoomed(tc.factor, tc.sel, tc.n)
			if got != tc.want {
				t.Fatalf("zoomed %+v, want %+v", got, tc.want)
			}
			if from, to := got.of(tc.n); from != tc.from || to != tc.to {
				t.Errorf("of: %d-%d, want %d-%d", from, to, tc.from, tc.to)
			}
		})
	}
	if from, to := (span{5, 900}).of(400); from != 0 || to != 400 {
		t.Errorf("a zoom past the end shows %d-%d, want all", from, to)
	}
	d := testDoc(t)
	if c := kldChart(d, 3, span{2, 4}); !strings.Contains(c, ">2</text>") || strings.Contains(c, ">0</text><text") {
		t.Errorf("a zoomed chart's axis does not start at 2: %s", c)
	}
}
