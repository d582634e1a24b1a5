package chain

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"logitscope/internal/format/seal"
	"logitscope/internal/sys/tempfile"
)

// Panel is the panel receipt: every window's id, document, domain and
// role, and the sha256 of its token ids and of its attention mask (all
// ones when the panel gave none), with its prediction positions (the
// rows i where mask[i] and mask[i+1] are both 1). A capture receipt
// carries it, so a window's logits can be checked against the tokens the
// panel said, and a panel file that changed is refused naming the window.
type Panel struct {
	Format  string        `json:"format"`
	Windows []PanelWindow `json:"windows"`
	Seal    string        `json:"seal"`
}

func (*Panel) name() string      { return "panel" }
func (*Panel) format() string    { return PanelFormat }
func (l *Panel) sealed() *string { return &l.Seal }
func (l *Panel) header() *string { return &l.Format }

// PanelWindow is one window's entry.
type PanelWindow struct {
	WindowID            string `json:"window_id"`
	DocumentID          string `json:"document_id,omitempty"`
	Domain              string `json:"domain,omitempty"`
	Role                string `json:"role,omitempty"`
	Tokens              int    `json:"tokens"`
	TokenIDsSHA256      string `json:"token_ids_sha256"`
	AttentionMaskSHA256 string `json:"attention_mask_sha256"`
	PredictionPositions int    `json:"prediction_positions"`
}

// PanelPath is where a panel's receipt lies beside it.
func PanelPath(panel string) string { return panel + ".receipt.json" }

// Check compares the recorded panel with local's (the panel file read
// now), window by window, naming the first that differs:
// `panel: window 7: attention_mask_sha256 ab12… != cd34…`.
func (p *Panel) Check(local *Panel) error {
	if len(p.Windows) != len(local.Windows) {
		return fmt.Errorf("panel: %d windows, the panel file has %d", len(p.Windows), len(local.Windows))
	}
	for i, w := range p.Windows {
		g := local.Windows[i]
		if w.WindowID != g.WindowID {
			return fmt.Errorf("panel: window %d of the receipt is %q, the panel file's is %q", i+1, w.WindowID, g.WindowID)
		}
		for _, f := range []struct{ field, want, got string }{
			{"token_ids_sha256", w.TokenIDsSHA256, g.TokenIDsSHA256},
			{"attention_mask_sha256", w.AttentionMaskSHA256, g.AttentionMaskSHA256},
			{"document_id", w.DocumentID, g.DocumentID},
			{"domain", w.Domain, g.Domain},
			{"role", w.Role, g.Role},
			{"tokens", fmt.Sprint(w.Tokens), fmt.Sprint(g.Tokens)},
			{"prediction_positions", fmt.Sprint(w.PredictionPositions), fmt.Sprint(g.PredictionPositions)},
		} {
			if f.want != f.got {
				return fmt.Errorf("panel: window %s: %s %s != %s", w.WindowID, f.field, short(f.want), short(f.got))
			}
		}
	}
	return nil
}

// WritePanel seals p and writes it at path, whole or not at all.
func WritePanel(path string, p *Panel) error {
	if err := Seal(p); err != nil {
		return err
	}
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := tempfile.Write(path, func(w io.Writer) error {
		_, err := w.Write(append(b, '\n'))
		return err
	})
	if err != nil {
		return err
	}
	return tempfile.Rename(tempfile.Move{Temp: tmp, Path: path})
}

// ReadPanel reads and verifies a panel receipt.
func ReadPanel(path string) (*Panel, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParsePanel(b, path)
}

// ParsePanel verifies a panel receipt's seal and decodes it; name is for
// messages.
func ParsePanel(b []byte, name string) (*Panel, error) {
	if err := seal.Verify(b, Field, name); err != nil {
		return nil, err
	}
	var p Panel
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	if err := verify(&p); err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	seen := map[string]bool{}
	for i, w := range p.Windows {
		switch {
		case w.WindowID == "":
			return nil, fmt.Errorf("%s: window %d has no window_id", name, i+1)
		case seen[w.WindowID]:
			return nil, fmt.Errorf("%s: window_id %q is listed twice", name, w.WindowID)
		case w.Tokens < 2 || w.PredictionPositions < 1 || w.PredictionPositions >= w.Tokens:
			return nil, fmt.Errorf("%s: window %s: %d tokens and %d prediction positions", name, w.WindowID, w.Tokens, w.PredictionPositions)
		}
		seen[w.WindowID] = true
	}
	return &p, nil
}
