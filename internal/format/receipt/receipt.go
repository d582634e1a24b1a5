// Package receipt records how a logit dump was made, sealed like a variant
// manifest: which checkpoint and variant, which request (prompt ids or
// panel), and the dump's sha256. A report that reads two receipts can say
// whether both sides came from the same checkpoint and token sequence.
package receipt

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"

	"logitscope/internal/format/chain"
	"logitscope/internal/format/checkpoint"
	"logitscope/internal/format/seal"
	"logitscope/internal/sys/tempfile"
)

// Format names this receipt layout.
const Format = "logitscope.receipt/1"

// Receipt is <dump>.receipt.json.
type Receipt struct {
	Format          string  `json:"format"`
	Version         string  `json:"logitscope_version"`
	Model           string  `json:"model_sha256"` // checkpoint.Fingerprint
	Variant         string  `json:"variant"`      // f32, q8, q6, q4
	VariantManifest string  `json:"variant_manifest_sha256,omitempty"`
	VariantPolicy   string  `json:"variant_policy,omitempty"` // which matrices it quantizes, when not all
	GGUF            *GGUF   `json:"gguf,omitempty"`           // the weights run are a llama.cpp GGUF file: the variant, or the model itself (then its sha256 is model_sha256)
	Hub             *Hub    `json:"hub,omitempty"`            // the weights run are a checkpoint another tool quantized (GPTQ, AWQ, …)
	Device          string  `json:"device"`
	Request         Request `json:"request"`
	OutputIDs       []int   `json:"output_ids,omitempty"` // greedy: the tokens chosen
	Targets         []int   `json:"targets,omitempty"`    // panel: the token each row predicts
	Dump            Dump    `json:"dump"`
	// Chain is where the rows came from, from the checkpoint's files to
	// the backend (package chain); absent in receipts made before it.
	Chain *chain.Chain `json:"chain,omitempty"`
	Seal  string       `json:"receipt_sha256"`
}

// GGUF identifies a llama.cpp file run as the variant or as the model.
type GGUF struct {
	SHA256 string `json:"sha256"`
	// Types is the file's tensors per ggml type ("Q4_K": 169), the mix a
	// quantization recipe such as Q4_K_M chose, as llama.cpp's loader
	// lists it.
	Types map[string]int `json:"types"`
}

// Hub identifies a hub-quantized checkpoint run as the variant.
type Hub struct {
	// Format is its format and settings, "gptq 4-bit g128 sym"
	// (model.Quantized.Format).
	Format string `json:"format"`
	// SHA256 is its files' fingerprint, as model_sha256 is the model's
	// (checkpoint.Fingerprint).
	SHA256 string `json:"sha256"`
}

// Request is what was asked for.
type Request struct {
	Mode      string `json:"mode"` // greedy, forced (the reference's tokens fed back) or panel
	PromptIDs []int  `json:"prompt_ids,omitempty"`
	// Prompt is the text PromptIDs encode, as the checkpoint's chat
	// template rendered it, so a reader sees what the model was asked.
	Prompt  string `json:"prompt,omitempty"`
	MaxNew  int    `json:"max_new,omitempty"`
	Stops   []int  `json:"stops,omitempty"`
	Panel   string `json:"panel_sha256,omitempty"` // PanelSHA256 of the windows
	Windows int    `json:"windows,omitempty"`
	// Prefix is the ids (the model's BOS, as transformers adds it) that
	// each window of a text panel starts with; absent: none.
	Prefix []int `json:"prefix_ids,omitempty"`
	// Follow is the sha256 of the dump whose prompt and output tokens a
	// forced capture fed back.
	Follow string `json:"follow_sha256,omitempty"`
	// PanelReceipt is the seal of the panel's receipt (chain.Panel), which
	// binds each window's tokens, mask, document, domain and role.
	PanelReceipt string `json:"panel_receipt_sha256,omitempty"`
}

// Dump describes the dump file.
type Dump struct {
	SHA256 string `json:"sha256"`
	Rows   int    `json:"rows"`
	Vocab  int    `json:"vocab"`
}

// Path is the receipt's path beside a dump.
func Path(dumpPath string) string { return dumpPath + ".receipt.json" }

// Version is this build's version: the VCS revision when the binary was
// built from a checkout, else "devel".
func Version() string {
	v := "devel"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v = s.Value[:12]
			}
		}
	}
	return v
}

