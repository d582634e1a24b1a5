package snapshot

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"slices"

	"logitscope/internal/analysis/margins"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/receipt"
	"logitscope/internal/format/safetensors"
)

// Dropped is a dump file dropped on the page (binary or safetensors
// `logits`), with the receipt dropped beside it, if any. File is read a
// block of rows at a time, never whole: a dropped dump may be larger than
// the page's memory.
type Dropped struct {
	Name    string
	File    io.ReaderAt
	Size    int64
	Receipt []byte // nil: no receipt
}

// Offline compares two dropped dumps, as `logitscope report` compares two
// files: receipts are verified against the bytes they describe, and a
// panel's targets make the summary teacher-forced. textFor gets the dumps'
// vocabulary size and returns the token texts to show, or nil for ids
// only: the page has a tokenizer only for the models it serves.
func Offline(ref, test Dropped, textFor func(vocab int) func(id int) string) (*Doc, error) {
	a, err := ref.Open()
	if err != nil {
		return nil, err
	}
	b, err := test.Open()
	if err != nil {
		return nil, err
	}
	if a.Rows.Rows != b.Rows.Rows || a.Rows.Vocab != b.Rows.Vocab {
		return nil, fmt.Errorf("%s is %d rows × %d vocab, %s is %d rows × %d vocab: not the same geometry",
			ref.Name, a.Rows.Rows, a.Rows.Vocab, test.Name, b.Rows.Rows, b.Rows.Vocab)
	}
	if a.Targets != nil && b.Side.Receipt != nil && !slices.Equal(a.Targets, b.Targets) {
		return nil, fmt.Errorf("%s and %s were captured on different panels", ref.Name, test.Name)
	}
	var text func(int) string
	if textFor != nil {
		text = textFor(a.Rows.Vocab)
	}
	d, err := Build(nil, a, b, a.Targets, text)
	if err != nil {
		return nil, err
	}
	// By the domains and roles of the panel the receipts bind, as report
	// prints them.
	if p, err := receipt.Panel(a.Side.Receipt, b.Side.Receipt, ref.Name, test.Name); err != nil {
		return nil, err
	} else if p != nil {
		if d.Breakdown, err = d.Report.BreakdownOf(margins.PanelGroups(p)); err != nil {
			return nil, err
		}
	}
	// A binary dump was hashed as it was read: a document of a dump its
	// receipt does not describe is never returned.
	for _, c := range []struct {
		cap  Capture
		name string
	}{{a, ref.Name}, {b, test.Name}} {
		if sum, ok := c.cap.Rows.SHA256(); ok && c.cap.Side.Receipt != nil {
			if err := c.cap.Side.Receipt.CheckSHA256(sum, c.name); err != nil {
				return nil, err
			}
		}
	}
	return d, nil
}

// Open opens the dump (labelled with its file name) to be read row by
// row and parses its receipt: a safetensors dump's is checked against its
// bytes now (a pass over the file), a binary dump's once its rows are read
// (Offline).
func (f Dropped) Open() (Capture, error) {
	var rows *dump.Reader
	var err error
	if dump.IsSafetensors(f.Name) {
		var st *safetensors.File
		if st, err = safetensors.NewFile(f.File, f.Size, f.Name); err == nil {
			rows, err = dump.SafetensorsReader(st, f.Name)
		}
	} else {
		rows, err = dump.NewReader(f.File, f.Size, f.Name)
	}
	if err != nil {
		return Capture{}, err
	}
	c := Capture{Side: Side{Label: f.Name}, Rows: rows}
	if f.Receipt == nil {
		return c, nil
	}
	r, err := receipt.Parse(f.Receipt, f.Name+".receipt.json")
	if err != nil {
		return Capture{}, err
	}
	if !dump.IsSafetensors(f.Name) {
		rows.Hash()
	} else {
		h := sha256.New()
		if _, err := io.CopyBuffer(h, io.NewSectionReader(f.File, 0, f.Size), make([]byte, 4<<20)); err != nil {
			return Capture{}, fmt.Errorf("%s: %v", f.Name, err)
		}
		if err := r.CheckSHA256(hex.EncodeToString(h.Sum(nil)), f.Name); err != nil {
			return Capture{}, err
		}
	}
	c.SetReceipt(r)
	return c, nil
}

// SetReceipt takes what a verified receipt says of the capture: its
// device, its GGUF file, the prompt and the tokens its rows predict.
func (c *Capture) SetReceipt(r *receipt.Receipt) {
	c.Side.Receipt, c.Side.Device = r, r.Device
	if r.GGUF != nil {
		c.Side.GGUF = &GGUF{Name: r.Variant, SHA256: r.GGUF.SHA256, Types: r.GGUF.Types}
	}
	c.PromptIDs, c.Output, c.Targets = r.Request.PromptIDs, r.OutputIDs, r.Targets
}
