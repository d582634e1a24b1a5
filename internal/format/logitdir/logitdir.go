// Package logitdir reads and writes a windowed capture: a directory with
// one safetensors file per panel window (an F32 `logits` tensor of
// (prediction_positions, vocab), and a mixture of experts' `routes`) and a
// sealed capture-receipt.json that lists every file with its bytes and
// sha256. It is the seed capture script's layout: its receipts, and
// logitscope's own, read the same way, whatever other fields they carry.
//
// A capture sharded across machines is several such directories, each
// with the windows of its shard; Open takes them all and puts the windows
// in window-id order, so that one report over the shards is the report
// of one unsharded run.
package logitdir

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"logitscope/internal/format/chain"
	"logitscope/internal/format/dump"
	"logitscope/internal/format/routing"
	"logitscope/internal/format/safetensors"
	"logitscope/internal/format/seal"
	"logitscope/internal/sys/tempfile"
)

// ReceiptName is the receipt's file name inside the directory.
const ReceiptName = "capture-receipt.json"

// Format is what logitscope writes in a receipt's format field.
const Format = "logitscope.capture/1"

// File is one window's entry in the receipt.
type File struct {
	// WindowID names the window; the seed writes numbers or strings,
	// both read as their text.
	WindowID            ID     `json:"window_id"`
	TokenIDsSHA256      string `json:"token_ids_sha256"`
	PredictionPositions int    `json:"prediction_positions"`
	Path                string `json:"path"` // relative to the directory
	Bytes               int64  `json:"bytes"`
	SHA256              string `json:"sha256"`
	// AttentionMaskSHA256 and DocumentID are the window's as its panel
	// receipt has them (logitscope's captures write them; the seed's may
	// not).
	AttentionMaskSHA256 string `json:"attention_mask_sha256,omitempty"`
	DocumentID          string `json:"document_id,omitempty"`
	// Domain and Role are the window's, when the panel says.
	Domain string `json:"domain,omitempty"`
	Role   string `json:"role,omitempty"`
}

// ID is a window id, a JSON number or string, kept as text.
type ID string

func (id *ID) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*id = ID(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("window_id %s: want a number or a string", b)
	}
	*id = ID(n.String())
	return nil
}

// Receipt is capture-receipt.json: the fields logitscope reads and
// writes. Other tools' fields stay in the file and in its seal.
type Receipt struct {
	Format     string `json:"format,omitempty"`
	Model      string `json:"model_sha256,omitempty"`
	Variant    string `json:"variant,omitempty"`
	Device     string `json:"device,omitempty"`
	Vocab      int    `json:"vocab,omitempty"`
	Shard      string `json:"shard,omitempty"` // i/n of a sharded capture
	LogitFiles []File `json:"logit_files"`
	// Chain is where the logits came from (package chain): the checkpoint's
	// files, the variant's contract, the checkpoint and backend
	// identities, the panel receipt; Backend and PanelReceipt name the
	// links the receipt stands on by their seals.
	Chain        *chain.Chain `json:"chain,omitempty"`
	Backend      string       `json:"backend_sha256,omitempty"`
	PanelReceipt string       `json:"panel_receipt_sha256,omitempty"`
	Seal         string       `json:"seal"`
}

// TokensSHA256 is a window's token_ids_sha256 as logitscope writes it:
// the sha256 of the ids as a JSON array.
func TokensSHA256(ids []int) string { return chain.IntsSHA256(ids) }

// WindowPath is where logitscope writes window i's file.
func WindowPath(i int) string { return fmt.Sprintf("logits/window-%04d.safetensors", i) }