// PanelSHA256 identifies a panel by its token windows.
func PanelSHA256(windows [][]int) string {
	b, _ := json.Marshal(windows)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// Write seals r and writes it atomically.
func Write(path string, r *Receipt) error {
	tmp, err := WriteTemp(path, r)
	if err != nil {
		return err
	}
	return tempfile.Rename(tempfile.Move{Temp: tmp, Path: path})
}

// WriteTemp seals r and writes it to a new temporary beside path, for a
// caller that puts it in place together with its dump (tempfile.Rename).
func WriteTemp(path string, r *Receipt) (string, error) {
	data, err := Marshal(r)
	if err != nil {
		return "", err
	}
	return tempfile.Write(path, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// Marshal seals r (setting its Format and Seal) and encodes it.
func Marshal(r *Receipt) ([]byte, error) {
	r.Format = Format
	return seal.Marshal(r, "receipt_sha256", func(s string) { r.Seal = s })
}

// Read verifies the seal of the receipt at path and decodes it.
func Read(path string) (*Receipt, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return Parse(data, path)
}

// Parse verifies the seal of a receipt's bytes and decodes them; name is
// for messages (the page passes a dropped file's name).
//
// A receipt with a chain has it checked link by link first, so that a
// change is named by the link it broke rather than by the receipt's seal.
func Parse(data []byte, name string) (*Receipt, error) {
	var r Receipt
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if r.Chain != nil {
		if err := r.checkChain(); err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
	}
	if err := seal.Verify(data, "receipt_sha256", name); err != nil {
		return nil, err
	}
	if r.Format != Format {
		return nil, fmt.Errorf("%s: format %q, want %q", name, r.Format, Format)
	}
	return &r, nil
}

// checkChain verifies the chain and that the receipt is the one it names:
// the checkpoint identity's fingerprint and the panel receipt's seal.
func (r *Receipt) checkChain() error {
	c := r.Chain
	if err := c.Verify(); err != nil {
		return err
	}
	switch {
	case r.Model != c.Checkpoint.Model:
		return fmt.Errorf("receipt: model_sha256 %.12s…, but the checkpoint identity's is %.12s…", r.Model, c.Checkpoint.Model)
	case c.Panel != nil && r.Request.PanelReceipt != c.Panel.Seal:
		return fmt.Errorf("receipt: request.panel_receipt_sha256 %.12s…, but the panel receipt's seal is %.12s…", r.Request.PanelReceipt, c.Panel.Seal)
	case c.Panel == nil && r.Request.PanelReceipt != "":
		return fmt.Errorf("receipt: request.panel_receipt_sha256 %.12s…, but the chain has no panel receipt", r.Request.PanelReceipt)
	}
	return nil
}

// CheckDump verifies that dumpPath is the dump the receipt describes.
func (r *Receipt) CheckDump(dumpPath string) error {
	sum, err := checkpoint.FileSHA256(dumpPath)
	if err != nil {
		return err
	}
	return r.CheckSHA256(sum, dumpPath)
}

// CheckSHA256 says whether sum (hex) is the sha256 of the dump the receipt
// describes; name is the dump's, for the message.
func (r *Receipt) CheckSHA256(sum, name string) error {
	if sum != r.Dump.SHA256 {
		return fmt.Errorf("%s: sha256 %.12s…, its receipt says %.12s…: the dump is not the one the receipt describes", name, sum, r.Dump.SHA256)
	}
	return nil
}

// Provenance compares two receipts: same checkpoint, and the same token
// sequence (the same panel, or the same prompt).
type Provenance struct {
	SameModel    bool `json:"same_model"`
	SameSequence bool `json:"same_sequence"`
}

// Compare says whether ref and test came from the same checkpoint and token
// sequence: the same panel, the same prompt fed back with the same output
// tokens (a forced capture of the other), or greedy decodes that chose
// the same tokens.
func Compare(ref, test *Receipt) Provenance {
	a, b := ref.Request, test.Request
	same := a.Panel == b.Panel && slices.Equal(a.PromptIDs, b.PromptIDs)
	if a.Mode == "panel" || b.Mode == "panel" {
		same = same && a.Mode == b.Mode
	} else {
		same = same && slices.Equal(ref.OutputIDs, test.OutputIDs)
	}
	return Provenance{SameModel: ref.Model == test.Model, SameSequence: same}
}

// Panel is the panel receipt both sides' chains bind (the reference's),
// nil when the reference's has none; a test captured on another panel is
// refused. A report breaks its statistics down by that panel's windows.
func Panel(ref, test *Receipt, refName, testName string) (*chain.Panel, error) {
	of := func(r *Receipt) *chain.Panel {
		if r == nil || r.Chain == nil {
			return nil
		}
		return r.Chain.Panel
	}
	p, q := of(ref), of(test)
	if p != nil && q != nil && p.Seal != q.Seal {
		return nil, fmt.Errorf("%s and %s: panel receipts %.12s… and %.12s…: the sides ran different panels", refName, testName, p.Seal, q.Seal)
	}
	return p, nil
}
