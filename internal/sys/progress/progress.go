// Package progress reports how far a long step has come, in the form that
// suits where the report goes: a live bar on a terminal, plain lines in a
// log (a CI log gets no carriage returns to render as one line of ^M).
//
// One Meter serves a command's steps in turn: Start, Add as work is done,
// Done; then Start again for the next step.
package progress

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Unit is what a step counts: Bytes (shown as kB, MB, GB), or a plural
// noun such as "tensors" or "tokens".
type Unit string

// Bytes counts bytes.
const Bytes Unit = "bytes"

// A Meter shows one step at a time. A total of 0 or less means unknown:
// the count so far is shown without a percentage.
type Meter interface {
	Start(total int64, label string, unit Unit)
	Add(n int64)
	Done()
}

// New is the Meter for w: a bar when w is a terminal, else Lines. A nil w
// gives Discard.
func New(w io.Writer) Meter {
	if w == nil {
		return Discard
	}
	if IsTerminal(w) {
		return &Bar{w: w}
	}
	return NewLines(w)
}

// IsTerminal says whether w is a terminal that redraws a line on \r: a
// file on a TTY, TERM not dumb.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd())) && os.Getenv("TERM") != "dumb"
}

// Discard shows nothing.
var Discard Meter = discard{}

type discard struct{}

func (discard) Start(int64, string, Unit) {}
func (discard) Add(int64)                 {}
func (discard) Done()                     {}

// Track adapts the cumulative callbacks that loaders take (done of total
// so far) to m: the first call starts the step, the one that reaches
// total ends it.
func Track(m Meter, label string, unit Unit) func(done, total int64) {
	started, last := false, int64(0)
	return func(done, total int64) {
		if !started {
			m.Start(total, label, unit)
			started = true
		}
		m.Add(done - last)
		last = done
		if done >= total && total > 0 {
			m.Done()
			started, last = false, 0
		}
	}
}

// Bar is a terminal's live progress bar (github.com/schollz/progressbar:
// one bar redrawn in place, which is all a command's sequential steps
// need; mpb's concurrent bars would be unused weight).
type Bar struct {
	w   io.Writer
	bar *progressbar.ProgressBar
}

func (b *Bar) Start(total int64, label string, unit Unit) {
	b.Done()
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(b.w),
		progressbar.OptionSetDescription(label),
		progressbar.OptionSetWidth(30),
		progressbar.OptionThrottle(100 * time.Millisecond),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(b.w) }),
	}
	if unit == Bytes {
		opts = append(opts, progressbar.OptionShowBytes(true))
	} else {
		opts = append(opts, progressbar.OptionShowCount(), progressbar.OptionSetItsString(string(unit)))
	}
	if total <= 0 {
		total = -1 // a spinner
	}
	b.bar = progressbar.NewOptions64(total, opts...)
}

func (b *Bar) Add(n int64) {
	if b.bar != nil {
		b.bar.Add64(n)
	}
}

// Done ends the step, leaving its final state on its own line.
func (b *Bar) Done() {
	if b.bar == nil {
		return
	}
	if !b.bar.IsFinished() {
		b.bar.Finish() // prints the final state and, through OnCompletion, the newline
	}
	b.bar = nil
}

// Writer counts what is written through it on M, for a step whose output
// is its progress (export's GGUF file).
type Writer struct {
	W io.Writer
	M Meter
}

func (w Writer) Write(p []byte) (int, error) {
	n, err := w.W.Write(p)
	w.M.Add(int64(n))
	return n, err
}
