package main

import (
	"strings"
	"testing"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/analysis/split"
	"logitscope/internal/format/dump"
)

// splitReport splits four positions of testDoc's geometry (vocab 64)
// whose argmaxes are: reference 0 0 0 0, file 0 1 0 0, engine 0 1 2 0:
// position 1 is the file's flip, position 2 the engine's alone.
func splitReport(t *testing.T) *split.Report {
	t.Helper()
	rows := func(top ...int) *dump.Logits {
		l := &dump.Logits{Rows: len(top), Vocab: 64, Data: make([]float32, len(top)*64)}
		for i, k := range top {
			l.Data[i*64+k] = 3
			l.Data[i*64+(k+1)%4] = 1
		}
		return l
	}
	rep, err := split.Compare(rows(0, 0, 0, 0), rows(0, 1, 0, 0), rows(0, 1, 2, 0), nil, margins.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// The split's panel says what report --engine-dump's text says: each
// side's mean KLD (as split.Mean prints it) and flips, the flips by
// cause, and the engine-only flips, each linking to its position.
func TestSplitHTML(t *testing.T) {
	rep := splitReport(t)
	text := func(id int) string {
		if id == 2 {
			return " two"
		}
		return ""
	}
	s := splitHTML(rep, [3]string{"ref.dump", "file.dump", "engine.dump"}, text)
	for _, want := range []string{
		"what your file does", "what your engine adds",
		`<td class="file">` + split.Mean(rep.File.KLD) + `</td>`,
		`<td class="engine">` + split.Mean(rep.Engine.KLD) + `</td>`,
		`<td class="total">` + split.Mean(rep.Total.KLD) + `</td>`,
		`<tr class="flips"><th>flips</th><td class="file">1</td><td class="engine">1</td><td class="total">2</td></tr>`,
		`the file&#39;s <b class="c-file">1</b>, the engine&#39;s alone <b class="c-engine">1</b>, both <b class="c-both">0</b>`,
		`<li data-i="2"><a href="#inspector" class="poslink" data-pos="2">position 2</a>: reference and file pick 0, the engine &#34; two&#34; (2)`,
		"reference ref.dump, file decoded exactly file.dump, engine engine.dump",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the split lacks %q:\n%s", want, s)
		}
	}
	if n := strings.Count(s, "<li "); n != 1 {
		t.Errorf("%d engine-only flips listed, want 1", n)
	}
	if rep.File.KLD.Value <= 0 || rep.Engine.KLD.Value <= 0 {
		t.Errorf("KLD file %v, engine %v: the example should have both", rep.File.KLD, rep.Engine.KLD)
	}

	rep.EngineOnly = nil
	if s := splitHTML(rep, [3]string{}, nil); !strings.Contains(s, "No flip is the engine&#39;s alone.") || strings.Contains(s, "<ol") {
		t.Errorf("no engine-only flip:\n%s", s)
	}
}

// The token strip marks the engine's flips alone (class ef), naming the
// engine's choice, and nothing else.
func TestSplitStrip(t *testing.T) {
	d := testDoc(t)
	rep := splitReport(t)
	s := stripHTMLMarked(d, engineFlips(rep, nil))
	if n := strings.Count(s, " ef\""); n != 1 {
		t.Errorf("%d positions marked, want 1:\n%s", n, s)
	}
	if !strings.Contains(s, `data-i="2"`) || !strings.Contains(s, "the engine alone flips it, to 2") {
		t.Errorf("position 2 unmarked:\n%s", s)
	}
	i := strings.Index(s, " ef\"")
	if j := strings.Index(s[i:], `data-i="`); j < 0 || !strings.HasPrefix(s[i+j:], `data-i="2"`) {
		t.Errorf("the mark is not on position 2:\n%s", s)
	}
	if stripHTMLMarked(d, nil) != stripHTML(d) {
		t.Error("no marks is not the plain strip")
	}
}
