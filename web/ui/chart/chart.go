// Package chart draws the page's two charts as inline SVG text: KL
// divergence per position (bars) and the reference margin per position
// with the argmax flips marked (a scatter). It is plain geometry and string
// building, free of syscall/js, so it is tested natively; the page puts the
// text into the DOM and maps clicks back to positions with [Frame.IndexAt].
package chart

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"logitscope/web/ui/markup"
)

// Kind is how a position is coloured: the margins classes.
type Kind uint8

const (
	Agree Kind = iota // same argmax
	Close             // a flip within the noise
	Clear             // a flip against a clear preference
)

func (k Kind) class() string {
	switch k {
	case Close:
		return "close"
	case Clear:
		return "clear"
	}
	return "agree"
}

// Frame is a chart's viewBox and the plot area inside it.
type Frame struct {
	W, H                     float64 // the viewBox
	Left, Right, Top, Bottom float64 // margins around the plot area
}

// Default is the frame both charts use: wide and short, room for labels.
var Default = Frame{W: 1000, H: 240, Left: 64, Right: 16, Top: 14, Bottom: 40}

// PlotW is the width of the plot area.
func (f Frame) PlotW() float64 { return f.W - f.Left - f.Right }

// PlotH is the height of the plot area.
func (f Frame) PlotH() float64 { return f.H - f.Top - f.Bottom }

// X is the centre of position i's band when n positions share the width.
func (f Frame) X(i, n int) float64 {
	if n <= 0 {
		return f.Left
	}
	return f.Left + (float64(i)+0.5)*f.PlotW()/float64(n)
}

// Y maps v on the axis [0, top] to a viewBox y (top of the plot at top).
func (f Frame) Y(v, top float64) float64 {
	if top <= 0 {
		return f.H - f.Bottom
	}
	v = math.Max(0, math.Min(v, top))
	return f.H - f.Bottom - v/top*f.PlotH()
}

// IndexAt is the position under a click at fraction fx (0 at the left
// edge of the drawn SVG, 1 at the right) of n positions, or -1 outside the
// plot area.
func (f Frame) IndexAt(fx float64, n int) int {
	if n <= 0 || math.IsNaN(fx) {
		return -1
	}
	x := fx * f.W
	if x < f.Left || x > f.W-f.Right {
		return -1
	}
	i := int((x - f.Left) / f.PlotW() * float64(n))
	return min(max(i, 0), n-1)
}

// Ticks returns about n round values from 0 to at least max, and that top
// value: the axis runs from 0 to the last tick.
func Ticks(max float64, n int) ([]float64, float64) {
	if n < 1 {
		n = 1
	}
	if !(max > 0) || math.IsInf(max, 0) {
		return []float64{0, 1}, 1
	}
	step := niceStep(max / float64(n))
	top := math.Ceil(max/step-1e-9) * step
	ticks := []float64{}
	for i := 0; ; i++ {
		v := float64(i) * step
		if v > top+step/2 {
			break
		}
		ticks = append(ticks, v)
	}
	return ticks, top
}

// niceStep rounds x up to 1, 2, 2.5 or 5 times a power of ten.
func niceStep(x float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*p >= x*(1-1e-12) {
			return m * p
		}
	}
	return 10 * p
}

// Label formats a tick value briefly: 0.25, 1.5, 1e-05, 120.
func Label(v float64) string {
	if v == 0 {
		return "0"
	}
	a := math.Abs(v)
	if a >= 1e5 || a < 1e-3 {
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	// A tick is a step times a count: 3 × 0.05 is 0.15000000000000002.
	v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 12, 64), 64)
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// posTicks are the position axis labels: about n round positions from
// first to first+count−1.
func posTicks(first, count, n int) []int {
	if count <= 0 {
		return nil
	}
	step := max(1, int(niceStep(float64(count)/float64(n))))
	out := []int{}
	for p := (first + step - 1) / step * step; p < first+count; p += step {
		out = append(out, p)
	}
	return out
}

// svg builds through markup.Builder, like all of the page's innerHTML.
type svg struct{ markup.Builder }

// n formats a coordinate with two decimals at most, which keeps the text short.
func n(v float64) string { return strconv.FormatFloat(math.Round(v*100)/100, 'f', -1, 64) }

func (s *svg) open(f Frame, class, title string) {
	s.Open("svg", "xmlns", "http://www.w3.org/2000/svg", "class", "chart "+class,
		"viewBox", "0 0 "+n(f.W)+" "+n(f.H), "role", "img", "aria-label", title)
}

