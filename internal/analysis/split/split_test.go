package split

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/receipt"
)

// rows makes a dump of 4-token rows whose argmax is top[i], with a margin
// of gap over the rest.
func rows(gap float32, top ...int) *dump.Logits {
	l := &dump.Logits{Rows: len(top), Vocab: 4}
	for _, t := range top {
		row := []float32{0, 0.1, 0.2, 0.3}
		row[t] = 0.3 + gap
		l.Data = append(l.Data, row...)
	}
	return l
}

func TestCause(t *testing.T) {
	for _, c := range []struct {
		a, f, e int
		want    string
	}{
		{1, 1, 1, Same}, {1, 2, 2, File}, {1, 1, 2, Engine}, {1, 2, 3, Both}, {1, 2, 1, EngineUndo},
	} {
		if got := CauseOf(c.a, c.f, c.e); got != c.want {
			t.Errorf("CauseOf(%d, %d, %d) = %q, want %q", c.a, c.f, c.e, got, c.want)
		}
	}
}

// Each position's choices give its cause, the counts add up per side,
// and the engine-only flips are listed; KLD splits into the file's share
// and the engine's, each measured from the side before it.
func TestCompare(t *testing.T) {
	ref := rows(1, 0, 0, 0, 0, 0)
	file := rows(1, 0, 1, 1, 1, 0)
	engine := rows(1, 0, 1, 2, 0, 3)
	r, err := Compare(ref, file, engine, nil, margins.Options{})
	if err != nil {
		t.Fatal(err)
	}
	causes := make([]string, len(r.Rows))
	for i, p := range r.Rows {
		causes[i] = p.Cause
	}
	if want := []string{Same, File, Both, EngineUndo, Engine}; !slices.Equal(causes, want) {
		t.Errorf("causes %q, want %q", causes, want)
	}
	if r.File.Flips != 3 || r.Engine.Flips != 3 || r.Total.Flips != 3 || !slices.Equal(r.EngineOnly, []int{4}) {
		t.Errorf("flips: file %d, engine %d, total %d, engine-only %v", r.File.Flips, r.Engine.Flips, r.Total.Flips, r.EngineOnly)
	}
	if r.ByCause[File] != 1 || r.ByCause[Engine] != 1 || r.ByCause[Both] != 1 || r.ByCause[EngineUndo] != 1 {
		t.Errorf("by cause %v", r.ByCause)
	}
	if p := r.Rows[0]; p.KLDFile != 0 || p.KLDEngine != 0 || p.KLDTotal != 0 {
		t.Errorf("position 0, all three equal: KLD %g %g %g", p.KLDFile, p.KLDEngine, p.KLDTotal)
	}
	// Position 1: the file moved, the engine did not move it further.
	if p := r.Rows[1]; p.KLDFile <= 0 || p.KLDEngine != 0 || math.Abs(p.KLDTotal-p.KLDFile) > 1e-12 {
		t.Errorf("position 1: KLD %g %g %g", p.KLDFile, p.KLDEngine, p.KLDTotal)
	}
	if p := r.Rows[4]; math.Abs(p.EngineMargin-1) > 1e-6 {
		t.Errorf("position 4: the file's margin of its choice over the engine's is %g, want 1", p.EngineMargin)
	}
}

func TestCompareRefusesOtherPositions(t *testing.T) {
	_, err := Compare(rows(1, 0, 0), rows(1, 0, 0), rows(1, 0), nil, margins.Options{})
	if err == nil || !strings.Contains(err.Error(), "the engine is 1 rows × 4 vocab, the reference 2 × 4") {
		t.Errorf("got %v", err)
	}
}

func ExampleReport_WriteText() {
	ref := rows(2, 0, 0, 0, 0)
	file := rows(2, 0, 1, 0, 0)
	engine := rows(2, 0, 1, 0, 2)
	r, err := Compare(ref, file, engine, nil, margins.Options{})
	if err != nil {
		panic(err)
	}
	r.WriteText(os.Stdout, 0)
	// Output:
	// three-way split over 4 positions (vocab 4)
	// what your file does          what your engine adds        together
	// (reference → exact decode)   (exact decode → engine)      (reference → engine)
	// KLD 0.373677 ± 0.373677      KLD 0.369076 ± 0.369076      KLD 0.742753 ± 0.428845
	// flips 1                      flips 1                      flips 2
	// same top-1 75.00%            same top-1 75.00%            same top-1 50.00%
	// flips by cause: the file's 1, the engine's alone 1, both 0, the file's undone by the engine 0
	//   engine-only flip at 3: reference and file pick 0, the engine 2 (file margin 2.1, KLD file→engine 1.48)
}

