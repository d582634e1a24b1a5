package progress

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// clock advances by the step it is given on each reading.
type clock struct {
	t    time.Time
	step time.Duration
}

func (c *clock) now() time.Time { c.t = c.t.Add(c.step); return c.t }

// Lines prints a line per 10% only when the step is slow enough to want
// one, always a final line with the time, never a carriage return.
func TestLines(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tick  time.Duration // per reading of the clock
		total int64
		unit  Unit
		adds  []int64
		want  string
	}{
		{"fast step: its final line only", time.Millisecond, 100, "tensors", []int64{10, 20, 30, 40},
			"load: 100 tensors in 0.0 s\n"},
		{"slow step: a line per 10%", 3 * time.Second, 100, "tensors", []int64{5, 5, 30, 60},
			"load: 10% (10/100 tensors)\nload: 40% (40/100 tensors)\nload: 100% (100/100 tensors)\nload: 100 tensors in 15.0 s\n"},
		{"bytes under a megabyte are not 0 MB", 3 * time.Second, 600_000, Bytes, []int64{158_000, 442_000},
			"load: 26% (158 kB of 600 kB)\nload: 100% (600 kB of 600 kB)\nload: 600 kB in 9.0 s\n"},
		{"unknown total: the amount so far", 3 * time.Second, 0, Bytes, []int64{2_500_000},
			"load: 2.5 MB\nload: 2.5 MB in 6.0 s\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			l := NewLines(&buf)
			c := &clock{step: tc.tick}
			l.now = c.now
			l.Start(tc.total, "load", tc.unit)
			for _, n := range tc.adds {
				l.Add(n)
			}
			l.Done()
			l.Done() // a second Done prints nothing
			if got := buf.String(); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// Track turns cumulative callbacks into one step per total reached, so a
// loader's callbacks for two steps print two final lines.
func TestTrack(t *testing.T) {
	var buf bytes.Buffer
	f := Track(NewLines(&buf), "upload", "tensors")
	for _, d := range []int64{1, 2, 3, 1, 2, 3} {
		f(d, 3)
	}
	if got := strings.Count(buf.String(), "upload: 3 tensors in"); got != 2 {
		t.Errorf("%d final lines, want 2:\n%s", got, buf.String())
	}
}

// A buffer is no terminal: New gives plain lines.
func TestNewOnAPipe(t *testing.T) {
	if _, ok := New(&bytes.Buffer{}).(*Lines); !ok {
		t.Error("New(buffer) is not Lines")
	}
	if New(nil) != Discard {
		t.Error("New(nil) is not Discard")
	}
}

func TestAmount(t *testing.T) {
	for _, tc := range []struct {
		n    int64
		unit Unit
		want string
	}{
		{0, Bytes, "0 B"}, {999, Bytes, "999 B"}, {1000, Bytes, "1.0 kB"}, {34_567, Bytes, "34.6 kB"},
		{999_960, Bytes, "1.0 MB"}, {123_456_789, Bytes, "123 MB"}, {1_200_000_000, Bytes, "1.2 GB"},
		{7, "tokens", "7 tokens"},
	} {
		if got := Amount(tc.n, tc.unit); got != tc.want {
			t.Errorf("Amount(%d, %s) = %q, want %q", tc.n, tc.unit, got, tc.want)
		}
	}
}

// Writer counts the bytes that pass, whatever the chunks.
func TestWriter(t *testing.T) {
	var log bytes.Buffer
	l := NewLines(&log)
	l.Start(3000, "copy", Bytes)
	var dst bytes.Buffer
	w := Writer{W: &dst, M: l}
	if _, err := io.Copy(w, iotest.OneByteReader(strings.NewReader(strings.Repeat("x", 1500)))); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(strings.Repeat("y", 1500))); err != nil {
		t.Fatal(err)
	}
	l.Done()
	if !strings.HasPrefix(log.String(), "copy: 3.0 kB in ") || dst.Len() != 3000 {
		t.Errorf("%q, %d bytes copied", log.String(), dst.Len())
	}
}
