package snapshot

import (
	"encoding/json"
	"testing"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/analysis/split"
	"logitscope/internal/format/dump"
)

// splitDoc is Build's document for pair() with the split of an engine
// that flips position 0 alone (to token 3), as JSON.
func splitDoc(t *testing.T) string {
	t.Helper()
	ref, test := pair()
	engine := &dump.Logits{Rows: 3, Vocab: 16, Data: append([]float32(nil), test.Data...)}
	engine.Data[3] = 6
	d, err := Build(nil, Capture{Logits: ref}, Capture{Logits: test}, nil, text)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := split.Compare(ref, test, engine, nil, margins.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d.SetSplit(Side{Label: "engine.bin", Device: "cpu"}, rep, text)
	if d.Split.Engine.Rows != 3 || d.Texts["3"] != text(3) || len(rep.EngineOnly) != 1 {
		t.Fatalf("SetSplit: engine rows %d, text of the engine's choice %q, engine-only %v", d.Split.Engine.Rows, d.Texts["3"], rep.EngineOnly)
	}
	data, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// A document keeps its split through Parse, and one whose split is not
// this comparison's, or not a split at all, is refused naming the field.
func TestParseSplit(t *testing.T) {
	good := splitDoc(t)
	d, err := Parse([]byte(good))
	if err != nil {
		t.Fatalf("the good document: %v", err)
	}
	if d.Split == nil || d.Split.Report.ByCause[split.Engine] != 1 || d.Split.Engine.Label != "engine.bin" {
		t.Fatalf("parsed split %+v", d.Split)
	}
	refusesForged(t, good, []forgery{
		{"engine rows", `"engine":{"label":"engine.bin","device":"cpu","rows":3}`, `"engine":{"label":"engine.bin","device":"cpu","rows":2}`, "split.engine.rows 2"},
		{"positions", `"positions":3,"vocab":16,"file"`, `"positions":2,"vocab":16,"file"`, "split.report: 2 positions"},
		{"cause", `"cause":"engine"`, `"cause":"file"`, `split.report.rows[0].cause "file"`},
		{"other comparison", `"ref_choice":0,"file_choice":0,"engine_choice":3`, `"ref_choice":1,"file_choice":1,"engine_choice":3`, "split.report.rows[0]: choices 1 and 1; the comparison's 0 and 0"},
		{"engine gguf", `"engine":{"label"`, `"engine":{"gguf":{"name":"<b>","types":{"Q4_K":1}},"label"`, `split.engine.gguf: name "<b>"`},
		{"no report", `"report":{"positions":3`, `"x":{"positions":3`, "split.report: missing"},
	})
}
