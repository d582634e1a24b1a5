package logitdir

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzReceipt: whatever capture-receipt.json holds, reading and opening
// the capture returns an error or a capture, never a panic, and never
// reads outside the directory.
func FuzzReceipt(f *testing.F) {
	f.Add([]byte(`{"logit_files":[{"window_id":1,"path":"logits/window-0001.safetensors","bytes":3,"sha256":"00"}],"seal":"x"}`))
	f.Add([]byte(`{"logit_files":[{"window_id":"a","path":"../x"}]}`))
	f.Add([]byte(`{"logit_files":null,"seal":""}`))
	f.Add([]byte(`{"chain":{},"logit_files":[]}`))
	f.Add([]byte(`{"chain":{"inventory":{},"contract":{},"checkpoint":{},"backend":{},"untouched":{"tensors":[{}]},"panel":{"windows":null}},"logit_files":[{"window_id":0}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, ReceiptName), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if c, err := Open(dir); err == nil {
			if r, _, err := Rows(dir, c.Windows); err == nil {
				r.Close()
			}
		}
	})
}
