package chain

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// A panel receipt that parses was sealed, names each window once, and
// says each has tokens and fewer prediction positions; every error names
// the file.
func FuzzParsePanel(f *testing.F) {
	good, err := json.Marshal(sample(f).Panel)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(bytes.Replace(good, []byte(`"code"`), []byte(`"math"`), 1))
	f.Add([]byte(`{"format":"logitscope.panel/1","windows":[],"seal":"00"}`))
	f.Add([]byte(`{"format":"logitscope.panel/1","windows":null,"seal":"5f2f3ef6fa0e7df2a18e0a54cf0f8b3f0d4a2c5c9d0c8a2a5b8c7f1e3d2b1a09"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePanel(data, "fuzz.receipt.json")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz.receipt.json: ") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if p.Format != PanelFormat || p.Seal == "" {
			t.Fatalf("parsed a panel with format %q and seal %q", p.Format, p.Seal)
		}
		seen := map[string]bool{}
		for _, w := range p.Windows {
			if seen[w.WindowID] || w.WindowID == "" || w.PredictionPositions < 1 || w.PredictionPositions >= w.Tokens {
				t.Fatalf("window %+v accepted", w)
			}
			seen[w.WindowID] = true
		}
		if err := p.Check(p); err != nil {
			t.Fatalf("a panel differs from itself: %v", err)
		}
	})
}
