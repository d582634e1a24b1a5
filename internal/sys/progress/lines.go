package progress

import (
	"fmt"
	"io"
	"time"
)

// Lines writes plain lines, for logs: one when a step has come another
// Step of the way (10%) and at least Every since the last line, and one
// when it ends, with its time. A step that ends within Every prints only
// its final line.
type Lines struct {
	w     io.Writer
	Every time.Duration
	Step  float64
	now   func() time.Time // time.Now; tests set a clock

	label       string
	unit        Unit
	total, done int64
	start, last time.Time
	shown       float64 // the fraction last printed
	on          bool
}

// NewLines writes to w at most every 2 s and every 10%.
func NewLines(w io.Writer) *Lines {
	return &Lines{w: w, Every: 2 * time.Second, Step: 0.1, now: time.Now}
}

func (l *Lines) Start(total int64, label string, unit Unit) {
	l.Done()
	t := l.now()
	l.label, l.unit, l.total, l.done, l.start, l.last, l.shown, l.on = label, unit, total, 0, t, t, 0, true
}

func (l *Lines) Add(n int64) {
	if !l.on {
		return
	}
	l.done += n
	t := l.now()
	if t.Sub(l.last) < l.Every {
		return
	}
	if f := l.fraction(); l.total <= 0 || f-l.shown >= l.Step {
		fmt.Fprintf(l.w, "%s: %s\n", l.label, l.state())
		l.last, l.shown = t, f
	}
}

func (l *Lines) Done() {
	if !l.on {
		return
	}
	l.on = false
	fmt.Fprintf(l.w, "%s: %s in %.1f s\n", l.label, Amount(l.done, l.unit), l.now().Sub(l.start).Seconds())
}

func (l *Lines) fraction() float64 {
	if l.total <= 0 {
		return 0
	}
	return float64(l.done) / float64(l.total)
}

// state is "45% (1.2 MB of 2.6 MB)", or the amount alone without a total.
func (l *Lines) state() string {
	if l.total <= 0 {
		return Amount(l.done, l.unit)
	}
	if l.unit == Bytes {
		return fmt.Sprintf("%d%% (%s of %s)", int(100*l.fraction()), Amount(l.done, l.unit), Amount(l.total, l.unit))
	}
	return fmt.Sprintf("%d%% (%d/%d %s)", int(100*l.fraction()), l.done, l.total, l.unit)
}

// Amount is n in unit: bytes in decimal units with three significant
// figures at most ("512 B", "34.5 kB", "1.2 GB"), else "n unit".
func Amount(n int64, unit Unit) string {
	if unit != Bytes {
		return fmt.Sprintf("%d %s", n, unit)
	}
	const units = "kMGTPE"
	if n < 1000 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/1000, 0
	for v >= 999.95 && i < len(units)-1 {
		v /= 1000
		i++
	}
	if v >= 99.95 {
		return fmt.Sprintf("%.0f %cB", v, units[i])
	}
	return fmt.Sprintf("%.1f %cB", v, units[i])
}