// A negative limit lists no engine-only flip, only how many there are.
func TestWriteTextListsNone(t *testing.T) {
	r, err := Compare(rows(2, 0, 0), rows(2, 0, 0), rows(2, 1, 2), nil, margins.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r.WriteText(&b, -1)
	if strings.Contains(b.String(), "engine-only flip at") || !strings.Contains(b.String(), "… and 2 more engine-only flips") {
		t.Errorf("got\n%s", b.String())
	}
}

// SameFile refuses a split whose exact decode and engine ran different
// GGUF files, or whose receipts do not say which, naming the dump.
func TestSameFile(t *testing.T) {
	gguf := func(sum string) *receipt.Receipt {
		return &receipt.Receipt{Variant: "q4", GGUF: &receipt.GGUF{SHA256: sum}}
	}
	for _, c := range []struct {
		name         string
		file, engine *receipt.Receipt
		want         string // "" no error
	}{
		{"no receipts", nil, nil, ""},
		{"engine's receipt only", nil, gguf("aa"), ""},
		{"same file", gguf("aa"), gguf("aa"), ""},
		{"two files", gguf("aaaaaaaaaaaa1"), gguf("bbbbbbbbbbbb2"), "f.dump ran GGUF aaaaaaaaaaaa…, e.dump ran bbbbbbbbbbbb…: the split needs the same file on both"},
		{"decode of no GGUF", &receipt.Receipt{Variant: "f32"}, gguf("aa"), "f.dump: the file decoded exactly is a GGUF file, but its receipt names none (variant f32)"},
		{"engine on no GGUF", gguf("aa"), &receipt.Receipt{Variant: "q8"}, "e.dump: the engine runs the same GGUF file, but its receipt names none (variant q8)"},
	} {
		err := SameFile(c.file, c.engine, "f.dump", "e.dump")
		if got := fmt.Sprint(err); (c.want == "" && err != nil) || (c.want != "" && got != c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// Check takes what Compare writes and names what a forged report breaks.
func TestCheck(t *testing.T) {
	fresh := func() *Report {
		r, err := Compare(rows(1, 0, 0, 0, 0, 0), rows(1, 0, 1, 1, 1, 0), rows(1, 0, 1, 2, 0, 3), nil, margins.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if err := fresh().Check(); err != nil {
		t.Fatalf("Compare's report: %v", err)
	}
	for _, c := range []struct {
		name  string
		forge func(*Report)
		want  string
	}{
		{"positions", func(r *Report) { r.Positions++ }, "positions 6: 5 rows"},
		{"vocab", func(r *Report) { r.Vocab = 0 }, "vocab 0"},
		{"kld", func(r *Report) { r.Engine.KLD.Value = math.NaN() }, "engine.kld_mean"},
		{"flips", func(r *Report) { r.Total.Flips = 6 }, "total.flips 6"},
		{"same top", func(r *Report) { r.File.SameTop = 1.5 }, "file.same_top 1.5"},
		{"index", func(r *Report) { r.Rows[2].Index = 7 }, "rows[2].index 7"},
		{"choice", func(r *Report) { r.Rows[1].EngineTop = 4 }, "rows[1]: a choice out of the vocab"},
		{"cause", func(r *Report) { r.Rows[0].Cause = Engine }, `rows[0].cause "engine": its choices 0, 0, 0 make it ""`},
		{"margin", func(r *Report) { r.Rows[4].EngineMargin = math.Inf(1) }, "rows[4]: a KLD or margin"},
		{"unknown cause", func(r *Report) { r.ByCause["<b>"] = 0 }, `by_cause: "<b>" is not a cause`},
		{"count", func(r *Report) { r.ByCause[File] = 2 }, "by_cause[file] 2: the rows have 1"},
		{"engine only", func(r *Report) { r.EngineOnly = []int{3} }, "engine_only"},
	} {
		r := fresh()
		c.forge(r)
		if err := r.Check(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
