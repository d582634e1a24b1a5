package receipt

import (
	"bytes"
	"strings"
	"testing"

	"logitscope/internal/format/chain"
	"logitscope/internal/format/chain/chaintest"
)

// A receipt that parses was sealed and has this format, and survives being
// sealed again: Marshal of what Parse read parses back to the same receipt.
func FuzzParse(f *testing.F) {
	good, err := Marshal(sample())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	withChain := sample()
	withChain.Chain = chaintest.Chain(f, &chain.Panel{Windows: []chain.PanelWindow{{WindowID: "0", Tokens: 3, PredictionPositions: 2}}})
	withChain.Model, withChain.Request.PanelReceipt = withChain.Chain.Checkpoint.Model, withChain.Chain.Panel.Seal
	chained, err := Marshal(withChain)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(chained)
	f.Add(bytes.Replace(chained, []byte(`"runtime": "native"`), []byte(`"runtime": "wasm"`), 1))
	f.Add(bytes.Replace(good, []byte(`"q4"`), []byte(`"q8"`), 1))
	f.Add([]byte(`{"format":"logitscope.receipt/1","receipt_sha256":"00"}`))
	f.Add([]byte(`{"format":"logitscope.receipt/0","receipt_sha256":"22a9d06a5aa5ed9ded3deaf8d36e64ac6f6d1f0ba8eb4c8a5f1bba08dd3f8f73"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data, "fuzz.receipt.json")
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "fuzz.receipt.json: ") {
				t.Fatalf("error %q does not name the file", msg)
			}
			return
		}
		if r.Format != Format || r.Seal == "" {
			t.Fatalf("parsed a receipt with format %q and seal %q", r.Format, r.Seal)
		}
		again, err := Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := Parse(again, "resealed")
		if err != nil {
			t.Fatalf("a resealed receipt does not parse: %v", err)
		}
		if third, _ := Marshal(r2); !bytes.Equal(third, again) {
			t.Fatalf("resealing changed the receipt:\n%s\n%s", again, third)
		}
	})
}