// axes draws the y grid with labels, the x axis with position labels and
// the two axis titles.
func (s *svg) axes(f Frame, ticks []float64, top float64, first, count int, xTitle, yTitle string) {
	x0, x1, yb := f.Left, f.W-f.Right, f.H-f.Bottom
	for _, t := range ticks {
		y := f.Y(t, top)
		s.line("grid", x0, y, x1, y)
		s.Elem("text", Label(t), "class", "tick", "x", n(x0-6), "y", n(y), "text-anchor", "end", "dominant-baseline", "middle")
	}
	s.line("axis", x0, yb, x1, yb)
	s.line("axis", x0, f.Top, x0, yb)
	for _, p := range posTicks(first, count, 10) {
		x := f.X(p-first, count)
		s.line("axis", x, yb, x, yb+4)
		s.Elem("text", strconv.Itoa(p), "class", "tick", "x", n(x), "y", n(yb+16), "text-anchor", "middle")
	}
	s.Elem("text", xTitle, "class", "title", "x", n(f.Left+f.PlotW()/2), "y", n(f.H-4), "text-anchor", "middle")
	s.Elem("text", yTitle, "class", "title", "transform", "translate(12 "+n(f.Top+f.PlotH()/2)+") rotate(-90)", "text-anchor", "middle")
}

func (s *svg) line(class string, x1, y1, x2, y2 float64) {
	s.Empty("line", "class", class, "x1", n(x1), "y1", n(y1), "x2", n(x2), "y2", n(y2))
}

// Cursor is the band that marks position sel of count: its left edge and
// width. The page moves the drawn cursor with it when the selection
// changes, without redrawing the chart.
func (f Frame) Cursor(sel, count int) (x, w float64) {
	if count <= 0 {
		return f.Left, 0
	}
	w = math.Max(f.PlotW()/float64(count), 2)
	return f.X(sel, count) - w/2, w
}

// cursor draws the selection band; hidden when sel is not a position.
func (s *svg) cursor(f Frame, sel, count int) {
	if count <= 0 {
		return
	}
	hidden := sel < 0 || sel >= count
	if hidden {
		sel = 0
	}
	x, w := f.Cursor(sel, count)
	attrs := []string{"class", "cursor", "x", n(x), "y", n(f.Top), "width", n(w), "height", n(f.PlotH())}
	if hidden {
		attrs = append(attrs, "visibility", "hidden")
	}
	s.Empty("rect", attrs...)
}

func finiteMax(vs ...[]float64) float64 {
	m := 0.0
	for _, v := range vs {
		for _, x := range v {
			if !math.IsNaN(x) && !math.IsInf(x, 0) && x > m {
				m = x
			}
		}
	}
	return m
}

// Bars draws values[i] (≥ 0) as one bar per position, coloured by kinds[i]
// (same length as values, or nil for all Agree), with sel highlighted (-1
// for none). values[i] is position first+i (a zoomed chart shows a slice;
// sel and the axis labels count from first). Bars of a kind are one path,
// so thousands of positions stay cheap to draw.
func Bars(f Frame, first int, values []float64, kinds []Kind, sel int, xTitle, yTitle string) string {
	var s svg
	count := len(values)
	s.open(f, "bars", yTitle+" per position")
	ticks, top := Ticks(finiteMax(values), 4)
	s.axes(f, ticks, top, first, count, xTitle, yTitle)
	s.cursor(f, sel-first, count)
	band := f.PlotW() / math.Max(float64(count), 1)
	w := band * 0.8
	if band < 3 {
		w = band // no gap when bars are thin
	}
	w = math.Max(w, 0.5)
	var paths [3]strings.Builder
	yb := f.H - f.Bottom
	for i, v := range values {
		if math.IsNaN(v) || v <= 0 {
			continue
		}
		k := Agree
		if i < len(kinds) {
			k = kinds[i]
		}
		y := f.Y(v, top)
		fmt.Fprintf(&paths[k], "M%s %sh%sV%sh-%sz", n(f.X(i, count)-w/2), n(yb), n(w), n(y), n(w))
	}
	for k := Agree; k <= Clear; k++ {
		if paths[k].Len() > 0 {
			s.Empty("path", "class", "bar "+k.class(), "d", paths[k].String())
		}
	}
	s.Close("svg")
	return s.String()
}

// DotSizes are the scatter's dot diameters (flips, agreeing positions)
// for count positions: large while there is room, down to a few units.
func DotSizes(count int) (flip, agree float64) {
	band := Default.PlotW() / math.Max(float64(count), 1)
	flip = math.Min(8, math.Max(4, band))
	return flip, flip / 2
}

