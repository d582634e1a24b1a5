package session_test

import (
	"fmt"
	"os"
	"path/filepath"

	"logitscope/internal/run/session"
)

// A left-padded window in the seed's layout runs its attended span; its
// rows are the seed's prediction positions, mask[i] & mask[i+1]; the
// mask hashes as its JSON array (Python: sha256(b"[0,0,1,1,1,1]")).
func ExampleReadPanelFile() {
	dir, _ := os.MkdirTemp("", "panel")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "panel.jsonl")
	os.WriteFile(path, []byte(`{"window_id": "w0", "domain": "code", "role": "eval", "input_ids": [0, 0, 7, 8, 9, 10], "attention_mask": [0, 0, 1, 1, 1, 1]}`+"\n"), 0o644)
	p, err := session.ReadPanelFile(path, nil, 0, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	w := p.Windows[0]
	e := p.Receipt.Windows[0]
	fmt.Println(w.ID, w.Span, w.Tokens(), e.PredictionPositions, e.Domain, e.Role)
	fmt.Println(e.AttentionMaskSHA256)
	// Output:
	// w0 [2 6] [7 8 9 10] 3 code eval
	// eddaded6d8f14c1515788c2430d7e9a73b517828cbc7d5e192863afd63fcbf2b
}
