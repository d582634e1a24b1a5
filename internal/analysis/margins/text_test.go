package margins

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/format/routing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// goldenCases are the reports whose text is kept in testdata.
func goldenCases(t *testing.T) map[string]*Report {
	ref, test, targets := handCase()
	many, manyTest := randomPair(5, 120, 2000, 0.6)
	// Two defects: a token far below the reference's top pushed over it.
	for _, i := range []int{40, 77} {
		top := slices.Max(many.Row(i))
		manyTest.Row(i)[123] = top + 5
	}
	// Targets as a text would have them: mostly the reference's top-1, now
	// and then another token.
	manyTargets := make([]int, many.Rows)
	for i := range manyTargets {
		manyTargets[i] = (i * 131) % many.Vocab
		if i%4 != 0 {
			row := many.Row(i)
			manyTargets[i] = slices.Index(row, slices.Max(row))
		}
	}
	same, _ := randomPair(6, 3, 50, 0)
	moe, moeTest := randomPair(5, 120, 2000, 0.6)
	withRoutes(7, moe, moeTest, routing.Layout{Layers: []int{0, 2, 3}, TopK: 2, Experts: 6})
	return map[string]*Report{
		"routing": mustCompare(t, moe, moeTest, nil, Options{MaxFlips: 3}),
		"hand": mustCompare(t, ref, test, targets, Options{
			TokenText: func(id int) string { return []string{"cat", " the", "\n"}[id] },
		}),
		"argmax": mustCompare(t, many, manyTest, nil, Options{MaxFlips: 4}),
		"teacher_forced": mustCompare(t, many, manyTest, manyTargets,
			Options{GlobalSigma: true, K: 2}),
		"abs_margin": mustCompare(t, many, manyTest, nil, Options{AbsMargin: 0.5, MaxFlips: 3}),
		"identical":  mustCompare(t, same, same, nil, Options{}),
	}
}

func TestGoldenText(t *testing.T) {
	for name, r := range goldenCases(t) {
		var buf bytes.Buffer
		if err := r.WriteText(&buf); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(buf.String(), "\n"); n > 60 {
			t.Errorf("%s: %d lines, want at most 60", name, n)
		}
		path := filepath.Join("testdata", name+".golden")
		if *update {
			if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./internal/analysis/margins -update to create it)", err)
		}
		if got := buf.String(); got != string(want) {
			t.Errorf("%s: text differs from %s (go test ./internal/analysis/margins -update rewrites it):\n%s", name, path, got)
		}
	}
}

// TestJSONRoundTrip: every golden report marshals (json.Marshal refuses NaN
// and infinities, so success means none are there), unmarshals, and
// marshals to the same bytes.
func TestJSONRoundTrip(t *testing.T) {
	cases := goldenCases(t)
	// One row: no standard errors anywhere; σ 0 rows: no m/σ.
	one := logits([]float32{1, 2, 3})
	cases["one_row"] = mustCompare(t, one, one, []int{0}, Options{})
	// Absurd logits: PPL overflows float64 and must be left out, not Inf.
	huge := logits([]float32{3e38, -3e38, 0}, []float32{3e38, -3e38, 0})
	cases["huge"] = mustCompare(t, huge, huge, []int{1, 1}, Options{})

	for name, r := range cases {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var back Report
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b2, err := json.Marshal(&back)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(b, b2) {
			t.Errorf("%s: JSON changed on a round trip", name)
		}
	}
	s := cases["one_row"].Summary
	if s.KLD.Err != nil || s.SameTop.Err != nil || s.PPL.Ratio.Err != nil || cases["one_row"].Positions[0].Ratio != nil {
		t.Errorf("one row: errors and m/σ must be absent: %+v", s)
	}
	if p := cases["huge"].Summary.PPL; p.Test != nil || p.Ref != nil || p.LnRatio == nil {
		t.Errorf("huge logits: PPL %+v, want PPL(Q) and PPL(base) left out, the log ratio kept", p)
	}
	// A report read back from JSON still renders.
	var back Report
	b, _ := json.Marshal(cases["hand"])
	_ = json.Unmarshal(b, &back)
	if err := back.WriteText(&bytes.Buffer{}); err != nil {
		t.Error(err)
	}
}

func TestJSONFieldNames(t *testing.T) {
	b, err := json.Marshal(compareHand(t, Options{}))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"ref_top":[{"id":1,"logit":1,"prob":`, `"margin_of":"flip"`, `"class":"close"`,
		`"first_disagreement":0`, `"same_top":{"value":0.5,"err":0.5}`, `"criterion":{"mode":"sigma","k":3,"sigma_scope":"position"`,
		`"ln_p_ref_target":`, `"kld":{"max":`} {
		if !bytes.Contains(b, []byte(key)) {
			t.Errorf("JSON lacks %s", key)
		}
	}
}
