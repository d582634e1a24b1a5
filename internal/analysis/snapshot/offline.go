package snapshot

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"logitscope/internal/format/dump"
	"logitscope/internal/format/receipt"
)

// Dropped is a dump file dropped on the page (binary or safetensors
// `logits`), with the receipt dropped beside it, if any.
type Dropped struct {
	Name    string
	Data    []byte
	Receipt []byte // nil: no receipt
}

// Offline compares two dropped dumps, as `logitscope report` compares two
// files: receipts are verified against the bytes they describe, and a
// panel's targets make the summary teacher-forced. textFor gets the dumps'
// vocabulary size and returns the token texts to show, or nil for ids
// only: the page has a tokenizer only for the models it serves.
func Offline(ref, test Dropped, textFor func(vocab int) func(id int) string) (*Doc, error) {
	a, err := ref.Read()
	if err != nil {
		return nil, err
	}
	b, err := test.Read()
	if err != nil {
		return nil, err
	}
	if a.Logits.Rows != b.Logits.Rows || a.Logits.Vocab != b.Logits.Vocab {
		return nil, fmt.Errorf("%s is %d rows × %d vocab, %s is %d rows × %d vocab: not the same geometry",
			ref.Name, a.Logits.Rows, a.Logits.Vocab, test.Name, b.Logits.Rows, b.Logits.Vocab)
	}
	if a.Targets != nil && b.Side.Receipt != nil && !slices.Equal(a.Targets, b.Targets) {
		return nil, fmt.Errorf("%s and %s were captured on different panels", ref.Name, test.Name)
	}
	var text func(int) string
	if textFor != nil {
		text = textFor(a.Logits.Vocab)
	}
	return Build(nil, a, b, a.Targets, text)
}

// Read parses the dump (labelled with its file name) and verifies its
// receipt against its bytes.
func (f Dropped) Read() (Capture, error) {
	var l *dump.Logits
	var err error
	if strings.HasSuffix(strings.ToLower(f.Name), ".safetensors") {
		l, _, err = dump.ParseSafetensors(f.Data, f.Name)
	} else {
		l, err = dump.Read(bytes.NewReader(f.Data), int64(len(f.Data)), f.Name)
	}
	if err != nil {
		return Capture{}, err
	}
	c := Capture{Side: Side{Label: f.Name}, Logits: l}
	if f.Receipt == nil {
		return c, nil
	}
	r, err := receipt.Parse(f.Receipt, f.Name+".receipt.json")
	if err != nil {
		return Capture{}, err
	}
	sum := sha256.Sum256(f.Data)
	if err := r.CheckSHA256(hex.EncodeToString(sum[:]), f.Name); err != nil {
		return Capture{}, err
	}
	c.Side.Receipt, c.Side.Device = r, r.Device
	if r.GGUF != nil {
		c.Side.GGUF = &GGUF{Name: r.Variant, SHA256: r.GGUF.SHA256, Types: r.GGUF.Types}
	}
	c.PromptIDs, c.Output, c.Targets = r.Request.PromptIDs, r.OutputIDs, r.Targets
	return c, nil
}