// Scatter draws y[i] (≥ 0) per position as a dot coloured by kinds[i],
// flips larger than agreeing positions; boundary, when given (same length),
// is drawn as a dashed step line (the k·σ limit of each position), and
// hline ≥ 0 as a dashed horizontal line (a fixed limit; < 0 for none).
// y[i] is position first+i, as in Bars.
func Scatter(f Frame, first int, y []float64, kinds []Kind, boundary []float64, hline float64, sel int, xTitle, yTitle string) string {
	var s svg
	count := len(y)
	s.open(f, "scatter", yTitle+" per position")
	ticks, top := Ticks(finiteMax(y, boundary, []float64{hline}), 4)
	s.axes(f, ticks, top, first, count, xTitle, yTitle)
	s.cursor(f, sel-first, count)
	if len(boundary) == count && count > 0 {
		var d strings.Builder
		band := f.PlotW() / float64(count)
		for i, b := range boundary {
			x, yy := f.X(i, count)-band/2, f.Y(b, top)
			if i == 0 {
				fmt.Fprintf(&d, "M%s %s", n(x), n(yy))
			} else {
				fmt.Fprintf(&d, "V%s", n(yy))
			}
			fmt.Fprintf(&d, "H%s", n(x+band))
		}
		s.Empty("path", "class", "boundary", "d", d.String())
	}
	if hline >= 0 {
		yy := f.Y(hline, top)
		s.line("boundary", f.Left, yy, f.W-f.Right, yy)
	}
	// A zero-length segment with a round cap is a dot: one path per kind,
	// the dots smaller as the positions get more.
	var paths [3]strings.Builder
	flip, agree := DotSizes(count)
	for i, v := range y {
		if math.IsNaN(v) {
			continue
		}
		k := Agree
		if i < len(kinds) {
			k = kinds[i]
		}
		fmt.Fprintf(&paths[k], "M%s %sh0", n(f.X(i, count)), n(f.Y(v, top)))
	}
	for k := Agree; k <= Clear; k++ {
		if paths[k].Len() > 0 {
			w := flip
			if k == Agree {
				w = agree
			}
			s.Empty("path", "class", "dot "+k.class(), "stroke-width", n(w), "d", paths[k].String())
		}
	}
	s.Close("svg")
	return s.String()
}

// Mark is a point of Frontier's, labelled when Label is set.
type Mark struct {
	X, Y         float64
	Label, Class string
}

// Frontier draws a recipe's frontier: line (in order of x) as a polyline
// and marks as labelled dots, x linear over [x0, x1] and y on a log10 axis
// over the decades the visible points span; a point outside [x0, x1] or
// not positive (a log axis has no zero) is left out.
func Frontier(f Frame, line, marks []Mark, x0, x1 float64, xTitle, yTitle string) string {
	var s svg
	s.open(f, "frontier", yTitle+" against "+xTitle)
	in := func(m Mark) bool { return m.X >= x0 && m.X <= x1 && m.Y > 0 && !math.IsInf(m.Y, 0) }
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, m := range append(slices.Clone(line), marks...) {
		if in(m) {
			lo, hi = math.Min(lo, math.Log10(m.Y)), math.Max(hi, math.Log10(m.Y))
		}
	}
	if lo > hi {
		lo, hi = -6, 0
	}
	lo, hi = math.Floor(lo), math.Max(math.Ceil(hi), math.Floor(lo)+1)
	px := func(x float64) float64 { return f.Left + (x-x0)/(x1-x0)*f.PlotW() }
	py := func(y float64) float64 { return f.H - f.Bottom - (math.Log10(y)-lo)/(hi-lo)*f.PlotH() }
	xa, xb, yb := f.Left, f.W-f.Right, f.H-f.Bottom
	for d := lo; d <= hi; d++ {
		y := py(math.Pow(10, d))
		s.line("grid", xa, y, xb, y)
		s.Elem("text", "1e"+strconv.Itoa(int(d)), "class", "tick", "x", n(xa-6), "y", n(y), "text-anchor", "end", "dominant-baseline", "middle")
	}
	s.line("axis", xa, yb, xb, yb)
	s.line("axis", xa, f.Top, xa, yb)
	for x := math.Ceil(x0); x <= x1; x++ {
		s.line("axis", px(x), yb, px(x), yb+4)
		s.Elem("text", strconv.Itoa(int(x)), "class", "tick", "x", n(px(x)), "y", n(yb+16), "text-anchor", "middle")
	}
	s.Elem("text", xTitle, "class", "title", "x", n(f.Left+f.PlotW()/2), "y", n(f.H-4), "text-anchor", "middle")
	s.Elem("text", yTitle, "class", "title", "transform", "translate(12 "+n(f.Top+f.PlotH()/2)+") rotate(-90)", "text-anchor", "middle")
	var pts []string
	for _, m := range line {
		if in(m) {
			pts = append(pts, n(px(m.X))+","+n(py(m.Y)))
		}
	}
	if len(pts) > 1 {
		s.Empty("polyline", "class", "frontier-line", "points", strings.Join(pts, " "))
	}
	for _, m := range marks {
		if !in(m) {
			continue
		}
		s.Empty("circle", "class", "mark "+m.Class, "cx", n(px(m.X)), "cy", n(py(m.Y)), "r", "6")
		if m.Label != "" {
			s.Elem("text", m.Label, "class", "mark-label "+m.Class, "x", n(px(m.X)+9), "y", n(py(m.Y)-9))
		}
	}
	s.Close("svg")
	return s.String()
}
