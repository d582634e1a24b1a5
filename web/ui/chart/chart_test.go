package chart

import (
	"encoding/xml"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestTicks(t *testing.T) {
	for _, c := range []struct {
		max   float64
		n     int
		top   float64
		ticks []float64
	}{
		{1, 4, 1, []float64{0, 0.25, 0.5, 0.75, 1}},
		{0.9, 4, 1, []float64{0, 0.25, 0.5, 0.75, 1}},
		{7, 4, 8, []float64{0, 2, 4, 6, 8}},
		{0.013, 4, 0.015, []float64{0, 0.005, 0.01, 0.015}},
		{100, 4, 100, []float64{0, 25, 50, 75, 100}},
		{0, 4, 1, []float64{0, 1}},
		{math.Inf(1), 4, 1, []float64{0, 1}},
		{math.NaN(), 4, 1, []float64{0, 1}},
	} {
		ticks, top := Ticks(c.max, c.n)
		if math.Abs(top-c.top) > 1e-12 || len(ticks) != len(c.ticks) {
			t.Errorf("Ticks(%v, %d) = %v, %v; want %v, %v", c.max, c.n, ticks, top, c.ticks, c.top)
			continue
		}
		for i := range ticks {
			if math.Abs(ticks[i]-c.ticks[i]) > 1e-12 {
				t.Errorf("Ticks(%v, %d) = %v; want %v", c.max, c.n, ticks, c.ticks)
				break
			}
		}
		if !(top >= c.max) && !math.IsNaN(c.max) && !math.IsInf(c.max, 0) {
			t.Errorf("Ticks(%v): top %v below the maximum", c.max, top)
		}
	}
}

func TestLabel(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 0.25: "0.25", 120: "120", 1e-5: "1e-05", 2.5e6: "2.5e+06", 0.005: "0.005", 3 * 0.05: "0.15"} {
		if got := Label(v); got != want {
			t.Errorf("Label(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestGeometry(t *testing.T) {
	f := Frame{W: 100, H: 50, Left: 10, Right: 10, Top: 5, Bottom: 5}
	if f.PlotW() != 80 || f.PlotH() != 40 {
		t.Fatalf("plot %v × %v", f.PlotW(), f.PlotH())
	}
	if x := f.X(0, 4); x != 20 {
		t.Errorf("X(0,4) = %v, want 20", x)
	}
	if x := f.X(3, 4); x != 80 {
		t.Errorf("X(3,4) = %v, want 80", x)
	}
	if y := f.Y(0, 2); y != 45 {
		t.Errorf("Y(0) = %v, want the bottom 45", y)
	}
	if y := f.Y(2, 2); y != 5 {
		t.Errorf("Y(top) = %v, want 5", y)
	}
	if y := f.Y(9, 2); y != 5 {
		t.Errorf("Y above top = %v, want clamped to 5", y)
	}
	// IndexAt inverts X for every band centre.
	for count := 1; count < 300; count += 37 {
		for i := 0; i < count; i++ {
			if got := f.IndexAt(f.X(i, count)/f.W, count); got != i {
				t.Fatalf("IndexAt(X(%d, %d)) = %d", i, count, got)
			}
		}
	}
	for _, fx := range []float64{0, 0.05, 0.95, 1, math.NaN()} {
		if got := f.IndexAt(fx, 4); got != -1 {
			t.Errorf("IndexAt(%v) = %d, want -1 outside the plot", fx, got)
		}
	}
	if got := f.IndexAt(0.5, 0); got != -1 {
		t.Errorf("IndexAt with no positions = %d", got)
	}
}

func TestPosTicks(t *testing.T) {
	if got := posTicks(0, 8, 10); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("posTicks(8) = %v", got)
	}
	if got := posTicks(0, 2000, 10); !slices.Equal(got, []int{0, 200, 400, 600, 800, 1000, 1200, 1400, 1600, 1800}) {
		t.Errorf("posTicks(2000) = %v", got)
	}
	if got := posTicks(0, 0, 10); got != nil {
		t.Errorf("posTicks(0) = %v", got)
	}
}

// wellFormed parses the SVG and counts elements by name and class.
func wellFormed(t *testing.T, s string) map[string]int {
	t.Helper()
	count := map[string]int{}
	d := xml.NewDecoder(strings.NewReader(s))
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, s)
		}
		if se, ok := tok.(xml.StartElement); ok {
			count[se.Name.Local]++
			for _, a := range se.Attr {
				if a.Name.Local == "class" {
					count[se.Name.Local+"."+a.Value]++
				}
			}
		}
	}
	return count
}

func TestBars(t *testing.T) {
	s := Bars(Default, 0, []float64{0.1, 0, 0.3, math.NaN(), 0.2}, []Kind{Agree, Agree, Clear, Agree, Close}, 2, "position", "KLD <nats>")
	c := wellFormed(t, s)
	if c["svg"] != 1 || c["path.bar agree"] != 1 || c["path.bar clear"] != 1 || c["path.bar close"] != 1 || c["rect.cursor"] != 1 {
		t.Errorf("elements %v", c)
	}
	if !strings.Contains(s, "KLD &lt;nats&gt;") {
		t.Errorf("title not escaped: %s", s)
	}
	// Zero and NaN values draw nothing: 3 bars, one M each.
	if got := strings.Count(s, "M"); got != 3 {
		t.Errorf("%d bars drawn, want 3", got)
	}
	if c := wellFormed(t, Bars(Default, 0, nil, nil, -1, "x", "y")); c["path.bar agree"] != 0 || c["rect.cursor"] != 0 {
		t.Errorf("empty chart draws %v", c)
	}
}