// WriteWindow writes window i's logits (and routes) into dir at
// WindowPath(i), whole or not at all, with the window's id, token and
// mask hashes (its panel receipt entry) and meta as safetensors metadata,
// and returns its receipt entry.
func WriteWindow(dir string, i int, l *dump.Logits, w chain.PanelWindow, meta map[string]string) (File, error) {
	f := File{WindowID: ID(w.WindowID), TokenIDsSHA256: w.TokenIDsSHA256, AttentionMaskSHA256: w.AttentionMaskSHA256,
		DocumentID: w.DocumentID, Domain: w.Domain, Role: w.Role, PredictionPositions: l.Rows, Path: WindowPath(i)}
	all := map[string]string{"window_id": w.WindowID, "token_ids_sha256": w.TokenIDsSHA256}
	if w.AttentionMaskSHA256 != "" {
		all["attention_mask_sha256"] = w.AttentionMaskSHA256
	}
	for k, v := range meta {
		all[k] = v
	}
	path := filepath.Join(dir, filepath.FromSlash(f.Path))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return File{}, err
	}
	if err := dump.WriteSafetensors(path, l, all); err != nil {
		return File{}, err
	}
	return Measure(dir, f)
}

// Measure is f with the bytes and sha256 of its file in dir.
func Measure(dir string, f File) (File, error) {
	file, err := os.Open(filepath.Join(dir, filepath.FromSlash(f.Path)))
	if err != nil {
		return f, err
	}
	defer file.Close()
	h := sha256.New()
	n, err := io.Copy(h, file)
	f.Bytes, f.SHA256 = n, hex.EncodeToString(h.Sum(nil))
	return f, err
}

// WriteReceipt seals r and writes it into dir, whole or not at all; a
// receipt with a chain names its backend and panel receipt by their seals.
func WriteReceipt(dir string, r *Receipt) error {
	if r.Format == "" {
		r.Format = Format
	}
	if r.Chain != nil {
		r.Backend = r.Chain.Backend.Seal
		if r.Chain.Panel != nil {
			r.PanelReceipt = r.Chain.Panel.Seal
		}
	}
	b, err := seal.Marshal(r, "seal", func(s string) { r.Seal = s })
	if err != nil {
		return err
	}
	path := filepath.Join(dir, ReceiptName)
	tmp, err := tempfile.Write(path, func(w io.Writer) error { _, err := w.Write(b); return err })
	if err != nil {
		return err
	}
	return tempfile.Rename(tempfile.Move{Temp: tmp, Path: path})
}

