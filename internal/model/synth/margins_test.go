package synth

import (
	"math"
	"path/filepath"
	"sort"
	"testing"

	"logitscope/internal/engine"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/run/session"
	"logitscope/internal/text/tokenizer"
)

// marginStats teacher-forces the corpus through a freshly written preset
// and returns sorted top-1/top-2 logit margins, top-1 probabilities, the
// share of positions whose argmax repeats the input token, and the number
// of distinct argmax tokens.
func marginStats(t *testing.T, preset string) (margins, p1 []float64, repeat float64, distinct int) {
	dir := filepath.Join(t.TempDir(), preset)
	if err := Write(Presets[preset], dir, Options{}); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(corpus)[:400]
	e, err := engine.Open(ck, engine.Options{Capacity: len(ids)})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := session.Forward(e, ids, true)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	reps := 0
	for i, row := range rows {
		a, b := top2(row)
		margins = append(margins, float64(row[a]-row[b]))
		var z float64
		for _, v := range row {
			z += math.Exp(float64(v - row[a]))
		}
		p1 = append(p1, 1/z)
		if a == ids[i] {
			reps++
		}
		seen[a] = true
	}
	sort.Float64s(margins)
	sort.Float64s(p1)
	return margins, p1, float64(reps) / float64(len(rows)), len(seen)
}

func top2(row []float32) (a, b int) {
	a, b = 0, 1
	if row[b] > row[a] {
		a, b = b, a
	}
	for i := 2; i < len(row); i++ {
		switch {
		case row[i] > row[a]:
			a, b = i, a
		case row[i] > row[b]:
			b = i
		}
	}
	return a, b
}

func q(x []float64, f float64) float64 { return x[int(f*float64(len(x)-1))] }

func TestTinyMargins(t *testing.T) {
	for _, preset := range []string{"tiny", "tiny-llama", "tiny-qwen3"} {
		margins, p1, repeat, distinct := marginStats(t, preset)
		t.Logf("%s: margin p5 %.3f p25 %.3f p50 %.3f p75 %.3f p95 %.3f; top-1 prob p10 %.2f p50 %.2f p90 %.2f; repeats input %.0f%%; %d distinct argmax",
			preset, q(margins, .05), q(margins, .25), q(margins, .5), q(margins, .75), q(margins, .95),
			q(p1, .1), q(p1, .5), q(p1, .9), 100*repeat, distinct)
		// Near ties and confident picks must both occur, logits must be
		// peaked, and the model must not echo its input or collapse.
		if q(margins, .05) > 0.25 || q(margins, .95) < 3 || q(p1, .5) < 0.5 || repeat > 0.3 || distinct < 50 {
			t.Errorf("%s: the generator's logits lost the properties margin work needs", preset)
		}
	}
}

// Every preset's built-in tokenizer loads, puts the ChatML tokens where the
// preset says, and round-trips text.
func TestPresetTokenizers(t *testing.T) {
	for _, name := range PresetNames() {
		p := Presets[name]
		v, err := vocabularyFor(p, "")
		b, special := v.json, v.bos
		if err != nil {
			t.Fatal(err)
		}
		tok, err := tokenizer.Parse(b, name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i, s := range specials {
			if id, ok := tok.TokenID(s); !ok || id != special+i || (p.SpecialBase != 0 && id != p.SpecialBase+i) {
				t.Errorf("%s: %s is %d, want %d", name, s, id, special+i)
			}
		}
		text := "Hello, world! 123 café"
		if got := tok.Decode(tok.Encode(text), false); got != text {
			t.Errorf("%s: round trip gave %q", name, got)
		}
	}
}
