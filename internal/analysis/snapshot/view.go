package snapshot

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"logitscope/internal/format/sidecar"
)

// Model is what the page knew of the run's model: its nature (package
// sidecar: synthetic, trained-demo, user) and one line about it, so that a
// shared snapshot says, as the run did, when the weights are random and
// the statistics say nothing of a model's quality.
type Model struct {
	Nature string `json:"nature"`
	About  string `json:"about,omitempty"`
}

// Window is one teacher-forced panel window as the token strip marks it:
// the token that opens it, fed as context and predicted by no row, and
// Pos, the first position it predicts. Prefix says that the token is not
// the text's but the model's BOS, put before each window.
type Window struct {
	Pos    int  `json:"pos"`
	Token  int  `json:"token"`
	Prefix bool `json:"prefix,omitempty"`
}

// Tabs of the view: which positions the token strip keeps (the others
// are dimmed) and the flagged-position buttons step between.
const (
	TabAll    = "all"    // flips and routing changes
	TabFlips  = "flips"  // argmax flips
	TabRoutes = "routes" // a mixture of experts' positions routed to another expert set
)

// View is what the page showed of a document when it was shared: the
// selected position, the token strip's tab and the charts' zoom, the
// positions [From, To) (To 0: all of them). A link's own view (pos, tab,
// zoom in its query) comes first.
type View struct {
	Pos  int    `json:"pos"`
	Tab  string `json:"tab,omitempty"`
	From int    `json:"from,omitempty"`
	To   int    `json:"to,omitempty"`
}

// Check says why v cannot be a view of n positions.
func (v View) Check(n int) error {
	switch {
	case v.Pos < 0 || v.Pos >= max(n, 1):
		return fmt.Errorf("pos %d: want 0 to %d", v.Pos, max(n-1, 0))
	case v.Tab != "" && !slices.Contains([]string{TabAll, TabFlips, TabRoutes}, v.Tab):
		return fmt.Errorf("tab %q: want %s, %s or %s", v.Tab, TabAll, TabFlips, TabRoutes)
	case v.To == 0 && v.From != 0:
		return fmt.Errorf("zoom from %d without an end", v.From)
	case v.To != 0 && (v.From < 0 || v.From >= v.To || v.To > n):
		return fmt.Errorf("zoom %d-%d: want 0 ≤ from < to ≤ %d", v.From, v.To, n)
	}
	return nil
}

// checkExtras checks the model note, the panel windows, the view and the
// conformance case.
func (d *Doc) checkExtras() error {
	n, vocab := d.Report.Rows, d.Report.Vocab
	if m := d.Model; m != nil {
		if err := (sidecar.Note{Nature: m.Nature, About: m.About}).Check(); err != nil {
			return fmt.Errorf("model: %v", err)
		}
	}
	for i, w := range d.Windows {
		switch {
		case w.Pos < 0 || w.Pos >= n || i > 0 && w.Pos <= d.Windows[i-1].Pos:
			return fmt.Errorf("windows[%d].pos %d: want ascending positions below %d", i, w.Pos, n)
		case w.Token < 0 || w.Token >= vocab:
			return fmt.Errorf("windows[%d].token %d: want 0 to %d", i, w.Token, vocab-1)
		}
	}
	if v := d.View; v != nil {
		if err := v.Check(n); err != nil {
			return fmt.Errorf("view: %v", err)
		}
	}
	if c := d.Conform; c != nil && (c.Case == "" || c.Pairs < 1 || c.Pair < 1 || c.Pair > c.Pairs) {
		return fmt.Errorf("conform: case %q, pair %d of %d: want a case name and 1 ≤ pair ≤ pairs", c.Case, c.Pair, c.Pairs)
	}
	return nil
}

// windows are a panel's windows as the strip marks them: each one's first
// token, which the rows after it are predicted from, and the first of
// those rows (a window of w tokens gives w − 1 rows); nil unless they
// account for exactly rows rows. Each window starts with prefix tokens
// that are not the text's.
func windows(ws [][]int, prefix, rows int) []Window {
	var out []Window
	pos := 0
	for _, w := range ws {
		if len(w) < 2 {
			return nil
		}
		out = append(out, Window{Pos: pos, Token: w[0], Prefix: prefix > 0})
		pos += len(w) - 1
	}
	if pos != rows {
		return nil
	}
	return out
}

// SetQuery puts v into a link's query: pos (when not 0), tab (when not
// all) and zoom=FROM-TO (when zoomed).
func (v View) SetQuery(q url.Values) {
	if v.Pos > 0 {
		q.Set("pos", strconv.Itoa(v.Pos))
	}
	if v.Tab != "" && v.Tab != TabAll {
		q.Set("tab", v.Tab)
	}
	if v.To > 0 {
		q.Set("zoom", strconv.Itoa(v.From)+"-"+strconv.Itoa(v.To))
	}
}

// ViewQuery reads a link's view: the parameters SetQuery writes, and
// whether it names any. A malformed value is left out (the view is a
// convenience: a link still opens), and the page checks the rest against
// the document it shows.
func ViewQuery(q url.Values) (View, bool) {
	var v View
	named := false
	if p, err := strconv.Atoi(q.Get("pos")); err == nil && p >= 0 {
		v.Pos, named = p, true
	}
	if t := q.Get("tab"); slices.Contains([]string{TabAll, TabFlips, TabRoutes}, t) {
		v.Tab, named = t, true
	}
	if a, b, ok := strings.Cut(q.Get("zoom"), "-"); ok {
		from, err1 := strconv.Atoi(a)
		to, err2 := strconv.Atoi(b)
		if err1 == nil && err2 == nil && from >= 0 && from < to {
			v.From, v.To, named = from, to, true
		}
	}
	return v, named
}
