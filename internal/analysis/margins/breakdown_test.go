package margins_test

import (
	"os"
	"strings"
	"testing"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/format/chain"
	"logitscope/internal/format/dump"
)

// Three positions over 64 tokens: the first (a code window's only
// prediction) agrees, the next two (a prose window's) flip, on a near tie
// within the row's noise (close) and against a clear preference, a
// perturbation of one token that the rest of the row cannot explain
// (clear). The tables (their means checked in Python: KLDs 0, 0.037208
// and 0.525319)
// count each window's positions under its domain and its role.
func ExampleBreakdown_WriteText() {
	const vocab = 64
	ref := &dump.Logits{Rows: 3, Vocab: vocab, Data: make([]float32, 3*vocab)}
	test := &dump.Logits{Rows: 3, Vocab: vocab, Data: make([]float32, 3*vocab)}
	set := func(l *dump.Logits, row int, a, b float32) { l.Data[row*vocab], l.Data[row*vocab+1] = a, b }
	set(ref, 0, 3, 0)
	set(test, 0, 3, 0)
	set(ref, 1, 2, 1.9)
	set(test, 1, 1.9, 2)
	for i := 2; i < vocab; i++ { // noise over the row: the tie's flip is within it
		test.Data[vocab+i] = float32(0.3 * float64(1-2*(i%2)))
	}
	set(ref, 2, 4, 0)
	set(test, 2, 4, 4.5)
	r, err := margins.Compare(ref, test, nil, margins.Options{})
	if err != nil {
		panic(err)
	}
	b, err := r.BreakdownOf([]margins.Group{
		{Positions: 1, Labels: map[string]string{"domain": "code", "role": "eval"}},
		{Positions: 2, Labels: map[string]string{"domain": "prose", "role": "eval"}},
	})
	if err != nil {
		panic(err)
	}
	b.WriteText(os.Stdout)
	// Output:
	// ====== By domain ======
	// domain               positions     mean KLD      KLD 99%   same top  flips  close  clear
	// code                         1     0.000000     0.000000   100.000%      0      0      0
	// prose                        2     0.281264     0.520438     0.000%      2      1      1
	//
	// ====== By role ======
	// role                 positions     mean KLD      KLD 99%   same top  flips  close  clear
	// eval                         3     0.187509     0.515557    33.333%      2      1      1
}

// Windows that do not tile the report's positions are refused; windows
// without labels give no breakdown; a panel receipt's windows are groups
// in panel order.
func TestBreakdownOf(t *testing.T) {
	ref := &dump.Logits{Rows: 2, Vocab: 2, Data: []float32{1, 0, 0, 1}}
	r, err := margins.Compare(ref, ref, nil, margins.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.BreakdownOf([]margins.Group{{Positions: 3}}); err == nil || !strings.Contains(err.Error(), "the windows hold 3 prediction positions, the report 2") {
		t.Fatalf("error %v", err)
	}
	if b, err := r.BreakdownOf([]margins.Group{{Positions: 2, Labels: map[string]string{"domain": ""}}}); b != nil || err != nil {
		t.Fatalf("unlabelled windows: %v, %v", b, err)
	}
	p := &chain.Panel{Windows: []chain.PanelWindow{{Domain: "a", Role: "x", PredictionPositions: 1}, {Domain: "b", PredictionPositions: 1}}}
	b, err := r.BreakdownOf(margins.PanelGroups(p))
	if err != nil || b["domain"]["a"].Positions != 1 || b["domain"]["b"].Positions != 1 || len(b["role"]) != 1 || b["role"]["x"].Positions != 1 {
		t.Fatalf("%+v, %v", b, err)
	}
}