// ReadReceipt reads dir's receipt and checks it: its chain link by link
// (package chain), that the receipt names the chain's backend and panel
// receipt, that each window is the panel receipt's, then its own seal and
// its entries' paths. So a change is named where it was made: the link,
// the window, else the receipt. It does not read the window files
// (Verify does).
func ReadReceipt(dir string) (*Receipt, error) {
	path := filepath.Join(dir, ReceiptName)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Receipt
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	if r.Chain != nil {
		if err := r.checkChain(); err != nil {
			return nil, fmt.Errorf("%s: %v", path, err)
		}
	}
	if err := seal.Verify(b, "seal", path); err != nil {
		return nil, err
	}
	for _, f := range r.LogitFiles {
		if !filepath.IsLocal(filepath.FromSlash(f.Path)) || strings.Contains(f.Path, `\`) {
			return nil, fmt.Errorf("%s: window %s: path %q is not a path inside the capture", path, f.WindowID, f.Path)
		}
		if f.PredictionPositions < 0 || f.Bytes < 0 {
			return nil, fmt.Errorf("%s: window %s: negative prediction_positions or bytes", path, f.WindowID)
		}
	}
	return &r, nil
}

// checkChain verifies the chain and what the receipt says of it.
func (r *Receipt) checkChain() error {
	c := r.Chain
	if err := c.Verify(); err != nil {
		return err
	}
	switch {
	case r.Backend != c.Backend.Seal:
		return fmt.Errorf("capture receipt: backend_sha256 %.12s…, but the backend's seal is %.12s…", r.Backend, c.Backend.Seal)
	case r.Model != c.Checkpoint.Model:
		return fmt.Errorf("capture receipt: model_sha256 %.12s…, but the checkpoint identity's is %.12s…", r.Model, c.Checkpoint.Model)
	case c.Panel == nil && r.PanelReceipt != "":
		return fmt.Errorf("capture receipt: panel_receipt_sha256 %.12s…, but the chain has no panel receipt", r.PanelReceipt)
	case c.Panel == nil:
		return nil
	case r.PanelReceipt != c.Panel.Seal:
		return fmt.Errorf("capture receipt: panel_receipt_sha256 %.12s…, but the panel receipt's seal is %.12s…", r.PanelReceipt, c.Panel.Seal)
	}
	panel := map[ID]chain.PanelWindow{}
	for _, w := range c.Panel.Windows {
		panel[ID(w.WindowID)] = w
	}
	for _, f := range r.LogitFiles {
		w, ok := panel[f.WindowID]
		if !ok {
			return fmt.Errorf("window %s: not in the panel receipt", f.WindowID)
		}
		for _, x := range []struct{ field, got, want string }{
			{"token_ids_sha256", f.TokenIDsSHA256, w.TokenIDsSHA256},
			{"attention_mask_sha256", f.AttentionMaskSHA256, w.AttentionMaskSHA256},
			{"document_id", f.DocumentID, w.DocumentID},
			{"domain", f.Domain, w.Domain},
			{"role", f.Role, w.Role},
			{"prediction_positions", strconv.Itoa(f.PredictionPositions), strconv.Itoa(w.PredictionPositions)},
		} {
			if x.got != x.want {
				return fmt.Errorf("window %s: %s %q, the panel receipt says %q", f.WindowID, x.field, x.got, x.want)
			}
		}
	}
	return nil
}

// Verify checks that each window file is the one the receipt lists: its
// size and sha256.
func (r *Receipt) Verify(dir string) error {
	for _, f := range r.LogitFiles {
		got, err := Measure(dir, f)
		if err != nil {
			return err
		}
		if got.Bytes != f.Bytes || got.SHA256 != f.SHA256 {
			return fmt.Errorf("%s: %d bytes, sha256 %.12s…; the receipt says %d bytes, sha256 %.12s…: not the file the capture wrote",
				filepath.Join(dir, filepath.FromSlash(f.Path)), got.Bytes, got.SHA256, f.Bytes, f.SHA256)
		}
	}
	return nil
}

// Window is one window of a capture that may span several directories.
type Window struct {
	File
	Dir string
}

// Capture is the windows of one or more directories (a capture's
// shards), in window-id order, every file verified.
type Capture struct {
	Dirs     []string
	Receipts []*Receipt
	Windows  []Window
}

// Open reads the receipts of dirs, verifies every window file, and orders
// the windows by id (numerically where they are numbers). A window listed
// twice is refused.
func Open(dirs ...string) (*Capture, error) {
	c := &Capture{Dirs: dirs}
	seen := map[ID]string{}
	for _, d := range dirs {
		r, err := ReadReceipt(d)
		if err != nil {
			return nil, err
		}
		if err := r.Verify(d); err != nil {
			return nil, err
		}
		if err := sameCapture(r, d, c); err != nil {
			return nil, err
		}
		c.Receipts = append(c.Receipts, r)
		for _, f := range r.LogitFiles {
			if other, ok := seen[f.WindowID]; ok {
				return nil, fmt.Errorf("window %s is in %s and in %s", f.WindowID, other, d)
			}
			seen[f.WindowID] = d
			c.Windows = append(c.Windows, Window{File: f, Dir: d})
		}
	}
	slices.SortStableFunc(c.Windows, func(a, b Window) int { return compareIDs(a.WindowID, b.WindowID) })
	return c, nil
}

// sameCapture refuses a shard (r, in dir) whose chain is not the first
// shard's: another checkpoint identity (files, variant, kept tensors) or
// another panel. Their backends may differ: shards run on several
// machines.
func sameCapture(r *Receipt, dir string, c *Capture) error {
	if len(c.Receipts) == 0 {
		return nil
	}
	first, firstDir := c.Receipts[0], c.Dirs[0]
	switch {
	case (r.Chain == nil) != (first.Chain == nil):
		return fmt.Errorf("%s and %s: one receipt has a chain and the other none: the shards are of different captures", firstDir, dir)
	case r.Chain == nil:
		return nil
	case r.Chain.Checkpoint.Seal != first.Chain.Checkpoint.Seal:
		return fmt.Errorf("%s: checkpoint identity %.12s…, %s's is %.12s…: the shards are of different captures", dir, r.Chain.Checkpoint.Seal, firstDir, first.Chain.Checkpoint.Seal)
	case r.PanelReceipt != first.PanelReceipt:
		return fmt.Errorf("%s: panel receipt %.12s…, %s's is %.12s…: the shards ran different panels", dir, r.PanelReceipt, firstDir, first.PanelReceipt)
	}
	return nil
}

func compareIDs(a, b ID) int {
	x, errA := strconv.ParseInt(string(a), 10, 64)
	y, errB := strconv.ParseInt(string(b), 10, 64)
	switch {
	case errA == nil && errB == nil:
		return cmp.Compare(x, y)
	case errA == nil:
		return -1
	case errB == nil:
		return 1
	}
	return strings.Compare(string(a), string(b))
}

// IsCapture says whether path is a directory with a capture receipt.
func IsCapture(path string) bool {
	_, err := os.Stat(filepath.Join(path, ReceiptName))
	return err == nil
}

// Rows opens the windows (in order) as one dump.Reader of all their rows,
// window after window; vocab is checked against every window's file.
// targets are the windows' target tokens, window after window, as their
// files' "targets" metadata holds them (a JSON list, one per prediction
// position): what makes a report teacher-forced; nil when a window has
// none.
func Rows(name string, windows []Window) (rows *dump.Reader, targets []int, err error) {
	if len(windows) == 0 {
		return nil, nil, errors.New(name + ": no windows")
	}
	files := make([]*safetensors.File, len(windows))
	closeAll := func() error {
		for _, f := range files {
			if f != nil {
				f.Close()
			}
		}
		return nil
	}
	start := make([]int, len(windows)+1) // window w's rows are [start[w], start[w+1])
	vocab := 0
	var routes *routing.Routes
	targeted := true
	for w, win := range windows {
		path := filepath.Join(win.Dir, filepath.FromSlash(win.Path))
		f, err := safetensors.Open(path)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		files[w] = f
		r, err := dump.SafetensorsReader(f, path)
		if err == nil {
			if w == 0 {
				vocab = r.Vocab
			}
			routes, err = appendRoutes(routes, r.Routes, w == 0)
		}
		switch {
		case err != nil:
			err = fmt.Errorf("%s: %v", path, err)
		case r.Vocab != vocab:
			err = fmt.Errorf("%s: vocab %d, the capture's first window has %d", path, r.Vocab, vocab)
		case r.Rows != win.PredictionPositions:
			err = fmt.Errorf("%s: %d rows, the receipt says %d prediction positions", path, r.Rows, win.PredictionPositions)
		default:
			meta, ok := f.Metadata["targets"]
			targeted = targeted && ok
			var t []int
			if ok && (json.Unmarshal([]byte(meta), &t) != nil || len(t) != r.Rows) {
				err = fmt.Errorf("%s: metadata targets: want %d token ids", path, r.Rows)
			}
			targets = append(targets, t...)
		}
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		start[w+1] = start[w] + r.Rows
	}
	if !targeted {
		targets = nil
	}
	return dump.Concat(name, start[len(windows)], vocab, routes, closeAll, func(first int, dst []float32) error {
		for len(dst) > 0 {
			w, _ := slices.BinarySearch(start, first+1)
			w--
			n := min(len(dst)/vocab, start[w+1]-first)
			if err := files[w].ReadFloat32At(dump.LogitsTensor, (first-start[w])*vocab, dst[:n*vocab]); err != nil {
				return err
			}
			first, dst = first+n, dst[n*vocab:]
		}
		return nil
	}), targets, nil
}

// appendRoutes is all's routes followed by next's: every window of a
// capture has routes, or none has.
func appendRoutes(all, next *routing.Routes, first bool) (*routing.Routes, error) {
	switch {
	case first:
		if next == nil {
			return nil, nil
		}
		return &routing.Routes{Layout: next.Layout, Rows: next.Rows, IDs: slices.Clone(next.IDs)}, nil
	case (all == nil) != (next == nil):
		return nil, errors.New("routes in some windows and not in others")
	case all == nil:
		return nil, nil
	case !all.Layout.Equal(next.Layout):
		return nil, fmt.Errorf("routes of %s, the first window's are of %s", next.Layout, all.Layout)
	}
	all.Rows += next.Rows
	all.IDs = append(all.IDs, next.IDs...)
	return all, nil
}