func TestScatter(t *testing.T) {
	y := []float64{1, 2, 0.5}
	s := Scatter(Default, 0, y, []Kind{Agree, Close, Clear}, []float64{3, 3, 1}, -1, 0, "position", "margin")
	c := wellFormed(t, s)
	if c["path.boundary"] != 1 || c["line.boundary"] != 0 || c["path.dot agree"] != 1 || c["path.dot close"] != 1 || c["path.dot clear"] != 1 {
		t.Errorf("elements %v", c)
	}
	c = wellFormed(t, Scatter(Default, 0, y, nil, nil, 1.5, -1, "position", "margin"))
	if c["path.boundary"] != 0 || c["line.boundary"] != 1 || c["path.dot agree"] != 1 {
		t.Errorf("elements %v", c)
	}
}

func BenchmarkBars2000(b *testing.B) {
	v := make([]float64, 2000)
	k := make([]Kind, 2000)
	for i := range v {
		v[i] = float64(i%17) / 10
		k[i] = Kind(i % 3)
	}
	for b.Loop() {
		Bars(Default, 0, v, k, 5, "position", "KLD")
	}
}

func TestDotSizes(t *testing.T) {
	f8, a8 := DotSizes(8)
	f2k, a2k := DotSizes(2000)
	if f8 != 8 || a8 != 4 || f2k != 4 || a2k != 2 {
		t.Errorf("DotSizes: 8 → %v %v, 2000 → %v %v", f8, a8, f2k, a2k)
	}
}

func TestCursorHidden(t *testing.T) {
	s := Bars(Default, 0, []float64{1, 2}, nil, -1, "x", "y")
	if !strings.Contains(s, `class="cursor"`) || !strings.Contains(s, `visibility="hidden"`) {
		t.Errorf("no hidden cursor for sel -1: %s", s)
	}
	x, w := Default.Cursor(1, 2)
	if got := Default.IndexAt((x+w/2)/Default.W, 2); got != 1 {
		t.Errorf("the cursor's centre maps to %d, want 1", got)
	}
}

// A zoomed chart draws a slice of the positions: its axis counts from the
// slice's first position, and the cursor shows only for a selection
// inside it.
func TestZoomed(t *testing.T) {
	if got := posTicks(100, 50, 10); !slices.Equal(got, []int{100, 105, 110, 115, 120, 125, 130, 135, 140, 145}) {
		t.Errorf("posTicks(100, 50) = %v", got)
	}
	if got := posTicks(3, 8, 10); !slices.Equal(got, []int{3, 4, 5, 6, 7, 8, 9, 10}) {
		t.Errorf("posTicks(3, 8) = %v", got)
	}
	v := []float64{1, 2, 3, 4}
	in := Bars(Default, 100, v, nil, 102, "position", "KLD")
	if !strings.Contains(in, ">100</text>") || strings.Contains(in, ">0</text><text") || strings.Contains(in, `visibility="hidden"`) {
		t.Errorf("zoomed bars: axis or cursor wrong: %s", in)
	}
	x, _ := Default.Cursor(2, 4)
	if !strings.Contains(in, `class="cursor" x="`+n(x)+`"`) {
		t.Errorf("the cursor of position 102 is not at slice index 2 (x %s): %s", n(x), in)
	}
	if out := Scatter(Default, 100, v, nil, nil, -1, 20, "position", "m"); !strings.Contains(out, `visibility="hidden"`) {
		t.Errorf("a selection outside the slice shows a cursor: %s", out)
	}
}

// The frontier's line keeps its points within the x range and above zero,
// the marks are labelled dots, and the y axis is whole decades.
func TestFrontier(t *testing.T) {
	line := []Mark{{X: 4.5, Y: 0.02}, {X: 6.1, Y: 0.0016}, {X: 8.3, Y: 0.00007}, {X: 32, Y: 0}}
	marks := []Mark{{X: 4.5, Y: 0.019, Label: "q4", Class: "uniform"}, {X: 6.5, Y: 0.00094, Label: "recipe", Class: "recipe"}, {X: 6.5, Y: 0, Label: "zero"}}
	s := Frontier(Default, line, marks, 4, 9, "bits per weight", "mean KLD")
	tags := wellFormed(t, s)
	if tags["polyline"] != 1 || tags["circle"] != 2 {
		t.Errorf("tags %v: want one polyline and two dots (a zero KLD has no place on a log axis)", tags)
	}
	if got := strings.Count(strings.SplitN(strings.SplitN(s, `points="`, 2)[1], `"`, 2)[0], ","); got != 3 {
		t.Errorf("the line has %d points, want the 3 inside [4, 9]", got)
	}
	for _, want := range []string{">1e-5<", ">1e-1<", ">recipe<", ">q4<", ">4<", ">9<"} {
		if !strings.Contains(s, want) {
			t.Errorf("no %s in %s", want, s)
		}
	}
}
