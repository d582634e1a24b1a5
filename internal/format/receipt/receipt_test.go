package receipt

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"logitscope/internal/format/chain"
	"logitscope/internal/format/chain/chaintest"
)

func sample() *Receipt {
	return &Receipt{
		Version: "devel", Model: "abc", Variant: "q4", VariantManifest: "def", Device: "cpu",
		Request:   Request{Mode: "greedy", PromptIDs: []int{1, 2, 3}, MaxNew: 4, Stops: []int{9}},
		OutputIDs: []int{5, 9},
		Dump:      Dump{SHA256: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", Rows: 2, Vocab: 10},
	}
}

func TestWriteReadCheck(t *testing.T) {
	dir := t.TempDir()
	dumpPath := filepath.Join(dir, "a.dump")
	os.WriteFile(dumpPath, nil, 0o644) // empty: its sha256 is the one in sample()
	if err := Write(Path(dumpPath), sample()); err != nil {
		t.Fatal(err)
	}
	r, err := Read(Path(dumpPath))
	if err != nil {
		t.Fatal(err)
	}
	if r.Seal == "" || r.Format != Format || r.Request.PromptIDs[2] != 3 {
		t.Fatalf("read back %+v", r)
	}
	if err := r.CheckDump(dumpPath); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(dumpPath, []byte{1}, 0o644)
	if err := r.CheckDump(dumpPath); err == nil || !strings.Contains(err.Error(), "not the one the receipt describes") {
		t.Fatalf("a changed dump passed: %v", err)
	}
	data, _ := os.ReadFile(Path(dumpPath))
	os.WriteFile(Path(dumpPath), bytes.Replace(data, []byte(`"q4"`), []byte(`"q8"`), 1), 0o644)
	if _, err := Read(Path(dumpPath)); err == nil || !strings.Contains(err.Error(), "modified after it was sealed") {
		t.Fatalf("a forged receipt was read: %v", err)
	}
}

func TestCompare(t *testing.T) {
	a, b := sample(), sample()
	if p := Compare(a, b); !p.SameModel || !p.SameSequence {
		t.Fatalf("%+v", p)
	}
	b.Request.PromptIDs = []int{1, 2}
	b.Model = "other"
	if p := Compare(a, b); p.SameModel || p.SameSequence {
		t.Fatalf("%+v", p)
	}
	// Panels are the same sequence when their windows hash alike.
	a.Request = Request{Mode: "panel", Panel: PanelSHA256([][]int{{1, 2}, {3, 4}})}
	b.Request = Request{Mode: "panel", Panel: PanelSHA256([][]int{{1, 2}, {3, 4}})}
	if !Compare(a, b).SameSequence {
		t.Fatal("equal panels differ")
	}
	b.Request.Panel = PanelSHA256([][]int{{1, 2, 3, 4}})
	if Compare(a, b).SameSequence {
		t.Fatal("different windows compare equal")
	}
}

// A receipt's chain is checked before its seal, and the receipt must be
// the one the chain names: its fingerprint and its panel receipt. Each
// mismatch is refused naming the field, even in a receipt sealed again.
func TestChainedReceipt(t *testing.T) {
	chained := func() *Receipt {
		r := sample()
		r.Chain = chaintest.Chain(t, &chain.Panel{Windows: []chain.PanelWindow{{WindowID: "0", Tokens: 3, PredictionPositions: 2}}})
		r.Model, r.Request.PanelReceipt = r.Chain.Checkpoint.Model, r.Chain.Panel.Seal
		return r
	}
	tests := []struct {
		name   string
		change func(r *Receipt)
		want   string
	}{
		{"as made", func(*Receipt) {}, ""},
		{"another model", func(r *Receipt) { r.Model = "abc" }, "x.receipt.json: receipt: model_sha256 abc…, but the checkpoint identity's is"},
		{"another panel", func(r *Receipt) { r.Request.PanelReceipt = "0123" }, "receipt: request.panel_receipt_sha256 0123…, but the panel receipt's seal is"},
		{"no panel", func(r *Receipt) { r.Chain.Panel = nil }, "but the chain has no panel receipt"},
		{"a link changed", func(r *Receipt) { r.Chain.Backend.Device = "gpu" }, "x.receipt.json: backend: seal "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := chained()
			tc.change(r)
			b, err := Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse(b, "x.receipt.json")
			if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v; want %q", err, tc.want)
			}
		})
	}
}
