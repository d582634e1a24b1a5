package e2e

import (
	"context"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"logitscope/internal/analysis/margins"
)

// Every link the README offers on make run's server shows something real
// on the demo model: the comparison finishes; a link to the flips has
// flips to show; a greedy prompt is continued with text, not a loop; the
// form without a run is ready to run.
func TestREADMELinks(t *testing.T) {
	RequireUI(t)
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const origin = "http://127.0.0.1:8080"
	links := regexp.MustCompile(`<(`+regexp.QuoteMeta(origin)+`/[^>]*)>`).FindAllStringSubmatch(string(readme), -1)
	if len(links) < 4 {
		t.Fatalf("README.md offers %d links on %s; it had 4", len(links), origin)
	}
	site := StartSite(t)
	b := NewBrowser(t)
	for _, l := range links {
		link := l[1]
		t.Run(strings.TrimPrefix(link, origin), func(t *testing.T) {
			u, err := url.Parse(link)
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			at := site.URL + strings.TrimPrefix(link, origin)
			if q.Get("autorun") == "0" {
				ctx, cancel := context.WithTimeout(b.Ctx, time.Minute)
				defer cancel()
				if err := chromedp.Do(ctx, chromedp.Navigate(at)); err != nil {
					t.Fatal(err)
				}
				if state, err := b.WaitState(time.Minute, "idle"); err != nil {
					t.Fatalf("%q, %v", state, err)
				}
				if Eval[bool](b, `document.querySelector("#run").disabled`) {
					t.Error("the form's Run is disabled")
				}
				return
			}
			if state := b.Open(at, 3*time.Minute); state != "done" {
				t.Fatalf("ended in %q: %s", state, Eval[string](b, `String(window.logitscope.error)`))
			}
			doc, _ := pageDoc(t, b)
			flips := 0
			for _, p := range doc.Report.Positions {
				if p.Class != margins.Agree {
					flips++
				}
			}
			t.Logf("%d positions, %d flips", len(doc.Report.Positions), flips)
			if q.Get("tab") == "flips" && flips == 0 {
				t.Error("a link to the flips shows none")
			}
			if q.Get("mode") == "greedy" {
				var text strings.Builder
				for _, id := range doc.Tokens {
					text.WriteString(doc.Text(id))
				}
				t.Logf("continued with %q", text.String())
				if r := repeated(strings.Fields(text.String()), 3); r > 0.3 {
					t.Errorf("the greedy continuation loops (%.0f%% of its 3-word runs seen before): %q", 100*r, text.String())
				}
			}
		})
	}
}

// repeated is the share of words' n-word runs that occurred earlier.
func repeated(words []string, n int) float64 {
	seen := map[string]bool{}
	again, runs := 0, 0
	for i := 0; i+n <= len(words); i++ {
		k := strings.Join(words[i:i+n], " ")
		if seen[k] {
			again++
		}
		seen[k] = true
		runs++
	}
	if runs == 0 {
		return 0
	}
	return float64(again) / float64(runs)
}
